// Side-by-side browser benchmark: st5's CPU path against onnxruntime-web (the
// engine under transformers.js), in the same headless Chromium, on the same sentences and the
// same model, one after the other: both at 1 thread and at all cores. Prints sentences/s, the
// ratio st5 / onnxruntime-web, and the max abs difference between the two runtimes' embeddings
// (and of each against sentence-transformers). For a shipped model it also prints st5's time to first
// embedding on the CPU, cold (empty caches) and warm (model files from the Cache API). At all
// cores it also times st5's first call (the pool's workers starting with it, or at load with
// `startWorkers`) against the peer's steady state. Each CPU row also gives the WebAssembly memory
// each side holds after its runs: st5's page module and each worker's (`model.memory()`: every
// worker holds its own copy of the weights), and onnxruntime-web's one module (its threads share
// one memory), recorded as the page creates or instantiates it.
// `--webgpu N` adds both runtimes on WebGPU (SwiftShader here: a proxy, not a GPU figure) on N
// sentences, with st5's compute pipelines, dispatches and read-backs counted per forward pass.
//
// Setup (once; Python only here, never at run time; nothing is committed):
//   /tmp/st5-ref/bin/python tests/reference/export_onnx.py --model /tmp/st5-bench-base --out /tmp/st5-peer/base --make-base
//   /tmp/st5-ref/bin/python tests/reference/export_onnx.py --model models/st5-mini --out /tmp/st5-peer/st5-mini
//   (an int8 model such as models/st5-small: export its f32 copy, `st5 quantize --dtype f32`, to
//   /tmp/st5-peer/st5-small; st5 still loads the int8 directory under models/)
//   bash pkg/build.sh && (cd tests/browser && npm ci)
//   /tmp/st5-ref/bin/python tests/reference/export_onnx.py --teacher --q8 --out /tmp/st5-peer/teacher
// `NAME@GRAPH` runs st5 on models/NAME beside onnxruntime-web on another model, PEER/GRAPH, with
// that model's own token ids (e.g. st5-small@teacher/model_q8.onnx: the shipped models' teacher as
// transformers.js ships it by default, int8). Such rows compare speed only: the embedding
// differences of two different models are not printed.
// Run:
//   node tests/browser/bench-peer.mjs [--models base,st5-mini,st5-small,st5-small@teacher/model_q8.onnx] [-n 512] [--batch 32] [--webgpu 32]
//                                     [--flavor simd128|relaxed] [--compute auto|f32]

import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { ROOT, installPackage, launch, open, serve, writeIndexPage } from './harness.mjs';
import { ortDistDir, ortEmbed } from './peer-ort.mjs';

const arg = (name, dflt) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : dflt;
};
const PEER = arg('--peer-dir', '/tmp/st5-peer');
// name → the st5 model directory the ONNX graph in PEER/name was exported from: `base`, or one
// of the shipped models under models/.
const modelDir = (name) => (name === 'base' ? arg('--base-dir', '/tmp/st5-bench-base') : join(ROOT, 'models', name));
const names = arg('--models', 'base,st5-mini').split(',');
const n = Number(arg('-n', 512));
const batchSize = Number(arg('--batch', 32));
const webgpuN = Number(arg('--webgpu', 0));
// `--flavor simd128` runs st5's plain SIMD module even where relaxed SIMD is available.
const flavor = arg('--flavor', undefined);
// `--compute f32` runs an int8 model's st5 side with its weights widened to f32 (the exact path)
// instead of int8 compute, for st5's own int8-against-f32 figure.
const compute = arg('--compute', 'auto');
// Each side's figure is the median of this many timed runs (the 2-core machine is noisy).
const repeats = Number(arg('--repeats', 3));
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

const { app } = installPackage();
writeIndexPage(app);
for (const f of ['st5_wasm_bg.wasm', 'st5_wasm_relaxed_bg.wasm']) {
  const wasm = readFileSync(join(app, 'node_modules/st5/wasm', f));
  console.log(
    `${f}: ${(wasm.length / 1e6).toFixed(2)} MB raw, ${(gzipSync(wasm, { level: 9 }).length / 1e6).toFixed(2)} MB gzipped`,
  );
}
const routes = { '/': app, '/ort/': ortDistDir, '/peer/': PEER };
for (const spec of names) routes[`/model/${spec.split('@')[0]}/`] = modelDir(spec.split('@')[0]);
const server = await serve(routes);
const browser = await launch();

