// The npm-import test: `npm pack` the package, install the tarball into a scratch plain-ESM app,
// serve it and the reference fixture models from localhost, and drive it in headless Chromium
// (WebGPU on SwiftShader, and the CPU) through `load` and `loadInWorker`. Embeddings are compared
// with the Python reference (tests/reference/make_fixtures.py) to ≤ 1e-4.
//
//   node tests/browser/npm.test.mjs     (after `bash pkg/build.sh` and the release `st5` binary,
//                                         which writes the int8 models; scripts/test.sh runs all)

import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import {
  FIXTURES,
  ROOT,
  expected,
  installPackage,
  launch,
  maxAbsDiff,
  open,
  runCases,
  serve,
  softwareAdapter,
  writeIndexPage,
} from './harness.mjs';
import { DEFAULT_MODEL } from '../../www/serve.mjs';

const TOL = 1e-4;
// The CPU path, on one thread or a pool, within 1e-5 of the reference.
const CPU_TOL = 1e-5;
// int8 weights on the tiny random fixture (tests/quant.rs states why): against the f32 reference.
const INT8_TOL = 5e-2;
const ST = 'st-enc-mean-relu';
// The built-in default model (www/serve.mjs names it; served at /shipped/).
const DEFAULT = basename(DEFAULT_MODEL);
const HF = 'hf-t5-gated-bf16-sharded';

const { app } = installPackage();
writeIndexPage(app);
// The ST fixture in int8, and that int8 model's dequantized f32 copy, written by `st5 quantize`.
const quantized = mkdtempSync(join(tmpdir(), 'st5-int8-'));
const st5 = join(process.env.CARGO_TARGET_DIR ?? join(ROOT, 'target'), 'release/st5');
const quantize = (model, dtype, out) =>
  execFileSync(st5, ['quantize', '--model', model, '--dtype', dtype, '--output', join(quantized, out)]);
quantize(join(FIXTURES, ST), 'int8', 'int8');
quantize(join(quantized, 'int8'), 'f32', 'dequantized');
// Real vectors for the quantized index's recall: 20,000 documents and 200 held-out queries from
// shared/data (scripts/index-corpus.sh), embedded natively by st5-mini (the fast model).
const recall = mkdtempSync(join(tmpdir(), 'st5-recall-'));
const RECALL_DOCS = 20000;
const RECALL_QUERIES = 200;
execFileSync('bash', [
  join(ROOT, 'scripts/index-corpus.sh'),
  String(RECALL_DOCS + RECALL_QUERIES),
  join(recall, 'corpus.txt'),
  process.env.ST5_DATA ?? join(ROOT, '../shared/data'),
]);
execFileSync(st5, [
  'embed',
  '--model',
  join(ROOT, 'models/st5-mini'),
  '--input',
  join(recall, 'corpus.txt'),
  '--output',
  join(recall, 'vectors.npy'),
]);
// An index of the ST fixture's sentences built by the CLI, for the page to open from a URL.
const built = mkdtempSync(join(tmpdir(), 'st5-built-'));
const BUILT_DOCS = [...new Set(expected(ST).sentences.filter((t) => t.trim() && !t.includes('\n')))];
writeFileSync(join(built, 'corpus.txt'), BUILT_DOCS.join('\n') + '\n');
execFileSync(st5, [
  'index',
  'build',
  '--model',
  join(FIXTURES, ST),
  '--corpus',
  join(built, 'corpus.txt'),
  '--output',
  join(built, 'int8.st5index'),
]);
const builtHits = (q) =>
  execFileSync(st5, ['index', 'query', '--model', join(FIXTURES, ST), join(built, 'int8.st5index'), '-k', '3', q])
    .toString()
    .trim()
    .split('\n')
    .map((l) => l.split('\t'))
    .map(([, score, text]) => ({ text, score: Number(score) }));
// The Hugging Face fixtures hold no tokenizer; the real T5 one (in the ST fixture) is served in.
const server = await serve(
  // A fake Hugging Face hub: `{hub}/{id}/resolve/{revision}/{file}`.
  {
    '/': app,
    '/models/': FIXTURES,
    '/quantized/': quantized,
    '/recall/': recall,
    '/built/': built,
    '/shipped/': DEFAULT_MODEL,
    '/hub/st5-test/tiny/resolve/main/': join(FIXTURES, ST),
  },
  { overlay: { [`/models/${HF}/tokenizer.json`]: join(FIXTURES, ST, 'tokenizer.json') } },
);
const browser = await launch();
const context = await browser.newContext();
// Keep every GPUDevice the page creates, so that a test can lose it for real.
await context.addInitScript(() => {
  if (!globalThis.GPUAdapter) return;
  const request = GPUAdapter.prototype.requestDevice;
  GPUAdapter.prototype.requestDevice = async function (...args) {
    const device = await request.apply(this, args);
    (globalThis.__gpuDevices ??= []).push(device);
    return device;
  };
});
const { page, logs } = await open(context, `${server.url}/`);

const st = expected(ST);
const hf = expected(HF);
const modelHits = (model) =>
  [...server.hits].filter(([p]) => p.startsWith(`/models/${model}/`)).reduce((n, [, c]) => n + c, 0);

/** Loads through the package in the page and embeds `texts`; returns rows and facts. */
function embedIn(page, { url, options = {}, texts, worker = false }) {
  return page.evaluate(
    async ({ url, options, texts, worker }) => {
      const events = [];
      const t0 = performance.now();
      const m = await (worker ? st5.loadInWorker : st5.load)(url, { ...options, onProgress: (e) => events.push(e) });
      const rows = await m.embed(texts);
      const out = {
        rows: rows.map((r) => Array.from(r)),
        device: m.device,
        dim: m.dim,
        events,
        ms: performance.now() - t0,
      };
      await m.dispose();
      return out;
    },
    { url, options, texts, worker },
  );
}

