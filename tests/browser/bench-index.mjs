// Benchmark of the package's search index in headless Chromium: query latency (embedded query
// vector → top-10) over 10k and 100k random unit vectors of width 768 on WebGPU and on the CPU,
// beside a brute-force JavaScript loop over the same vectors in the same page; and indexing
// throughput (sentences/s) of the demo's default model on both devices.
//
//   node tests/browser/bench-index.mjs [--sizes 10000,100000] [--repeats 5] [--sentences 512]

import { DEMO_ROUTES } from '../../www/serve.mjs';
import { launch, open, serve } from './harness.mjs';

const arg = (name, dflt) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : dflt;
};
const sizes = arg('--sizes', '10000,100000').split(',').map(Number);
const repeats = Number(arg('--repeats', 5));
const sentences = Number(arg('--sentences', 512));

const server = await serve(DEMO_ROUTES);
const browser = await launch();
const { page } = await open(await browser.newContext(), `${server.url}/`);

for (const n of sizes) {
  const r = await page.evaluate(
    async ({ n, repeats }) => {
      const { createIndex } = await import('st5');
      const dim = 768;
      const k = 10;
      let s = 42;
      const rand = () => (s = (s * 1103515245 + 12345) % 2147483648) / 2147483648 - 0.5;
      const vectors = new Float32Array(n * dim);
      for (let i = 0; i < n; i++) {
        let norm = 0;
        for (let j = 0; j < dim; j++) norm += (vectors[i * dim + j] = rand()) ** 2;
        norm = Math.sqrt(norm);
        for (let j = 0; j < dim; j++) vectors[i * dim + j] /= norm;
      }
      const query = vectors.slice(17 * dim, 18 * dim);
      const median = (xs) => xs.sort((a, b) => a - b)[xs.length >> 1];
      const time = async (f) => {
        await f(); // warm-up: kernel compilation, allocation
        const ms = [];
        for (let i = 0; i < repeats; i++) {
          const t0 = performance.now();
          await f();
          ms.push(performance.now() - t0);
        }
        return median(ms);
      };
      // The peer: what in-browser vector libraries do, a dot-product loop and a top-k insert.
      const bruteForce = () => {
        const best = [];
        for (let i = 0; i < n; i++) {
          let dot = 0;
          const o = i * dim;
          for (let j = 0; j < dim; j++) dot += vectors[o + j] * query[j];
          if (best.length < k || dot > best[best.length - 1][1]) {
            best.push([i, dot]);
            best.sort((a, b) => b[1] - a[1] || a[0] - b[0]);
            if (best.length > k) best.pop();
          }
        }
        return best;
      };
      const out = { js: await time(async () => bruteForce()) };
      const want = bruteForce().map(([i]) => i);
      const model = { dim, fingerprint: 'bench', embedFlat: async () => new Float32Array(0) };
      const texts = Array.from({ length: n }, (_, i) => String(i));
      for (const [label, opts] of [
        ['webgpu', { device: 'webgpu' }],
        ['webgpu-128MiB', { device: 'webgpu', maxBufferBytes: 128 * 2 ** 20 }],
        ['cpu', { device: 'cpu' }],
      ]) {
        const idx = await createIndex(model, opts);
        const t0 = performance.now();
        idx.addVectors(texts, vectors);
        const upload = performance.now() - t0;
        const ms = await time(() => idx.searchVectors(query, k));
        const [hits] = await idx.searchVectors(query, k);
        const same = hits.map((h) => h.id).join() === want.join();
        out[label] = { ms, upload, shards: idx.shards, device: idx.device, same };
        idx.dispose();
      }
      return out;
    },
    { n, repeats },
  );
  const line = (label) =>
    `${label} ${r[label].ms.toFixed(1)} ms (${r[label].shards} shard${r[label].shards > 1 ? 's' : ''}, upload ${r[label].upload.toFixed(0)} ms, ids ${r[label].same ? '=' : '≠'} JS) ×${(r.js / r[label].ms).toFixed(2)} vs JS`;
  console.log(
    `n=${n} dim=768 top-10 median of ${repeats}: JS loop ${r.js.toFixed(1)} ms | ${['webgpu', 'webgpu-128MiB', 'cpu'].map(line).join(' | ')}`,
  );
}

// Indexing throughput: the demo's default model embedding the sample corpus through the index.
const corpus = (await (await fetch(`${server.url}/corpus/coco-captions.txt`)).text())
  .trim()
  .split('\n')
  .slice(0, sentences);
for (const device of ['webgpu', 'cpu']) {
  const r = await page.evaluate(
    async ({ device, corpus }) => {
      const { load, createIndex } = await import('st5');
      const model = await load('/models/default/', { device });
      const idx = await createIndex(model, { device });
      await idx.add(corpus.slice(0, 8)); // warm-up
      const t0 = performance.now();
      const { added } = await idx.add(corpus.slice(8), { batchSize: 128 });
      const s = (performance.now() - t0) / 1000;
      return { added, s, device: model.device };
    },
    { device, corpus },
  );
  console.log(
    `indexing on ${r.device}: ${r.added} sentences in ${r.s.toFixed(2)} s = ${(r.added / r.s).toFixed(1)} sentences/s (default model, batch 128)`,
  );
}

await browser.close();
await server.close();
