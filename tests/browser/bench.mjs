// Browser benchmark of the npm package: .wasm size (raw and gzipped), time to first embedding
// (cold: empty caches; warm: a second page, model files from the Cache API) and embedding
// throughput on WebGPU and on the CPU, in headless Chromium.
//
//   node tests/browser/bench.mjs [--model DIR] [-n 64] [--batch 32]
//
// DIR defaults to /tmp/st5-bench-base, the random sentence-t5-base-sized model that
// tests/reference/bench_throughput.py writes (with the STS-B sentences in bench_input.txt).

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { installPackage, launch, open, serve, writeIndexPage } from './harness.mjs';

const arg = (name, dflt) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : dflt;
};
const modelDir = arg('--model', '/tmp/st5-bench-base');
const n = Number(arg('-n', 64));
const batchSize = Number(arg('--batch', 32));
const sentences = readFileSync(join(modelDir, 'bench_input.txt'), 'utf8').split('\n').filter(Boolean).slice(0, n);

const { app } = installPackage();
writeIndexPage(app);
const wasm = readFileSync(join(app, 'node_modules/st5/wasm/st5_wasm_bg.wasm'));
console.log(
  `wasm: ${(wasm.length / 1e6).toFixed(2)} MB raw, ${(gzipSync(wasm, { level: 9 }).length / 1e6).toFixed(2)} MB gzipped`,
);

const server = await serve({ '/': app, '/model/': modelDir });
const browser = await launch();

const firstEmbedding = (page, device) =>
  page.evaluate(
    async ({ device }) => {
      const t0 = performance.now();
      const m = await st5.load('/model/', { device });
      const tLoad = performance.now();
      await m.embed(['A man is playing a guitar.']);
      const out = { load: tLoad - t0, total: performance.now() - t0, device: m.device };
      await m.dispose();
      return out;
    },
    { device },
  );

for (const device of ['webgpu', 'cpu']) {
  // A fresh context has an empty Cache API and HTTP cache: the cold start.
  const context = await browser.newContext();
  const cold = await firstEmbedding((await open(context, `${server.url}/`)).page, device);
  const warm = await firstEmbedding((await open(context, `${server.url}/`)).page, device);
  console.log(
    `${device}: time to first embedding cold ${(cold.total / 1000).toFixed(2)} s (load ${(cold.load / 1000).toFixed(2)} s), ` +
      `warm ${(warm.total / 1000).toFixed(2)} s (load ${(warm.load / 1000).toFixed(2)} s) [ran on ${cold.device}]`,
  );
  const { page } = await open(context, `${server.url}/`);
  const r = await page.evaluate(
    async ({ device, sentences, batchSize }) => {
      const m = await st5.load('/model/', { device, batchSize });
      await m.embed(sentences.slice(0, 2)); // compile the kernels once
      const t0 = performance.now();
      await m.embed(sentences);
      const s = (performance.now() - t0) / 1000;
      const out = { s, device: m.device, dim: m.dim };
      await m.dispose();
      return out;
    },
    { device, sentences, batchSize },
  );
  console.log(
    `${device}: ${sentences.length} sentences in ${r.s.toFixed(2)} s = ${(sentences.length / r.s).toFixed(2)} sentences/s (batch ${batchSize}, dim ${r.dim}, ran on ${r.device})`,
  );
  await context.close();
}

await browser.close();
await server.close();