// Counts the WebGPU calls st5's wgpu backend makes (wgpu's web backend creates pipelines with the
// synchronous createComputePipeline and reads back with mapAsync).
const countGpuCalls = () => {
  if (!globalThis.GPUDevice) return;
  const counts = (globalThis.__gpuCounts = { pipelines: 0, dispatches: 0, reads: 0, submits: 0 });
  const wrap = (proto, method, key) => {
    const inner = proto[method];
    proto[method] = function (...args) {
      counts[key]++;
      return inner.apply(this, args);
    };
  };
  wrap(GPUDevice.prototype, 'createComputePipeline', 'pipelines');
  wrap(GPUComputePassEncoder.prototype, 'dispatchWorkgroups', 'dispatches');
  wrap(GPUBuffer.prototype, 'mapAsync', 'reads');
  wrap(GPUQueue.prototype, 'submit', 'submits');
};

// Records every WebAssembly memory the page creates or instantiates (a module's own, or a shared
// one it imports), so that the peer's can be read after its runs.
const recordWasmMemories = () => {
  const seen = (globalThis.__wasmMemories = new Set());
  const Memory = WebAssembly.Memory;
  WebAssembly.Memory = function (...args) {
    const m = new Memory(...args);
    seen.add(m);
    return m;
  };
  WebAssembly.Memory.prototype = Memory.prototype;
  const keep = (result) => {
    const instance = result.instance ?? result;
    for (const v of Object.values(instance.exports ?? {})) if (v instanceof Memory) seen.add(v);
    return result;
  };
  for (const name of ['instantiate', 'instantiateStreaming']) {
    const inner = WebAssembly[name];
    WebAssembly[name] = (...args) => inner.apply(WebAssembly, args).then(keep);
  }
};

/** Bytes of every WebAssembly memory `recordWasmMemories` saw in `page`. */
const pageWasmBytes = (page) =>
  page.evaluate(() => [...globalThis.__wasmMemories].reduce((n, m) => n + m.buffer.byteLength, 0));

/** A fresh page (a fresh context: empty caches, and onnxruntime-web's threads fixed per page). */
async function freshPage() {
  const context = await browser.newContext();
  await context.addInitScript(countGpuCalls);
  await context.addInitScript(recordWasmMemories);
  if (flavor) await context.addInitScript((f) => (globalThis.__st5WasmFlavor = f), flavor);
  const { page } = await open(context, `${server.url}/`);
  return { page, context };
}

/** st5 in the page: load, warm up every thread, then embed all sentences; timed like the peer. */
async function st5Embed(name, sentences, options) {
  const r = await inFreshPage(
    async ({ url, sentences, options, repeats }) => {
      const m = await st5.load(url, options);
      // A call with several batches starts the pool's workers; then wait until all have loaded.
      await m.embed(sentences.slice(0, 2 * options.batchSize));
      const want = options.threads ?? 1;
      for (let i = 0; i < 1200 && m.threads < want; i++) await new Promise((ok) => setTimeout(ok, 50));
      // Warm-up: one small batch per thread, as the peer's one warm-up run per session.
      await m.embed(sentences.slice(0, 2 * m.threads));
      const c0 = { ...(globalThis.__gpuCounts ?? {}) };
      const times = [];
      let flat;
      for (let i = 0; i < repeats; i++) {
        const t0 = performance.now();
        flat = await m.embedFlat(sentences);
        times.push((performance.now() - t0) / 1000);
      }
      const c1 = globalThis.__gpuCounts ?? {};
      const calls = Object.fromEntries(Object.keys(c1).map((k) => [k, (c1[k] - c0[k]) / repeats]));
      const out = {
        times,
        flat: Array.from(flat),
        dim: m.dim,
        device: m.device,
        threads: m.threads,
        calls,
        arithmetic: m.arithmetic,
        memory: await m.memory(),
      };
      await m.dispose();
      return out;
    },
    st5Args(name, sentences, options),
  );
  return { ...r, sentencesPerSec: sentences.length / median(r.times) };
}

/** What the st5 measurements evaluate in their page: the model's URL, the sentences, `load`'s
 * options with the run's batch size, and the repeats. */
const st5Args = (name, sentences, options) => ({
  url: `/model/${name}/`,
  sentences,
  options: { batchSize, ...options },
  repeats,
});

/** `fn(args)` evaluated in a fresh page (its own browser context, closed afterwards). */
async function inFreshPage(fn, args) {
  const { page, context } = await freshPage();
  try {
    return await page.evaluate(fn, args);
  } finally {
    await context.close();
  }
}

