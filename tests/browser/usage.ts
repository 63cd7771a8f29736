// Compiled (never run) by npm.test.mjs with `tsc --strict` against the package's index.d.ts:
// every public function, class member and option, used as a page would use them.
import {
  type ErrorCode,
  type Quantize,
  type LoadOptions,
  type ProgressEvent,
  type St5Error,
  clearCache,
  createIndex,
  importIndex,
  load,
  loadInWorker,
  openIndex,
} from 'st5';

export async function usage(files: Map<string, Blob>): Promise<number> {
  const seen: ProgressEvent[] = [];
  const options: LoadOptions = {
    device: 'auto',
    variant: 'enc-mean',
    batchSize: 32,
    maxSeqLength: 128,
    maxBufferBytes: 1 << 28,
    threads: 2,
    startWorkers: true,
    cache: true,
    prompt: '/prompts/banking77.safetensors',
    revision: 'main',
    hubUrl: 'https://huggingface.co',
    onProgress: (e) => seen.push(e),
  };
  const model = await load('/models/st5-small/', options);
  const rows: Float32Array[] = await model.embed(['a', 'b']);
  const flat: Float32Array = await model.embedFlat(['a']);
  const plan: number[][] = model.planBatches(['a', 'b']);
  const facts: [string, number, number, string, string, number] = [
    model.device,
    model.dim,
    model.maxSeqLength,
    model.variant,
    model.fingerprint,
    model.threads,
  ];
  const pool: [number, number] = [await model.startWorkers(), model.maxThreads];
  const worker = await loadInWorker(files, { device: 'cpu' });
  await worker.embed(['c']);
  await worker.startWorkers();
  const index = await createIndex(model, { device: 'cpu', name: 'docs', maxBufferBytes: 1 << 20, shardRows: 64 });
  const { added, ms } = await index.add(['x', 'y'], { batchSize: 8, onProgress: (p) => p.done / p.total });
  await index.addVectors(['z'], new Float32Array(model.dim));
  const small = await createIndex(model, { quantize: 'binary', oversample: 8, rescore: 'memory' });
  const mode: Quantize = small.quantize;
  const where: 'opfs' | 'memory' | null = small.rescore;
  small.dispose();
  const { hits, embedMs, searchMs } = await index.search('x', 3);
  const perQuery = await index.searchVectors(flat, 2);
  const vectors: Float32Array = await index.vectors();
  await index.save();
  const file: Blob = await index.export();
  const copy = await importIndex(model, file, { device: 'auto' });
  const opened = await openIndex(model, ['x'], { name: 'docs', batchSize: 4 });
  const reason: string | null = opened.reason;
  try {
    await model.embed([]);
  } catch (e) {
    const code: ErrorCode | undefined = (e as St5Error).code;
    void code;
  }
  copy.dispose();
  index.dispose();
  await worker.dispose();
  await model.dispose();
  await clearCache();
  void [
    plan,
    facts,
    added,
    ms,
    embedMs,
    searchMs,
    perQuery,
    vectors,
    reason,
    copy.size,
    copy.device,
    copy.shards,
    copy.bytes,
    mode,
    where,
  ];
  return (
    pool[0] + pool[1] + rows.length + hits.length + opened.restored + index.embedded + index.texts.length + seen.length
  );
}