const results = {};
const failed = await runCases([
  [
    'url_load_matches_reference_on_webgpu',
    async () => {
      const r = await embedIn(page, { url: `/models/${ST}/`, options: { device: 'webgpu' }, texts: st.sentences });
      if (r.device !== 'webgpu') throw new Error(`device ${r.device}`);
      const err = maxAbsDiff(r.rows, st.embeddings['enc-mean']);
      if (!(err <= TOL)) throw new Error(`max abs error ${err}`);
      const files = new Set(r.events.filter((e) => e.stage === 'download').map((e) => e.file));
      for (const f of ['model.safetensors', '2_Dense/model.safetensors', 'tokenizer.json', 'modules.json']) {
        if (!files.has(f)) throw new Error(`no progress event for ${f}: ${[...files]}`);
      }
      const done = r.events.filter((e) => e.file === 'model.safetensors').at(-1);
      if (done.loaded !== done.total || !(done.total > 0)) throw new Error(`last progress ${JSON.stringify(done)}`);
      if (!r.events.some((e) => e.stage === 'init') || r.events.at(-1).stage !== 'ready')
        throw new Error('no init/ready events');
      results.webgpu = r.rows;
      return `max abs error ${err.toExponential(2)}, ${files.size} files with progress`;
    },
  ],
  [
    'url_load_matches_reference_on_cpu_and_webgpu_agrees',
    async () => {
      const r = await embedIn(page, { url: `/models/${ST}/`, options: { device: 'cpu' }, texts: st.sentences });
      if (r.device !== 'cpu') throw new Error(`device ${r.device}`);
      const err = maxAbsDiff(r.rows, st.embeddings['enc-mean']);
      const vsGpu = maxAbsDiff(r.rows, results.webgpu);
      if (!(err <= CPU_TOL && vsGpu <= TOL)) throw new Error(`max abs error ${err}, cpu vs webgpu ${vsGpu}`);
      return `max abs error ${err.toExponential(2)}, cpu vs webgpu ${vsGpu.toExponential(2)}`;
    },
  ],
  [
    // The built-in default (int8, on the teacher's WordPiece vocabulary) against sentence-transformers
    // on the same weights dequantized in Python (make_fixtures.py --shipped), on both devices.
    'shipped_default_model_matches_reference_on_cpu_and_webgpu',
    async () => {
      const want = JSON.parse(readFileSync(join(FIXTURES, `${DEFAULT}-expected.json`), 'utf8'));
      const errs = [];
      for (const [device, tol] of [
        ['cpu', CPU_TOL],
        ['webgpu', TOL],
      ]) {
        // The reference computes in f32 on the dequantized weights; the CPU's int8 computation is
        // checked by the next case.
        const options = { device, compute: 'f32' };
        const r = await embedIn(page, { url: '/shipped/', options, texts: want.sentences });
        const err = maxAbsDiff(r.rows, want.embeddings['enc-mean']);
        if (r.device !== device || !(err <= tol)) throw new Error(`${device} (${r.device}): max abs error ${err}`);
        errs.push(`${device} ${err.toExponential(2)}`);
      }
      return `${DEFAULT}: max abs error ${errs.join(', ')}`;
    },
  ],
  [
    // The default is int8: on the CPU it keeps its weights int8 and multiplies in int8, within
    // cosine 0.997 of the f32 computation (the BERT default's outlier channels, multiplied in f32
    // as calibrated by `st5 quantize`: 0.99767 natively, tests/quant.rs; the Sentence-T5 models
    // stay above 0.999), holding at most 0.35x the f32 computation's weight bytes;
    // and a pool's default size counts those bytes: with 8 cores faked, 8 workers start, whether
    // `startWorkers` at load, `createIndex` or the first call with more than one batch starts them.
    'int8_compute_tracks_f32_and_the_pool_uses_every_core',
    async () => {
      const want = JSON.parse(readFileSync(join(FIXTURES, `${DEFAULT}-expected.json`), 'utf8'));
      const r = await page.evaluate(
        async ({ texts }) => {
          const facts = async (compute, device = 'cpu') => {
            const m = await st5.load('/shipped/', { device, threads: 1, compute });
            const rows = (await m.embed(texts)).map((x) => Array.from(x));
            const out = { rows, arithmetic: m.arithmetic, weightBytes: m.weightBytes, device: m.device };
            await m.dispose();
            return out;
          };
          const int8 = await facts('auto');
          const f32 = await facts('f32');
          // On WebGPU the weights stay int8 in GPU memory; the products are f32.
          const gpu = { int8: await facts('auto', 'webgpu'), f32: await facts('f32', 'webgpu') };
          const real = Object.getOwnPropertyDescriptor(Navigator.prototype, 'hardwareConcurrency');
          Object.defineProperty(Navigator.prototype, 'hardwareConcurrency', { get: () => 8, configurable: true });
          const sleep = () => new Promise((ok) => setTimeout(ok, 50));
          try {
            // Started at load: all 8 workers load before any call.
            const m = await st5.load('/shipped/', { device: 'cpu', startWorkers: true });
            const early = { maxThreads: m.maxThreads, threads: await m.startWorkers() };
            await m.dispose();
            // Started by createIndex, before anything is embedded.
            const n = await st5.load('/shipped/', { device: 'cpu' });
            const before = n.threads;
            const index = await st5.createIndex(n, { device: 'cpu' });
            for (let i = 0; i < 1200 && n.threads < 8; i++) await sleep();
            const viaIndex = { before, threads: n.threads };
            index.dispose();
            await n.dispose();
            // Started by the first call with more than one batch.
            const o = await st5.load('/shipped/', { device: 'cpu', batchSize: 1 });
            await o.embed(texts);
            for (let i = 0; i < 1200 && o.threads < 8; i++) await sleep();
            const threads = o.threads;
            await o.dispose();
            return { int8, f32, gpu, threads, early, viaIndex };
          } finally {
            Object.defineProperty(Navigator.prototype, 'hardwareConcurrency', real);
          }
        },
        { texts: want.sentences },
      );
      const ref = want.embeddings['enc-mean'];
      const leastCosine = (rows) => {
        let least = 1;
        rows.forEach((row, i) => {
          let [dot, a, b] = [0, 0, 0];
          row.forEach((x, j) => ((dot += x * ref[i][j]), (a += x * x), (b += ref[i][j] ** 2)));
          least = Math.min(least, dot / Math.sqrt(a * b));
        });
        return least;
      };
      const least = leastCosine(r.int8.rows);
      const ratio = r.int8.weightBytes / r.f32.weightBytes;
      const gpu = { least: leastCosine(r.gpu.int8.rows), ratio: r.gpu.int8.weightBytes / r.gpu.f32.weightBytes };
      if (r.gpu.int8.device !== 'webgpu' || r.gpu.int8.arithmetic !== 'f32')
        throw new Error(`WebGPU: ${r.gpu.int8.device}, arithmetic ${r.gpu.int8.arithmetic}`);
      if (!(gpu.least >= 0.999) || !(gpu.ratio <= 0.35))
        throw new Error(`WebGPU int8 weights: least cosine ${gpu.least}, ${gpu.ratio} of f32's bytes`);
      const mib = (n) => (n / 2 ** 20).toFixed(1);
      if (r.int8.arithmetic !== 'int8' || r.f32.arithmetic !== 'f32')
        throw new Error(`arithmetic ${r.int8.arithmetic} and ${r.f32.arithmetic}`);
      if (!(least >= 0.997)) throw new Error(`least cosine to the f32 computation ${least}`);
      if (!(ratio <= 0.35)) throw new Error(`int8 weights hold ${ratio} of f32's`);
      if (r.threads !== 8) throw new Error(`${r.threads} workers with 8 cores faked`);
      if (r.early.maxThreads !== 8 || r.early.threads !== 8)
        throw new Error(`startWorkers at load: ${JSON.stringify(r.early)}`);
      if (r.viaIndex.before !== 1 || r.viaIndex.threads !== 8)
        throw new Error(`createIndex: ${JSON.stringify(r.viaIndex)}`);
      return `least cosine ${least.toFixed(6)}; weights ${mib(r.int8.weightBytes)} MiB int8 vs ${mib(r.f32.weightBytes)} MiB f32 (${ratio.toFixed(2)}x); 8 cores faked: 8 workers, started at load, by createIndex or by the first call; WebGPU: int8 weights ${gpu.ratio.toFixed(2)}x f32's bytes, least cosine ${gpu.least.toFixed(7)}`;
    },
  ],
  [
    // The workers instantiate the page's compiled module (posted with their load): none fetches
    // the .wasm file again.
    'cpu_worker_pool_is_bit_identical_to_one_thread',
    async () => {
      const wasmHits = () => [...server.hits].filter(([p]) => p.endsWith('.wasm')).reduce((n, [, c]) => n + c, 0);
      // The page's own module first (when this case runs alone it is the first to load one).
      await page.evaluate(
        async (url) => (await st5.load(url, { device: 'cpu', threads: 1 })).dispose(),
        `/models/${ST}/`,
      );
      const wasmBefore = wasmHits();
      const r = await page.evaluate(
        async ({ url, texts }) => {
          const run = async (options) => {
            const m = await st5.load(url, { device: 'cpu', batchSize: 2, ...options });
            // The first call with several batches starts the workers; the page runs it until they
            // have loaded. Then wait for all of them, so that the workers take every batch.
            const first = (await m.embed(texts)).map((x) => Array.from(x));
            const want = options.threads ?? navigator.hardwareConcurrency;
            for (let i = 0; i < 600 && m.threads < want; i++) await new Promise((ok) => setTimeout(ok, 50));
            const threads = m.threads;
            const rows = (await m.embed(texts)).map((x) => Array.from(x));
            // A second call on the same pool, with texts in another order.
            const again = (await m.embed([...texts].reverse())).map((x) => Array.from(x)).reverse();
            const device = m.device;
            await m.dispose();
            return { threads, rows, again, first, device };
          };
          return { one: await run({ threads: 1 }), pool: await run({ threads: 3 }), auto: await run({}) };
        },
        { url: `/models/${ST}/`, texts: st.sentences },
      );
      const cores = await page.evaluate(() => navigator.hardwareConcurrency);
      const want = st.embeddings['enc-mean'];
      const errs = ['one', 'pool', 'auto'].map((k) => maxAbsDiff(r[k].rows, want));
      const same = ['pool', 'auto'].map(
        (k) =>
          maxAbsDiff(r[k].rows, r.one.rows) + maxAbsDiff(r[k].again, r.one.rows) + maxAbsDiff(r[k].first, r.one.rows),
      );
      if (!['one', 'pool', 'auto'].every((k) => r[k].device === 'cpu'))
        throw new Error(`devices ${r.one.device}, ${r.pool.device}, ${r.auto.device}`);
      if (r.one.threads !== 1 || r.pool.threads !== 3 || r.auto.threads !== cores)
        throw new Error(`threads ${r.one.threads}, ${r.pool.threads}, ${r.auto.threads} (cores ${cores})`);
      if (!errs.every((e) => e <= 1e-5) || !same.every((d) => d === 0))
        throw new Error(`max abs errors ${errs}; pool vs one thread ${same}`);
      const fetched = wasmHits() - wasmBefore;
      if (fetched !== 0) throw new Error(`the pools' ${3 + cores} workers fetched the .wasm ${fetched} times`);
      return `1, 3 and ${cores} (auto) threads, batches of at most 2: max abs error ${errs[0].toExponential(2)}, pools bit-identical to one thread; no worker fetched the .wasm`;
    },
  ],
  [
    'warm_load_comes_from_the_cache_api',
    async () => {
      const before = modelHits(ST);
      const snapshot = new Map(server.hits);
      const r = await embedIn(page, {
        url: `/models/${ST}/`,
        options: { device: 'cpu' },
        texts: st.sentences.slice(0, 2),
      });
      const requests = modelHits(ST) - before;
      const cached = r.events.filter((e) => e.stage === 'download' && e.cached).length;
      const paths = [...server.hits].filter(([p, c]) => c !== snapshot.get(p)).map(([p]) => p);
      if (requests !== 0 || cached === 0)
        throw new Error(`${requests} requests to the server (${paths}), ${cached} cached files`);
      const fresh = await embedIn(page, {
        url: `/models/${ST}/`,
        options: { device: 'cpu', cache: false },
        texts: st.sentences.slice(0, 1),
      });
      if (modelHits(ST) - before === 0 || fresh.events.some((e) => e.cached))
        throw new Error('cache: false still used the cache');
      return `0 requests on a warm load (${cached} files from the cache); cache: false fetched again`;
    },
  ],
  [
    'sharded_bf16_hf_t5_url_all_variants',
    async () => {
      const errs = [];
      for (const variant of ['enc-mean', 'enc-first', 'encdec-first']) {
        const r = await embedIn(page, { url: `/models/${HF}/`, options: { variant }, texts: hf.sentences });
        errs.push(maxAbsDiff(r.rows, hf.embeddings[variant]));
      }
      if (!errs.every((e) => e <= TOL)) throw new Error(`max abs errors ${errs}`);
      return `max abs errors ${errs.map((e) => e.toExponential(2)).join(', ')}`;
    },
  ],
  [
    'load_in_worker_matches_reference',
    async () => {
      const r = await embedIn(page, {
        url: `/models/${ST}/`,
        options: { device: 'webgpu' },
        texts: st.sentences,
        worker: true,
      });
      const err = maxAbsDiff(r.rows, st.embeddings['enc-mean']);
      if (!(err <= TOL) || r.device !== 'webgpu' || r.dim !== 12)
        throw new Error(`max abs error ${err} on ${r.device}, dim ${r.dim}`);
      if (!r.events.some((e) => e.stage === 'download')) throw new Error('no progress from the worker');
      return `max abs error ${err.toExponential(2)} on ${r.device}`;
    },
  ],
  [
    'auto_takes_the_cpu_over_a_software_adapter',
    async () => {
      const software = await softwareAdapter(page);
      const want = software ? 'cpu' : 'webgpu';
      const got = [];
      for (const worker of [false, true]) {
        const r = await embedIn(page, { url: `/models/${ST}/`, texts: st.sentences.slice(0, 2), worker });
        got.push(r.device);
      }
      if (!got.every((d) => d === want)) throw new Error(`software adapter ${software}: auto chose ${got}`);
      return `software adapter ${software}: auto chose ${got.join(' (page), ')} (worker)`;
    },
  ],
  [
    'in_memory_blobs_load_like_the_url',
    async () => {
      const names = [
        'modules.json',
        'config.json',
        'model.safetensors',
        'tokenizer.json',
        'tokenizer_config.json',
        'sentence_bert_config.json',
        '1_Pooling/config.json',
        '2_Dense/config.json',
        '2_Dense/model.safetensors',
        '3_Normalize/config.json',
      ];
      const rows = await page.evaluate(
        async ({ names, base, texts }) => {
          const files = new Map();
          for (const n of names) files.set(n, await (await fetch(base + n)).blob());
          const m = await st5.load(files, { device: 'cpu' });
          return (await m.embed(texts)).map((r) => Array.from(r));
        },
        { names, base: `/models/${ST}/`, texts: st.sentences },
      );
      const err = maxAbsDiff(rows, st.embeddings['enc-mean']);
      if (!(err <= TOL)) throw new Error(`max abs error ${err}`);
      return `max abs error ${err.toExponential(2)}`;
    },
  ],
  [
    'explicit_variant_overrides_a_pooling_config_without_a_mode',
    async () => {
      // An EncDec checkpoint in the sentence-transformers layout: its Pooling config names no
      // mode (sentence-transformers has none for the first decoder output).
      const relu = 'hf-t5-relu-f16';
      const want = expected(relu).embeddings['encdec-first'];
      const r = await page.evaluate(
        async ({ base, tokenizer, texts }) => {
          const text = (s) => new TextEncoder().encode(s);
          const files = new Map([
            ['config.json', await (await fetch(base + 'config.json')).arrayBuffer()],
            ['model.safetensors', await (await fetch(base + 'model.safetensors')).arrayBuffer()],
            ['tokenizer.json', await (await fetch(tokenizer)).arrayBuffer()],
            [
              'modules.json',
              text(
                JSON.stringify([
                  { idx: 0, name: '0', path: '', type: 'sentence_transformers.models.Transformer' },
                  { idx: 1, name: '1', path: '1_Pooling', type: 'sentence_transformers.models.Pooling' },
                  { idx: 2, name: '2', path: '2_Normalize', type: 'sentence_transformers.models.Normalize' },
                ]),
              ),
            ],
            ['1_Pooling/config.json', text('{"word_embedding_dimension": 16}')],
          ]);
          const m = await st5.load(files, { device: 'cpu', variant: 'encdec-first' });
          const rows = (await m.embed(texts)).map((x) => Array.from(x));
          const refused = await st5.load(files, { device: 'cpu' }).then(
            () => 'loaded',
            (e) => e.message,
          );
          return { rows, refused };
        },
        { base: `/models/${relu}/`, tokenizer: `/models/${ST}/tokenizer.json`, texts: expected(relu).sentences },
      );
      const err = maxAbsDiff(r.rows, want);
      if (!(err <= CPU_TOL)) throw new Error(`encdec-first max abs error ${err}`);
      if (!/1_Pooling\/config\.json/.test(r.refused) || !/variant/.test(r.refused)) {
        throw new Error(`without a variant: ${r.refused}`);
      }
      return `variant encdec-first: max abs error ${err.toExponential(2)}; without one: ${r.refused}`;
    },
  ],
  [
    'cpu_matches_reference_on_both_simd_modules',
    async () => {
      // The page picks its module itself (relaxed SIMD where the engine validates it); a second
      // context is forced onto the plain SIMD128 module. Both must match the reference.
      const plain = await browser.newContext();
      await plain.addInitScript(() => (globalThis.__st5WasmFlavor = 'simd128'));
      const { page: plainPage } = await open(plain, `${server.url}/`);
      const out = [];
      for (const p of [page, plainPage]) {
        out.push(
          await p.evaluate(
            async ({ url, texts }) => {
              const m = await st5.load(url, { device: 'cpu', threads: 1 });
              const rows = (await m.embed(texts)).map((x) => Array.from(x));
              await m.dispose();
              const flavor = (await import('/node_modules/st5/runtime.js')).wasmFlavor();
              return { rows, flavor };
            },
            { url: `/models/${ST}/`, texts: st.sentences },
          ),
        );
      }
      await plain.close();
      const [auto, forced] = out;
      if (forced.flavor !== 'simd128') throw new Error(`forced module: ${forced.flavor}`);
      if (auto.flavor !== 'relaxed')
        throw new Error(`Chromium validates relaxed SIMD, yet the page chose ${auto.flavor}`);
      const errs = out.map((r) => maxAbsDiff(r.rows, st.embeddings['enc-mean']));
      if (!errs.every((e) => e <= CPU_TOL)) throw new Error(`max abs errors ${errs}`);
      return `relaxed: max abs error ${errs[0].toExponential(2)}; simd128: ${errs[1].toExponential(2)}`;
    },
  ],
  [
    'fifty_concurrent_calls_all_correct',
    async () => {
      for (const worker of [false, true]) {
        const out = await page.evaluate(
          async ({ url, texts, worker }) => {
            const m = await (worker ? st5.loadInWorker : st5.load)(url, { device: 'webgpu' });
            const calls = Array.from({ length: 50 }, (_, i) => [
              texts[i % texts.length],
              texts[(i * 7 + 3) % texts.length],
            ]);
            const got = await Promise.all(calls.map((c) => m.embed(c)));
            await m.dispose();
            return { calls, got: got.map((rows) => rows.map((r) => Array.from(r))) };
          },
          { url: `/models/${ST}/`, texts: st.sentences, worker },
        );
        const index = (t) => st.sentences.indexOf(t);
        const err = Math.max(
          ...out.calls.map((c, i) =>
            maxAbsDiff(
              out.got[i],
              c.map((t) => st.embeddings['enc-mean'][index(t)]),
            ),
          ),
        );
        if (!(err <= TOL)) throw new Error(`${worker ? 'worker' : 'page'}: max abs error ${err}`);
      }
      return '50 calls at once, on the page and in a worker, each within 1e-4';
    },
  ],
  [
    'empty_and_over_long_texts',
    async () => {
      const long = Array.from({ length: 400 }, (_, i) => `w${i}`).join(' ');
      const prefix = long.split(' ').slice(0, 10).join(' ');
      const seen = [];
      for (const device of ['cpu', 'webgpu']) {
        const rows = await page.evaluate(
          async ({ url, texts, device }) =>
            (await (await st5.load(url, { device })).embed(texts)).map((r) => Array.from(r)),
          { url: `/models/${ST}/`, texts: ['', long, prefix], device },
        );
        const norm = Math.hypot(...rows[0]);
        const trunc = maxAbsDiff([rows[1]], [rows[2]]);
        if (!rows[0].every(Number.isFinite) || !(Math.abs(norm - 1) < 1e-4) || !(trunc <= 1e-5))
          throw new Error(`${device}: empty norm ${norm}, over-long vs truncated ${trunc}`);
        seen.push(trunc.toExponential(2));
      }
      return `empty text: unit vector; 400 words = their first 16 tokens (diff ${seen.join(' cpu, ')} webgpu)`;
    },
  ],
  [
    'a_collection_searches_documents_in_the_page_on_cpu_and_webgpu',
    async () => {
      const r = await page.evaluate(
        async ({ url, texts }) => {
          const out = {};
          for (const device of ['cpu', 'webgpu']) {
            const m = await st5.load(url, { device });
            const col = await st5.createCollection(m, {
              text: [{ name: 'body' }],
              fields: [{ name: 'n', type: 'number' }],
            });
            await col.add(texts.map((body, i) => ({ id: `t${i}`, body, n: i })));
            const modes = {};
            for (const mode of ['vector', 'keyword', 'hybrid'])
              modes[mode] = (await col.search(texts[2], { mode, k: 3, where: 'n >= 1' })).hits.map((h) => h.id);
            // The query's vector given: the same answer, nothing embedded; a vector of another width refused.
            const [qv] = await m.embed([texts[2]]);
            let embedded = 0;
            const embedFlat = m.embedFlat.bind(m);
            m.embedFlat = (t) => ((embedded += t.length), embedFlat(t));
            const given = (await col.search(texts[2], { mode: 'hybrid', k: 3, where: 'n >= 1', vector: qv })).hits;
            const short = await col.search(texts[2], { vector: qv.subarray(1) }).then(
              () => 'accepted',
              (e) => `${e.code}: ${e.message}`,
            );
            m.embedFlat = embedFlat;
            modes.given = { ids: given.map((h) => h.id), embedded, short };
            const again = await st5.importCollection(m, await col.export());
            const reopened = (await again.search(texts[2], { mode: 'hybrid', k: 3, where: 'n >= 1' })).hits.map(
              (h) => h.id,
            );
            out[device] = { device: m.device, size: again.size, modes, reopened };
            again.dispose();
            col.dispose();
            await m.dispose();
          }
          return out;
        },
        { url: `/models/${ST}/`, texts: [...new Set(st.sentences.filter((t) => t.trim()))].slice(0, 6) },
      );
      for (const d of ['cpu', 'webgpu']) {
        const x = r[d];
        if (
          x.device !== d ||
          x.size !== 6 ||
          ['vector', 'keyword', 'hybrid'].some((mode) => x.modes[mode][0] !== 't2' || x.modes[mode].includes('t0'))
        )
          throw new Error(`${d}: ${JSON.stringify(x)}`);
        const g = x.modes.given;
        if (g.ids.join() !== x.modes.hybrid.join() || g.embedded !== 0 || !/width/.test(g.short))
          throw new Error(`${d}: with the query's vector ${JSON.stringify(g)} vs ${x.modes.hybrid}`);
        if (x.reopened.join() !== x.modes.hybrid.join())
          throw new Error(`${d}: reopened ${x.reopened} vs ${x.modes.hybrid}`);
      }
      return `every mode finds the text itself first under a filter, on the CPU and WebGPU; the query's vector given: same hits, 0 texts embedded (${r.cpu.modes.given.short}); export and import answer alike`;
    },
  ],
  [
    'a_saved_collection_reopens_without_embedding_and_survives_torn_writes',
    async () => {
      const r = await page.evaluate(
        async ({ url, texts }) => {
          const m = await st5.load(url, { device: 'cpu' });
          let embedded = 0;
          const embedFlat = m.embedFlat.bind(m);
          m.embedFlat = (t) => ((embedded += t.length), embedFlat(t));
          const schema = { text: [{ name: 'body' }], fields: [{ name: 'n', type: 'number' }] };
          const dir = async () =>
            (await (await navigator.storage.getDirectory()).getDirectoryHandle('st5-collections')).getDirectoryHandle(
              't',
            );
          const files = async () => {
            const out = [];
            for await (const [name] of (await dir()).entries()) out.push(name);
            return out.sort();
          };
          const answers = async (col) => {
            const out = [];
            for (const mode of ['vector', 'keyword', 'hybrid'])
              out.push((await col.search(texts[2], { mode, k: 4, where: 'n >= 1', facets: ['n'] })).hits);
            return JSON.stringify(out);
          };
          const refusal = (p) =>
            p.then(
              () => 'accepted',
              (e) => `${e.code}: ${e.message}`,
            );
          const out = { steps: [] };
          await st5.deleteCollection('t');
          out.missing = await refusal(st5.openCollection(m, 't'));
          let col = await st5.openCollection(m, 't', schema);
          out.steps.push({ restored: col.restored, ...col.storage });
          await col.add(texts.map((body, i) => ({ id: `t${i}`, body, n: i })));
          await col.upsert([{ id: 't1', body: texts[2] + ' ' + texts[1], n: 11 }]);
          col.remove('t3');
          await col.saved();
          out.busy = await refusal(st5.openCollection(m, 't', schema));
          const before = await answers(col);
          const size = col.size;
          out.steps.push({ size, ...col.storage, files: await files() });
          col.dispose();
          embedded = 0;
          col = await st5.openCollection(m, 't');
          out.reopened = { restored: col.restored, embedded, same: (await answers(col)) === before, ...col.storage };
          // A change whose segment was cut short (the tab closed mid-write) is dropped on open.
          await col.add([{ id: 'torn', body: texts[4], n: 40 }]);
          await col.saved();
          col.dispose();
          const last = 'log-0-3.st5log';
          const handle = await (await dir()).getFileHandle(last);
          const whole = await (await handle.getFile()).arrayBuffer();
          const w = await handle.createWritable();
          await w.write(whole.slice(0, whole.byteLength - 7));
          await w.close();
          embedded = 0;
          col = await st5.openCollection(m, 't');
          out.torn = {
            file: last,
            restored: col.restored,
            embedded,
            gone: !(await files()).includes(last),
            same: (await answers(col)) === before,
          };
          // Compaction: one base file, no segments; then a base cut short falls back to the one before.
          await col.compact();
          await col.add([{ id: 'after', body: texts[5] + ' again', n: 50 }]);
          await col.saved();
          const withAfter = await answers(col);
          out.compacted = { ...col.storage, files: await files() };
          col.dispose();
          const base = await (await dir()).getFileHandle('base-1.st5index');
          const bytes = await (await base.getFile()).arrayBuffer();
          const bad = await (await (await dir()).getFileHandle('base-2.st5index', { create: true })).createWritable();
          await bad.write(bytes.slice(0, bytes.byteLength >> 1));
          await bad.close();
          embedded = 0;
          col = await st5.openCollection(m, 't');
          out.fallback = {
            restored: col.restored,
            embedded,
            same: (await answers(col)) === withAfter,
            files: await files(),
          };
          col.dispose();
          out.schema = await refusal(st5.openCollection(m, 't', { text: [{ name: 'other' }] }));
          out.deleted = await st5.deleteCollection('t');
          await m.dispose();
          return out;
        },
        { url: `/models/${ST}/`, texts: [...new Set(st.sentences.filter((t) => t.trim()))].slice(0, 6) },
      );
      const fail = (why) => {
        throw new Error(`${why}: ${JSON.stringify(r)}`);
      };
      if (!r.missing.startsWith('invalid:') || !r.busy.startsWith('storage:') || !r.schema.startsWith('model:'))
        fail('refusals');
      if (r.steps[1].size !== 5 || r.steps[1].segments !== 3 || r.steps[1].generation !== 0) fail('first save');
      if (r.reopened.restored !== 5 || r.reopened.embedded !== 0 || !r.reopened.same) fail('reopen');
      if (r.torn.restored !== 5 || r.torn.embedded !== 0 || !r.torn.gone || !r.torn.same) fail('torn segment');
      if (
        r.compacted.generation !== 1 ||
        r.compacted.segments !== 1 ||
        r.compacted.files.some((f) => /^(base|log)-0[-.]/.test(f))
      )
        fail('compaction');
      if (
        r.fallback.restored !== 6 ||
        r.fallback.embedded !== 0 ||
        !r.fallback.same ||
        r.fallback.files.includes('base-2.st5index')
      )
        fail('damaged base');
      if (r.deleted !== true) fail('delete');
      return `5 documents after add/upsert/remove in 3 segments, reopened with 0 texts embedded and the same answers; a segment cut short (${r.torn.file}) dropped; compaction to 1 base + ${r.compacted.segments} segment; a base cut short falls back to the one before (${r.fallback.files.join(', ')})`;
    },
  ],
  [
    'each_text_alone_equals_it_batched_on_cpu_and_webgpu',
    async () => {
      const r = await page.evaluate(
        async ({ url, texts }) => {
          const out = {};
          for (const device of ['cpu', 'webgpu']) {
            const m = await st5.load(url, { device, batchSize: 64, threads: 1 });
            const batched = (await m.embed(texts)).map((x) => Array.from(x));
            const alone = [];
            for (const t of texts) alone.push(Array.from((await m.embed([t]))[0]));
            out[device] = { batched, alone, device: m.device, batches: m.planBatches(texts).length };
            await m.dispose();
          }
          return out;
        },
        { url: `/models/${ST}/`, texts: st.sentences },
      );
      // Both put the texts (of mixed lengths) in one batch: the CPU packs it without padding, so
      // each text's vector is the same bits as alone; WebGPU pads it, within 1e-5.
      const errs = ['cpu', 'webgpu'].map((d) => maxAbsDiff(r[d].alone, r[d].batched));
      if (
        r.cpu.device !== 'cpu' ||
        r.webgpu.device !== 'webgpu' ||
        r.webgpu.batches !== 1 ||
        r.cpu.batches !== 1 ||
        errs[0] !== 0 ||
        !(errs[1] <= 1e-5)
      )
        throw new Error(
          `${r.cpu.device}/${r.webgpu.device}, ${r.cpu.batches}/${r.webgpu.batches} batches: alone vs batched ${errs}`,
        );
      return `alone vs batched: ${errs[0]} on the CPU (one packed batch), ${errs[1].toExponential(2)} on WebGPU (padded, one batch)`;
    },
  ],
  [
    'buffer_cap_splits_webgpu_batches_without_changing_them',
    async () => {
      // Long texts (max length raised to 512), so that attention scores, 16·n² bytes for n tokens
      // here, outgrow the cap while the 1 MiB embedding table still fits.
      const texts = [150, 140, 130, 120, 110, 100].map((n) => 'word '.repeat(n)).concat(st.sentences);
      const r = await page.evaluate(
        async ({ url, texts }) => {
          const run = async (cap) => {
            const m = await st5.load(url, { device: 'webgpu', batchSize: 64, maxSeqLength: 512, maxBufferBytes: cap });
            const out = { plan: m.planBatches(texts), rows: (await m.embed(texts)).map((x) => Array.from(x)) };
            await m.dispose();
            return out;
          };
          return { free: await run(undefined), capped: await run(1_100_000) };
        },
        { url: `/models/${ST}/`, texts },
      );
      const err = maxAbsDiff(r.capped.rows, r.free.rows);
      if (r.free.plan.length !== 1 || !(r.capped.plan.length > 2) || !(err <= 1e-5))
        throw new Error(`plans ${r.free.plan.length} and ${r.capped.plan.length} batches, capped vs free ${err}`);
      return `1 batch uncapped, ${r.capped.plan.length} under a 1.1 MB cap: capped vs free ${err.toExponential(2)}`;
    },
  ],
  [
    'int8_equals_its_dequantized_copy_on_cpu_and_webgpu',
    async () => {
      // Computed in f32 (`compute: 'f32'`), an int8 model is its dequantized copy exactly. On
      // WebGPU with `compute: 'auto'` its weights stay int8 in GPU memory and the products are f32
      // over the codes: its copy but for rounding (≤ 1e-5). On the CPU with 'auto' it computes in
      // int8 and stays as near the reference.
      const out = [];
      for (const [device, compute, bound] of [
        ['cpu', 'f32', 0],
        ['webgpu', 'f32', 0],
        ['webgpu', 'auto', 1e-5],
        ['cpu', 'auto', Infinity],
      ]) {
        const options = { device, compute };
        const q = await embedIn(page, { url: '/quantized/int8/', options, texts: st.sentences });
        const d = await embedIn(page, { url: '/quantized/dequantized/', options, texts: st.sentences });
        const same = maxAbsDiff(q.rows, d.rows);
        const err = maxAbsDiff(q.rows, st.embeddings['enc-mean']);
        if (q.device !== device || !(same <= bound) || !(err <= INT8_TOL))
          throw new Error(`${device} ${compute}: int8 vs its f32 copy ${same}, vs the f32 reference ${err}`);
        out.push(
          `${device} ${compute}: ${same === 0 ? 'identical to' : `${same.toExponential(2)} from`} its f32 copy, ${err.toExponential(2)} from the f32 reference`,
        );
      }
      return out.join('; ');
    },
  ],
  [
    'soft_prompt_applies_on_cpu_webgpu_and_in_a_worker_and_is_refused_by_another_model',
    async () => {
      // The prompt file make_prompt_fixture.py wrote, whose base fingerprint Python computed:
      // the browser's fingerprint over the files wasm names must agree, and the prompted
      // embeddings must equal PyTorch's.
      const ref = expected('prompt');
      const prompt = '/models/prompt/enc-mean.safetensors';
      const out = [];
      for (const [device, worker] of [
        ['cpu', false],
        ['webgpu', false],
        ['cpu', true],
      ]) {
        const r = await embedIn(page, {
          url: `/models/${ST}/`,
          options: { device, prompt, threads: 1 },
          texts: ref.texts,
          worker,
        });
        const err = maxAbsDiff(r.rows, ref.embeddings['enc-mean']);
        if (!(err <= TOL) || r.device !== device)
          throw new Error(`${device}${worker ? ' (worker)' : ''}: max abs error ${err} on ${r.device}`);
        out.push(`${device}${worker ? ' in a worker' : ''} ${err.toExponential(2)}`);
      }
      const r = await page.evaluate(
        async ({ base, prompt, other }) => {
          const bytes = new Uint8Array(await (await fetch(prompt)).arrayBuffer());
          const plain = await st5.load(base, { device: 'cpu', threads: 1 });
          const prompted = await st5.load(base, { device: 'cpu', threads: 1, prompt: bytes });
          const fingerprints = [plain.fingerprint, prompted.fingerprint];
          await plain.dispose();
          await prompted.dispose();
          const error = (p) =>
            p.then(
              () => null,
              (e) => ({ message: e.message, code: e.code }),
            );
          return {
            fingerprints,
            other: await error(st5.load(other, { device: 'cpu', threads: 1, prompt })),
            damaged: await error(st5.load(base, { device: 'cpu', threads: 1, prompt: bytes.slice(0, -5) })),
            afterwards: (await st5.load(base, { device: 'cpu', threads: 1 })).dim,
          };
        },
        { base: `/models/${ST}/`, prompt, other: `/models/${HF}/` },
      );
      if (r.fingerprints[0] === r.fingerprints[1]) throw new Error('the prompt left the model fingerprint unchanged');
      if (r.other?.code !== 'model' || !r.other.message.includes('made for'))
        throw new Error(`another model: ${JSON.stringify(r.other)}`);
      if (r.damaged?.code !== 'model' || !r.damaged.message.includes('prompt file'))
        throw new Error(`damaged: ${JSON.stringify(r.damaged)}`);
      if (r.afterwards !== 12) throw new Error('the module did not keep working');
      return `max abs errors: ${out.join(', ')}; another model: "${r.other.message.slice(0, 90)}"; damaged: "${r.damaged.message.slice(0, 70)}"`;
    },
  ],
  [
    'hub_ids_resolve_on_a_mirror_and_a_missing_one_names_its_revision',
    async () => {
      const hubUrl = `${server.url}/hub`;
      const page_ = await embedIn(page, {
        url: 'st5-test/tiny',
        options: { device: 'cpu', hubUrl },
        texts: st.sentences,
      });
      const worker = await embedIn(page, {
        url: 'st5-test/tiny',
        options: { device: 'cpu', hubUrl: '/hub' },
        texts: st.sentences,
        worker: true,
      });
      const errs = [page_, worker].map((r) => maxAbsDiff(r.rows, st.embeddings['enc-mean']));
      if (!errs.every((e) => e <= TOL)) throw new Error(`max abs errors ${errs}`);
      const refused = await page.evaluate(
        async ({ hubUrl }) => {
          const error = (p) =>
            p.then(
              () => 'loaded',
              (e) => e.message,
            );
          return [
            await error(st5.load('st5-test/missing', { device: 'cpu', hubUrl })),
            await error(st5.load('st5-test/tiny', { device: 'cpu', hubUrl, revision: 'v2' })),
            await error(st5.loadInWorker('st5-test/missing', { device: 'cpu', hubUrl: '/hub' })),
          ];
        },
        { hubUrl },
      );
      const want = [
        ['st5-test/missing', 'revision main'],
        ['st5-test/tiny', 'revision v2'],
        ['st5-test/missing', 'revision main'],
      ];
      refused.forEach((m, i) => {
        if (!want[i].every((w) => m.includes(w))) throw new Error(`error ${i}: ${m}`);
      });
      return `page ${errs[0].toExponential(2)}, worker ${errs[1].toExponential(2)}; "${refused[1].slice(0, 120)}"`;
    },
  ],
  [
    'declarations_match_the_package',
    async () => {
      // 1. usage.ts, which touches every public function, member and option, compiles with
      //    `--strict` against the installed package's index.d.ts.
      const ts = createRequire(import.meta.url)('typescript');
      const pkgDir = join(app, 'node_modules/st5');
      const program = ts.createProgram([join(ROOT, 'tests/browser/usage.ts')], {
        strict: true,
        noEmit: true,
        target: ts.ScriptTarget.ES2022,
        module: ts.ModuleKind.ESNext,
        moduleResolution: ts.ModuleResolutionKind.Bundler,
        lib: ['lib.es2022.d.ts', 'lib.dom.d.ts'],
        paths: { st5: [join(pkgDir, 'index.d.ts')] },
      });
      const errors = ts.getPreEmitDiagnostics(program).map((d) => ts.flattenDiagnosticMessageText(d.messageText, ' '));
      if (errors.length) throw new Error(`usage.ts: ${errors.join(' | ')}`);
      // 2. The declared exports are the module's exports, and each declared class member exists.
      const checker = program.getTypeChecker();
      const dts = checker.getSymbolAtLocation(program.getSourceFile(join(pkgDir, 'index.d.ts')));
      const declared = checker.getExportsOfModule(dts).filter((x) => x.flags & ts.SymbolFlags.Value);
      const mod = await import(pathToFileURL(join(pkgDir, 'index.js')).href);
      const runtime = Object.keys(mod).sort();
      const names = declared.map((x) => x.name).sort();
      if (runtime.join() !== names.join()) throw new Error(`exports ${runtime} vs declared ${names}`);
      const { SearchIndex } = await import(pathToFileURL(join(pkgDir, 'search-index.js')).href);
      const classes = {
        Model: mod.Model,
        SearchIndex,
        Collection: mod.Collection,
        SavedCollection: mod.SavedCollection,
      };
      const missing = [];
      for (const [name, cls] of Object.entries(classes)) {
        const type = checker.getDeclaredTypeOfSymbol(declared.find((x) => x.name === name) ?? dts.exports.get(name));
        const members = checker.getPropertiesOfType(type).map((p) => p.name);
        const onPrototype = [];
        for (let proto = cls.prototype; proto !== Object.prototype; proto = Object.getPrototypeOf(proto))
          onPrototype.push(...Object.getOwnPropertyNames(proto).filter((m) => m !== 'constructor'));
        // Every runtime member is declared; every declared method or accessor exists (fields
        // such as `texts` live on instances).
        for (const m of onPrototype) if (!members.includes(m)) missing.push(`${name}.${m} undeclared`);
        for (const p of checker.getPropertiesOfType(type)) {
          const isMethod = p.flags & ts.SymbolFlags.Method;
          if (isMethod && !onPrototype.includes(p.name)) missing.push(`${name}.${p.name} declared, missing`);
        }
      }
      if (missing.length) throw new Error(missing.join(', '));
      return `usage.ts compiles (strict); ${names.length} exports (${names.join(', ')}) and the members of Model, SearchIndex, Collection and SavedCollection match`;
    },
  ],
  [
    'lost_webgpu_device_falls_back_to_cpu',
    async () => {
      const warningsBefore = logs.filter((l) => l.startsWith('warning:')).length;
      const r = await page.evaluate(
        async ({ url, texts }) => {
          const m = await st5.load(url, { device: 'webgpu' });
          const first = m.device;
          for (const d of globalThis.__gpuDevices ?? []) d.destroy();
          const rows = (await m.embed(texts)).map((x) => Array.from(x));
          const again = (await m.embed(texts.slice(0, 1))).map((x) => Array.from(x));
          // After the failure, 'auto' means the CPU for an index too.
          const index = await st5.createIndex(m);
          const indexDevice = index.device;
          index.dispose();
          return { first, after: m.device, rows, again, indexDevice };
        },
        { url: `/models/${ST}/`, texts: st.sentences },
      );
      const err = maxAbsDiff(r.rows, st.embeddings['enc-mean']);
      const warned = logs.slice(warningsBefore).some((l) => l.startsWith('warning:') && l.includes('WebGPU failed'));
      if (r.first !== 'webgpu' || r.after !== 'cpu' || !(err <= TOL) || !warned || r.indexDevice !== 'cpu') {
        throw new Error(
          `device ${r.first} → ${r.after}, max abs error ${err}, warned ${warned}, then an 'auto' index on ${r.indexDevice}; logs: ${logs.slice(-5).join(' | ')}`,
        );
      }
      return `device lost mid-session: re-ran on the CPU (max abs error ${err.toExponential(2)}) with a console warning; an 'auto' index then took the CPU`;
    },
  ],
  [
    'bad_input_is_a_clear_error',
    async () => {
      const msgs = await page.evaluate(async () => {
        const out = [];
        for (const attempt of [
          () => st5.load('/models/nope/', { cache: false }),
          async () => (await st5.load('/models/st-enc-mean-relu/', { device: 'cpu' })).embed(['ok', 3]),
          () => st5.load(new Map([['modules.json', new TextEncoder().encode('[not json')]]), { device: 'cpu' }),
        ]) {
          try {
            await attempt();
            out.push('no error');
          } catch (e) {
            out.push(`${e.name}: ${e.message}`);
          }
        }
        return out;
      });
      if (!msgs[0].includes('/models/nope/') || !msgs[1].startsWith('TypeError') || !msgs[2].includes('modules.json'))
        throw new Error(msgs.join(' | '));
      return msgs.join(' | ');
    },
  ],
  [
    'a_panic_is_an_internal_error_and_every_variant_recovers',
    async () => {
      const r = await page.evaluate(
        async ({ url, texts }) => {
          const flat = async (m) => (await m.embed(texts)).map((x) => Array.from(x));
          const trap = (m) =>
            m[Symbol.for('st5.panicForTest')]().then(
              () => ({ code: 'none' }),
              (e) => ({ code: e.code, call: e.call, message: e.message }),
            );
          const out = {};
          for (const [name, open] of [
            ['cpu', () => st5.load(url, { device: 'cpu', threads: 1 })],
            ['webgpu', () => st5.load(url, { device: 'webgpu' })],
            ['worker', () => st5.loadInWorker(url, { device: 'cpu' })],
          ]) {
            const m = await open();
            // A second model in the same instance dies with it and must come back too.
            const other = name === 'cpu' ? await st5.load(url, { device: 'cpu', threads: 1 }) : null;
            const before = await flat(m);
            const err = await trap(m);
            const after = await flat(m);
            const otherRows = other ? await flat(other) : null;
            out[name] = { err, device: m.device, before, after, otherRows };
            await m.dispose();
            await other?.dispose();
          }
          return out;
        },
        { url: `/models/${ST}/`, texts: st.sentences },
      );
      const want = st.embeddings['enc-mean'];
      const notes = [];
      for (const [name, x] of Object.entries(r)) {
        const { code, call, message } = x.err;
        if (code !== 'internal' || call !== 'panicForTest' || !/panicForTest was called/.test(message))
          throw new Error(`${name}: ${JSON.stringify(x.err)}`);
        // No silent fallback: a WebGPU model stays on WebGPU after an internal error.
        if (x.device !== (name === 'webgpu' ? 'webgpu' : 'cpu')) throw new Error(`${name}: device ${x.device}`);
        const err = maxAbsDiff(x.after, want);
        const tol = name === 'webgpu' ? TOL : CPU_TOL;
        if (!(err <= tol) || maxAbsDiff(x.after, x.before) > tol) throw new Error(`${name}: after the trap ${err}`);
        if (x.otherRows && !(maxAbsDiff(x.otherRows, want) <= CPU_TOL)) throw new Error(`${name}: second model`);
        notes.push(`${name} ${err.toExponential(1)}`);
      }
      return `"${r.cpu.err.message.split('\n')[0]}"; recovered (max abs error after): ${notes.join(', ')}`;
    },
  ],
  [
    'mutated_index_files_are_refused_with_a_message_or_load_intact',
    async () => {
      // The index file format (SearchIndex.export / importIndex) fuzzed in the page: seeded byte
      // flips, truncations, and every header field deleted or given each wrong type. Each import
      // must reject with an st5 message, or load the same documents.
      const r = await page.evaluate(async (url) => {
        const m = await st5.load(url, { device: 'cpu', threads: 1 });
        const index = await st5.createIndex(m, { device: 'cpu', name: 'fuzz' });
        await index.add(['one doc', 'two docs', 'a third document', 'four']);
        const good = new Uint8Array(await (await index.export()).arrayBuffer());
        // ST5INDEX: the magic, a u64 header length, the header JSON (st5_format::index_file).
        const magic = 'ST5INDEX'.length;
        const hlen = Number(new DataView(good.buffer).getBigUint64(magic, true));
        const header = JSON.parse(new TextDecoder().decode(good.subarray(magic + 8, magic + 8 + hlen)));
        const withHeader = (h) => {
          const bytes = new TextEncoder().encode(JSON.stringify(h));
          const len = new Uint8Array(new BigUint64Array([BigInt(bytes.length)]).buffer);
          return new Uint8Array([...good.subarray(0, magic), ...len, ...bytes, ...good.subarray(magic + 8 + hlen)]);
        };
        let seed = 12345;
        const rand = (n) => ((seed = (seed * 1103515245 + 12345) >>> 0) >>> 8) % n;
        const cases = [good];
        for (const key of Object.keys(header)) {
          for (const value of [undefined, null, 0, -1, 1e300, 'x', [], {}, [1, 'a'], true]) {
            const h = { ...header };
            if (value === undefined) delete h[key];
            else h[key] = value;
            cases.push(withHeader(h));
          }
        }
        for (let i = 0; i < 1500; i++) {
          const b = good.slice();
          if (i % 3 === 0) cases.push(b.subarray(0, rand(b.length)));
          else {
            for (let j = 0; j <= i % 4; j++) b[rand(i % 2 ? magic + 8 + hlen : b.length)] ^= 1 << rand(8);
            cases.push(b);
          }
        }
        const outcomes = { refused: 0, loaded: 0, bad: [] };
        for (const bytes of cases) {
          try {
            const back = await st5.importIndex(m, new Blob([bytes]), { device: 'cpu' });
            const ok = back.size === 4 && back.texts.length === 4;
            back.dispose();
            if (ok) outcomes.loaded++;
            else outcomes.bad.push(`loaded ${back.size} documents`);
          } catch (e) {
            if (e instanceof Error && !(e instanceof TypeError) && e.message.startsWith('st5:')) outcomes.refused++;
            else outcomes.bad.push(`${e?.name}: ${e?.message}`);
          }
        }
        index.dispose();
        await m.dispose();
        return { n: cases.length, ...outcomes, bad: [...new Set(outcomes.bad)].slice(0, 5) };
      }, `/models/${ST}/`);
      if (r.bad.length || r.refused === 0 || r.loaded === 0) throw new Error(JSON.stringify(r));
      return `${r.n} mutated files: ${r.refused} refused with an st5 message, ${r.loaded} loaded intact`;
    },
  ],
  [
    'an_index_built_by_the_cli_opens_from_a_url_with_progress',
    async () => {
      // `st5 index build` natively, then importIndex from the URL in the page (CPU and WebGPU):
      // the same hits as `st5 index query`, progress through download and check.
      const queries = [BUILT_DOCS[0], BUILT_DOCS[5], 'a question nobody indexed'];
      const r = await page.evaluate(
        async ({ url, queries }) => {
          const m = await st5.load(url, { device: 'cpu', threads: 1 });
          const out = {};
          for (const device of ['cpu', 'webgpu']) {
            const events = [];
            const index = await st5.importIndex(m, '/built/int8.st5index', {
              device,
              onProgress: (e) => events.push(e.stage),
            });
            out[device] = {
              quantize: index.quantize,
              device: index.device,
              stages: [...new Set(events)].join(),
              hits: await Promise.all(queries.map(async (q) => (await index.search(q, 3)).hits)),
            };
            index.dispose();
          }
          out.missing = await st5.importIndex(m, '/built/none.st5index').then(
            () => 'loaded',
            (e) => e.message,
          );
          await m.dispose();
          return out;
        },
        { url: `/models/${ST}/`, queries },
      );
      const want = queries.map(builtHits);
      for (const [device, got] of Object.entries(r).filter(([k]) => k !== 'missing')) {
        const same = got.hits.every((hits, q) =>
          hits.every((h, i) => h.text === want[q][i].text && Math.abs(h.score - want[q][i].score) <= 2e-4),
        );
        if (got.quantize !== 'int8' || got.stages !== 'download,check,ready' || !same)
          throw new Error(`${device}: ${JSON.stringify(got)} vs ${JSON.stringify(want)}`);
      }
      if (!r.missing.includes('HTTP 404')) throw new Error(`missing file: ${r.missing}`);
      return `CPU (${r.cpu.device}) and WebGPU (${r.webgpu.device}) equal \`st5 index query\`'s top 3 for ${queries.length} queries; progress ${r.cpu.stages}`;
    },
  ],
  [
    'quantized_index_recall_rescoring_persistence_and_refusals',
    async () => {
      // int8 and binary indexes over 20,000 real st5-mini vectors, on the wasm CPU and WebGPU,
      // rescoring from OPFS: recall@10 against exact f32 search, rescored scores equal to the
      // f32 dot products, the same answers after save/openIndex and export/importIndex, from
      // 'memory' rescoring too (for the first 20 queries: on SwiftShader each WebGPU search of
      // all 200 took 16-45 s), and damaged files refused.
      const r = await page.evaluate(
        async ({ docs, queries }) => {
          const npy = new Uint8Array(await (await fetch('/recall/vectors.npy')).arrayBuffer());
          const headerLen = new DataView(npy.buffer).getUint16(8, true);
          const all = new Float32Array(npy.slice(10 + headerLen).buffer);
          const dim = all.length / (docs + queries);
          for (let i = 0; i < docs + queries; i++) {
            const row = all.subarray(i * dim, (i + 1) * dim);
            const norm = Math.hypot(...row);
            row.forEach((x, j) => (row[j] = x / norm));
          }
          const texts = (await (await fetch('/recall/corpus.txt')).text()).split('\n').slice(0, docs);
          const vectors = all.subarray(0, docs * dim);
          const held = all.slice(docs * dim);
          const few = held.subarray(0, 20 * dim);
          const model = { dim, fingerprint: 'recall-test', embedFlat: async () => new Float32Array(0) };
          const k = 10;
          const exact = await st5.createIndex(model, { device: 'cpu', name: 'exact' });
          await exact.addVectors(texts, vectors);
          const truth = await exact.searchVectors(held, k);
          exact.dispose();
          const ids = (lists) => lists.map((hits) => hits.map((h) => h.id).join()).join(';');
          const fewIds = (lists) => ids(lists.slice(0, few.length / dim));
          const out = { dim, modes: {} };
          for (const device of ['cpu', 'webgpu']) {
            for (const quantize of ['int8', 'binary']) {
              const name = `recall-${device}-${quantize}`;
              const index = await st5.createIndex(model, { device, quantize, name });
              await index.addVectors(texts, vectors);
              const got = await index.searchVectors(held, k);
              let found = 0;
              let scoreErr = 0;
              got.forEach((hits, q) => {
                const want = new Set(truth[q].map((h) => h.id));
                found += hits.filter((h) => want.has(h.id)).length;
                const query = held.subarray(q * dim, (q + 1) * dim);
                for (const h of hits) {
                  let dot = 0;
                  for (let j = 0; j < dim; j++) dot += query[j] * vectors[h.id * dim + j];
                  scoreErr = Math.max(scoreErr, Math.abs(dot - h.score));
                }
              });
              const m = {
                device: index.device,
                rescore: index.rescore,
                recall: found / (k * queries),
                scoreErr,
                bytesPerVector: index.bytes / docs,
              };
              await index.save();
              const { index: reopened, restored } = await st5.openIndex(model, texts, { device, quantize, name });
              m.restored = restored === docs && ids(await reopened.searchVectors(few, k)) === fewIds(got);
              reopened.dispose();
              const file = new Uint8Array(await (await index.export()).arrayBuffer());
              const copy = await st5.importIndex(model, new Blob([file]), { device });
              m.imported = copy.quantize === quantize && ids(await copy.searchVectors(few, k)) === fewIds(got);
              copy.dispose();
              const refusal = async (bytes) =>
                st5.importIndex(model, new Blob([bytes]), { device }).then(
                  (x) => (x.dispose(), 'loaded'),
                  (e) => e.message,
                );
              const flipped = file.slice();
              flipped[Math.floor(file.length / 3)] ^= 1; // inside the code words
              m.truncated = await refusal(file.subarray(0, file.length - 5));
              m.flipped = await refusal(flipped);
              const inMemory = await st5.createIndex(model, { device, quantize, rescore: 'memory' });
              await inMemory.addVectors(texts, vectors);
              m.memorySame = inMemory.rescore === 'memory' && ids(await inMemory.searchVectors(few, k)) === fewIds(got);
              inMemory.dispose();
              index.dispose();
              out.modes[name] = m;
            }
          }
          // Disposed indexes leave no rescoring files behind.
          const dir = await (await navigator.storage.getDirectory()).getDirectoryHandle('st5-rows');
          await new Promise((r) => setTimeout(r, 200)); // removal follows the last write
          out.leftFiles = 0;
          for await (const _ of dir.keys()) out.leftFiles++;
          return out;
        },
        { docs: RECALL_DOCS, queries: RECALL_QUERIES },
      );
      const notes = [];
      for (const [name, m] of Object.entries(r.modes)) {
        const floor = name.endsWith('int8') ? 0.99 : 0.95;
        const bytes = name.endsWith('int8') ? r.dim + 4 : r.dim / 8 + 4;
        const problems = [
          m.recall < floor && `recall ${m.recall}`,
          !(m.scoreErr <= 1e-5) && `score error ${m.scoreErr}`,
          m.rescore !== 'opfs' && `rescore ${m.rescore}`,
          Math.abs(m.bytesPerVector - bytes) > 0.5 && `${m.bytesPerVector} bytes a vector`,
          !m.restored && 'openIndex',
          !m.imported && 'importIndex',
          !m.memorySame && "rescore: 'memory'",
          !/truncated/.test(m.truncated) && `truncated: ${m.truncated}`,
          !/checksum mismatch/.test(m.flipped) && `flipped: ${m.flipped}`,
        ].filter(Boolean);
        if (problems.length) throw new Error(`${name} (${m.device}): ${problems.join('; ')}`);
        notes.push(`${name} recall@10 ${m.recall.toFixed(4)} (${m.bytesPerVector} B/vector)`);
      }
      if (r.leftFiles) throw new Error(`${r.leftFiles} rescoring files left in OPFS`);
      return notes.join(', ');
    },
  ],
  [
    'hostile_text_has_defined_results',
    async () => {
      // tests/hostile.rs has the native cases; here the ones only JS can send (lone surrogates)
      // and the same edge cases through the package, on the CPU pool.
      const r = await page.evaluate(async (url) => {
        const m = await st5.load(url, { device: 'cpu' });
        const flat = (rows) => rows.map((x) => Array.from(x));
        const same = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);
        const unit = (rows) => rows.every((x) => Math.abs(Math.hypot(...x) - 1) < 1e-4 && x.every(Number.isFinite));
        const out = {};
        // Lone surrogates cross into Rust as U+FFFD (TextEncoder's replacement), so they embed as it.
        const s = flat(await m.embed(['a\uD800b', 'a\uFFFDb', '\uDC00', '\uFFFD', 'x\uDBFF']));
        out.surrogates = same(s[0], s[1]) && same(s[2], s[3]) && unit(s);
        const nul = flat(await m.embed(['nul\0inside', 'nul', '\0']));
        out.nul = !same(nul[0], nul[1]) && unit(nul);
        // One character of every general category (Cs: a lone surrogate), alone and inside words.
        const cats = 'Aßǅʰ中\u0301\u0903\u20DD٣Ⅻ½_—()«»!∑€^😀\u3000\u2028\u2029\u0007\u200D\uE000\u0378\uD800';
        const chars = [...cats];
        const odd = flat(await m.embed([...chars, ...chars.map((c) => `a${c}b ${c}${c} end`), cats, '']));
        out.categories = odd.length === 2 * chars.length + 2 && unit(odd);
        out.nCategories = chars.length;
        const big = 'the quick brown fox jumps over the lazy dog '.repeat(24000);
        const b = flat(await m.embed([big, big.slice(0, 2000)]));
        out.megabyte = big.length >= 2 ** 20 && same(b[0], b[1]);
        const many = Array.from({ length: 100000 }, (_, i) => `item ${i}`);
        const t0 = performance.now();
        const all = await m.embedFlat(many);
        out.manyMs = performance.now() - t0;
        const spot = flat(await m.embed([many[0], many[31337], many[99999]]));
        const dim = m.dim;
        out.many =
          all.length === 100000 * dim &&
          [0, 31337, 99999].every((i, k) => same(Array.from(all.subarray(i * dim, (i + 1) * dim)), spot[k]));
        await m.dispose();
        return out;
      }, `/models/${ST}/`);
      const bad = Object.entries(r).filter(([, ok]) => ok === false);
      if (bad.length) throw new Error(`failed: ${bad.map(([k]) => k)}; ${JSON.stringify(r)}`);
      return `lone surrogates = U+FFFD, NUL kept, ${r.nCategories} categories, 1 MB = its prefix, 100,000 texts in ${(r.manyMs / 1000).toFixed(1)} s`;
    },
  ],
  [
    'damaged_tokenizer_is_refused_and_the_module_keeps_working',
    async () => {
      const r = await page.evaluate(async (base) => {
        const names = [
          'config.json',
          'model.safetensors',
          'modules.json',
          'sentence_bert_config.json',
          '1_Pooling/config.json',
          '2_Dense/config.json',
          '2_Dense/model.safetensors',
          '3_Normalize/config.json',
        ];
        const files = new Map();
        for (const n of names) files.set(n, new Uint8Array(await (await fetch(base + n)).arrayBuffer()));
        const tok = await (await fetch(base + 'tokenizer.json')).json();
        const steps = tok.normalizer.type === 'Precompiled' ? [tok.normalizer] : tok.normalizer.normalizers;
        const pre = steps.find((x) => x.type === 'Precompiled');
        // Cut the charsmap mid-trie: the tokenizers crate panicked on this (a trap, in wasm).
        pre.precompiled_charsmap = btoa(atob(pre.precompiled_charsmap).slice(0, 1000));
        files.set('tokenizer.json', new TextEncoder().encode(JSON.stringify(tok)));
        const refused = await st5.load(files, { device: 'cpu', threads: 1 }).then(
          () => 'loaded',
          (e) => `${e.code}: ${e.message}`,
        );
        const m = await st5.load(base, { device: 'cpu', threads: 1 });
        const rows = await m.embed(['still works']);
        await m.dispose();
        return { refused, ok: rows.length === 1 };
      }, `/models/${ST}/`);
      if (!/tokenizer\.json/.test(r.refused) || !/precompiled_charsmap/.test(r.refused) || !r.ok)
        throw new Error(JSON.stringify(r));
      return r.refused;
    },
  ],
]);

await browser.close();
await server.close();
process.exit(failed ? 1 : 0);