/** st5's first call in a fresh page, timed from `load`'s return: what a page that loads a model
 * and indexes its documents at once gets, the pool's workers still loading (with `startWorkers`
 * they start at load rather than with the call). Sentences/s. */
async function st5FirstCall(name, sentences, options) {
  const seconds = await inFreshPage(
    async ({ url, sentences, options }) => {
      const m = await st5.load(url, options);
      const t0 = performance.now();
      await m.embedFlat(sentences);
      const s = (performance.now() - t0) / 1000;
      await m.dispose();
      return s;
    },
    st5Args(name, sentences, options),
  );
  return sentences.length / seconds;
}

/** onnxruntime-web in a fresh page, on the same length-sorted batches st5 plans. */
async function ortRun(graph, ids, options) {
  // st5 sorts texts by token count (longest first) before batching; the peer gets the same
  // batches, so both pad alike. Rows are put back in input order afterwards.
  const order = ids.map((_, i) => i).sort((a, b) => ids[b].length - ids[a].length || a - b);
  const { page, context } = await freshPage();
  const runs = [];
  for (let i = 0; i < repeats; i++) {
    runs.push(
      await ortEmbed(
        page,
        `${server.url}/ort/`,
        `${server.url}/peer/${graph}`,
        order.map((i) => ids[i]),
        {
          batchSize,
          ...options,
        },
      ),
    );
  }
  const wasmBytes = await pageWasmBytes(page);
  await context.close();
  const r = { ...runs.at(-1), wasmBytes, sentencesPerSec: median(runs.map((x) => x.sentencesPerSec)) };
  const flat = new Array(r.embeddings.length);
  order.forEach((row, j) => {
    for (let k = 0; k < r.dim; k++) flat[row * r.dim + k] = r.embeddings[j * r.dim + k];
  });
  return { ...r, flat };
}

const mib = (bytes) => (bytes / 2 ** 20).toFixed(1);
const maxDiff = (a, b) => a.reduce((m, x, i) => Math.max(m, Math.abs(x - b[i])), 0);

/** Time to first embedding: a fresh context (cold), then a second page in it (warm). */
async function firstEmbedding(name, device) {
  const context = await browser.newContext();
  await context.addInitScript(countGpuCalls);
  const once = async () => {
    const { page } = await open(context, `${server.url}/`);
    return page.evaluate(
      async ({ url, device }) => {
        const t0 = performance.now();
        const m = await st5.load(url, { device });
        const tLoad = performance.now();
        await m.embed(['A man is playing a guitar.']);
        const out = { load: tLoad - t0, total: performance.now() - t0, device: m.device, ...globalThis.__gpuCounts };
        await m.dispose();
        return out;
      },
      { url: `/model/${name}/`, device },
    );
  };
  const cold = await once();
  const warm = await once();
  await context.close();
  return { cold, warm };
}

const cores = await (async () => {
  const { page, context } = await freshPage();
  const c = await page.evaluate(async () => ({
    cores: navigator.hardwareConcurrency,
    coi: crossOriginIsolated,
    flavor: (await import('/node_modules/st5/runtime.js')).wasmFlavor(),
  }));
  await context.close();
  // What ran, so that a figure can be traced: the host CPU and the flags behind V8's lowering of
  // the relaxed dot product (a one-instruction VNNI dot needs AVX-512 VNNI or AVX-VNNI), the
  // browser, and st5's module (relaxed or SIMD128).
  const cpuinfo = existsSync('/proc/cpuinfo') ? readFileSync('/proc/cpuinfo', 'utf8') : '';
  const cpu = /model name\s*:\s*(.*)/.exec(cpuinfo)?.[1] ?? 'unknown';
  const flags = new Set((/flags\s*:\s*(.*)/.exec(cpuinfo)?.[1] ?? '').split(' '));
  const wanted = ['avx2', 'avx512f', 'avx512_vnni', 'avx_vnni'].filter((f) => flags.has(f));
  console.log(`CPU: ${cpu}; flags: ${wanted.join(' ') || 'none of avx2, avx512f, avx512_vnni, avx_vnni'}`);
  console.log(
    `Chromium ${browser.version()}: ${c.cores} cores, crossOriginIsolated ${c.coi}; st5 module ${c.flavor}; batch ${batchSize}`,
  );
  return c.cores;
})();

