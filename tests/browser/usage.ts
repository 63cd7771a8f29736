// Compiled (never run) by npm.test.mjs with `tsc --strict` against the package's index.d.ts:
// every public function, class member and option, used as a page would use them.
import {
  type ErrorCode,
  type Quantize,
  type LoadOptions,
  type ProgressEvent,
  type St5Error,
  clearCache,
  createCollection,
  createIndex,
  deleteCollection,
  importCollection,
  openCollection,
  snippet,
  type SavedCollection,
  type CollectionResults,
  type Schema,
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

export async function collections(files: Map<string, Blob>): Promise<number> {
  const model = await load(files, { device: 'cpu' });
  const schema: Schema = {
    id: 'id',
    text: [{ name: 'title', boost: 2 }, { name: 'body' }],
    fields: [
      { name: 'year', type: 'number' },
      { name: 'tags', type: 'string[]' },
    ],
    language: 'english',
    passages: 'paragraphs',
  };
  const col = await createCollection(model, schema, { overlap: 8 });
  const added: { documents: number; passages: number } = await col.add([{ id: 'a', title: 'T', body: 'B', year: 1 }]);
  await col.upsert([{ id: 'a', body: 'C' }]);
  const removed: boolean = col.remove('a');
  const doc: Record<string, unknown> | undefined = col.get('a');
  const r: CollectionResults = await col.search('q', {
    mode: 'hybrid',
    k: 5,
    where: { year: { gte: 1 } },
    facets: ['tags'],
    fusion: 'zscore:0.65',
    prefix: true,
  });
  const text = await col.search('q', { where: 'year >= 1' });
  const [qv] = await model.embed(['q']);
  const given = await col.search('q', { mode: 'vector', vector: qv });
  const file: Blob = await col.export({ quantize: 'int8' });
  const again = await importCollection(model, file, { name: 'mine' });
  const p = r.hits[0]?.passages[0];
  const pieces = p
    ? snippet(p)
        .filter((s) => s.marked)
        .map((s) => s.text.length)
    : [];
  const total =
    added.passages +
    Number(removed) +
    Number(doc === undefined) +
    r.matched +
    text.hits.length +
    given.hits.length +
    again.size +
    col.passages;
  col.dispose();
  again.dispose();
  const saved: SavedCollection = await openCollection(model, 'notes', schema, { overlap: 8, compactBytes: 1 << 20 });
  const reopened = await openCollection(model, 'notes');
  await saved.add([{ id: 'b', title: 'T', body: 'B', year: 2 }]);
  await saved.saved();
  await saved.compact();
  const { baseBytes, logBytes, segments, generation } = saved.storage;
  const gone: boolean = await deleteCollection(saved.name);
  const code: ErrorCode = 'storage';
  saved.dispose();
  reopened.dispose();
  return (
    total +
    pieces.length +
    saved.restored +
    baseBytes +
    logBytes +
    segments +
    generation +
    Number(gone) +
    code.length +
    (p ? p.start + p.end + p.highlights.length + (p.score ?? 0) : 0) +
    (r.facets.tags?.[0]?.[1] ?? 0)
  );
}
