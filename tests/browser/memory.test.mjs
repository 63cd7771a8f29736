// Memory held flat in a long-running page (a search box open for hours must not leak): wasm memory and, on WebGPU, live GPU
// buffers must stop growing once warm. Long-lived tabs are where embedders leak (transformers.js
// #860, #1739, #1242, #953), so each case runs a model, or an index, many times on one page:
// - 200 batches with one model: growth between batch 50 and batch 200 ≤ 5%;
// - load → embed → dispose, 10 times: the last cycle ≤ 5% above the first, and a final load works;
// - a search index, 10 rounds of add, search and save: round 10 ≤ 5% above round 2.
// On both devices (WebGPU on SwiftShader here). Each case prints its figures.
//
//   node tests/browser/memory.test.mjs     (after `bash pkg/build.sh`; scripts/test.sh runs it)

import {
  FIXTURES,
  expected,
  installPackage,
  launch,
  maxAbsDiff,
  open,
  runCases,
  serve,
  writeIndexPage,
} from './harness.mjs';

const ST = 'st-enc-mean-relu';
const GROWTH = 0.05;
const { app } = installPackage();
writeIndexPage(app);
const server = await serve({ '/': app, '/models/': FIXTURES });
// `gc()` for the page: wgpu's web backend frees a GPU buffer by dropping it (its JS object is
// collected), not by `destroy()`, so live buffers are the reachable ones after a full collection.
const browser = await launch(['--js-flags=--expose-gc']);
const context = await browser.newContext();
// Every GPU buffer created, held weakly: live = not yet collected.
await context.addInitScript(() => {
  if (!globalThis.GPUDevice) return;
  const buffers = (globalThis.__gpuBuffers = []);
  const create = GPUDevice.prototype.createBuffer;
  GPUDevice.prototype.createBuffer = function (...args) {
    const buffer = create.apply(this, args);
    buffers.push(new WeakRef(buffer));
    return buffer;
  };
});
const { page } = await open(context, `${server.url}/`);
const st = expected(ST);
const url = `/models/${ST}/`;
// In-page helpers: memory now, and texts of varied lengths (so batch shapes vary as in real use).
await page.evaluate(async () => {
  const runtime = await import('/node_modules/st5/runtime.js');
  globalThis.__mem = async () => {
    // Two collections with a turn of the event loop between: finalizers run, WeakRefs clear.
    for (let i = 0; i < 2; i++) {
      gc();
      await new Promise((resolve) => setTimeout(resolve, 0));
    }
    const live = (globalThis.__gpuBuffers ?? []).filter((w) => w.deref() !== undefined).length;
    return { wasm: runtime.wasmMemoryBytes(), gpu: live };
  };
  globalThis.__texts = (i, n = 8) =>
    Array.from({ length: n }, (_, j) => `document ${i}-${j}: ${'word '.repeat(1 + ((i * 7 + j * 3) % 40))}`);
});

const pct = (a, b) => (b - a) / a;
const fmt = (x) => `${(100 * x).toFixed(2)}%`;
const mib = (b) => `${(b / 2 ** 20).toFixed(1)} MiB`;

/** Fails unless `after` is within GROWTH of `before` for wasm memory and GPU buffers. */
function flat(what, before, after) {
  const wasm = pct(before.wasm, after.wasm);
  const gpu = before.gpu ? pct(before.gpu, after.gpu) : after.gpu ? Infinity : 0;
  if (!(wasm <= GROWTH && gpu <= GROWTH)) {
    throw new Error(`${what}: wasm ${mib(before.wasm)} → ${mib(after.wasm)}, GPU buffers ${before.gpu} → ${after.gpu}`);
  }
  return `wasm ${mib(before.wasm)} → ${mib(after.wasm)} (${fmt(wasm)}), GPU buffers ${before.gpu} → ${after.gpu} (${fmt(gpu)})`;
}

const devices = ['cpu', 'webgpu'];
const failed = await runCases([
  ...devices.map((device) => [
    `two_hundred_batches_hold_memory_flat_on_${device}`,
    async () => {
      const r = await page.evaluate(
        async ({ url, device }) => {
          const m = await st5.load(url, { device, threads: 1 });
          let at50;
          for (let i = 1; i <= 200; i++) {
            await m.embedFlat(__texts(i));
            if (i === 50) at50 = await __mem();
          }
          const out = { at50, at200: await __mem(), device: m.device };
          await m.dispose();
          return out;
        },
        { url, device },
      );
      if (r.device !== device) throw new Error(`ran on ${r.device}`);
      return `batch 50 → 200: ${flat('batch 50 → 200', r.at50, r.at200)}`;
    },
  ]),
  ...devices.map((device) => [
    `load_embed_dispose_ten_times_on_${device}`,
    async () => {
      const r = await page.evaluate(
        async ({ url, device, texts }) => {
          const baseline = await __mem();
          const after = [];
          for (let i = 0; i < 10; i++) {
            const m = await st5.load(url, { device, threads: 1 });
            await m.embed(__texts(i, 16));
            await m.dispose();
            after.push(await __mem());
          }
          const m = await st5.load(url, { device, threads: 1 });
          const rows = (await m.embed(texts)).map((x) => Array.from(x));
          await m.dispose();
          return { baseline, after, rows };
        },
        { url, device, texts: st.sentences },
      );
      const err = maxAbsDiff(r.rows, st.embeddings['enc-mean']);
      if (!(err <= 1e-4)) throw new Error(`the load after 10 cycles: max abs error ${err}`);
      // dispose gives the GPU memory back: no more buffers live after it than before the load.
      if (r.after[9].gpu > r.baseline.gpu) {
        throw new Error(
          `GPU buffers live: ${r.baseline.gpu} before the first load, ${r.after[9].gpu} after 10 disposes`,
        );
      }
      return `cycle 1 → 10: ${flat('cycle 1 → 10', r.after[0], r.after[9])}; GPU buffers before the first load ${r.baseline.gpu}; then a load embeds within ${err.toExponential(1)}`;
    },
  ]),
  ...devices.map((device) => [
    `index_add_search_save_rounds_hold_memory_flat_on_${device}`,
    async () => {
      const r = await page.evaluate(
        async ({ url, device }) => {
          const m = await st5.load(url, { device: 'cpu', threads: 1 });
          const index = await st5.createIndex(m, { device, name: `memory-${device}` });
          const rounds = [];
          for (let i = 0; i < 10; i++) {
            await index.add(__texts(1000 + i, 20));
            const { hits } = await index.search(`document ${1000 + i}-3`, 5);
            if (hits.length !== 5) throw new Error(`round ${i}: ${hits.length} hits`);
            await index.save();
            rounds.push(await __mem());
          }
          const out = { rounds, size: index.size, device: index.device };
          index.dispose();
          await m.dispose();
          return out;
        },
        { url, device },
      );
      if (r.size !== 200 || r.device !== device) throw new Error(`size ${r.size}, device ${r.device}`);
      return `round 2 → 10 (200 documents): ${flat('round 2 → 10', r.rounds[1], r.rounds[9])}`;
    },
  ]),
]);

await browser.close();
await server.close();
process.exit(failed ? 1 : 0);