const table = [];
for (const spec of names) {
  const [name, graph = `${name}/model.onnx`] = spec.split('@');
  const peerDir = join(PEER, dirname(graph));
  const same = !spec.includes('@');
  const diff = (a, b) => (same ? maxDiff(a, b) : '-');
  const sentences = readFileSync(join(peerDir, 'sentences.txt'), 'utf8').split('\n').filter(Boolean).slice(0, n);
  const ids = JSON.parse(readFileSync(join(peerDir, 'ids.json'), 'utf8')).slice(0, sentences.length);
  const reference = JSON.parse(readFileSync(join(peerDir, 'expected.json'), 'utf8'));
  const ref = reference.embeddings.slice(0, sentences.length).flat();
  for (const threads of [1, cores]) {
    const ours = await st5Embed(name, sentences, { device: 'cpu', threads, compute });
    const peer = await ortRun(graph, ids, { threads });
    const row = {
      model: spec,
      'st5 arithmetic': ours.arithmetic,
      threads: `${threads} (st5 ${ours.threads}, ort ${peer.threads})`,
      n: sentences.length,
      st5: ours.sentencesPerSec,
      ort: peer.sentencesPerSec,
      ratio: ours.sentencesPerSec / peer.sentencesPerSec,
      'st5 vs ort': diff(ours.flat, peer.flat),
      'st5 vs ref': diff(ours.flat, ref),
      'ort vs ref': diff(peer.flat, ref),
      'st5 wasm MiB (page + workers)': [ours.memory.page, ...ours.memory.workers].map(mib).join(' + '),
      'ort wasm MiB': mib(peer.wasmBytes),
    };
    table.push(row);
    console.log(JSON.stringify(row));
    if (threads === cores && cores > 1) {
      // The first call with all cores, against the peer's steady state (its sessions start their
      // threads at creation, before any call).
      const lazy = await st5FirstCall(name, sentences, { device: 'cpu', compute });
      const early = await st5FirstCall(name, sentences, { device: 'cpu', compute, startWorkers: true });
      const x = (v) => `${v.toFixed(1)}/s (${(v / peer.sentencesPerSec).toFixed(2)}x ort's steady state)`;
      console.log(
        `${spec} st5's first call of ${sentences.length} on ${cores} cores: ${x(lazy)}; ` +
          `with startWorkers at load: ${x(early)}`,
      );
    }
  }
  if (webgpuN > 0) {
    const few = sentences.slice(0, webgpuN);
    const ours = await st5Embed(name, few, { device: 'webgpu' });
    const peer = await ortRun(graph, ids.slice(0, webgpuN), { ep: 'webgpu' });
    const forwards = Math.ceil(few.length / batchSize);
    const per = (k) => (ours.calls[k] / forwards).toFixed(1);
    const row = {
      model: spec,
      threads: 'webgpu',
      n: few.length,
      st5: ours.sentencesPerSec,
      ort: peer.sentencesPerSec,
      ratio: ours.sentencesPerSec / peer.sentencesPerSec,
      'st5 vs ort': diff(ours.flat, peer.flat),
      'st5 vs ref': diff(ours.flat, ref.slice(0, few.length * ours.dim)),
      'ort vs ref': diff(peer.flat, ref.slice(0, few.length * ours.dim)),
    };
    table.push(row);
    console.log(JSON.stringify(row));
    console.log(
      `${name} st5 webgpu per forward (warm, batch ${batchSize}): ${per('dispatches')} dispatches, ` +
        `${per('reads')} read-backs (mapAsync), ${per('submits')} submits, ${per('pipelines')} new pipelines`,
    );
  }
  if (name !== 'base' && same) {
    for (const device of webgpuN > 0 ? ['cpu', 'webgpu'] : ['cpu']) {
      const { cold, warm } = await firstEmbedding(name, device);
      console.log(
        `${name} time to first embedding on ${cold.device}: cold ${(cold.total / 1000).toFixed(2)} s ` +
          `(load ${(cold.load / 1000).toFixed(2)} s), warm ${(warm.total / 1000).toFixed(2)} s (load ${(warm.load / 1000).toFixed(2)} s)` +
          (device === 'webgpu'
            ? `; before the first vector: ${cold.pipelines} pipelines, ${cold.dispatches} dispatches`
            : ''),
      );
    }
  }
}

const fmt = (v) => (typeof v === 'number' ? (v < 0.01 ? v.toExponential(2) : v.toFixed(2)) : v);
const cols = Object.keys(table[0]);
console.log(`\n| ${cols.join(' | ')} |\n|${cols.map(() => '---').join('|')}|`);
for (const row of table) console.log(`| ${cols.map((c) => fmt(row[c])).join(' | ')} |`);

await browser.close();
await server.close();
