// The peer side of the browser throughput benchmark: onnxruntime-web, the engine
// under transformers.js, embedding pre-tokenised sentences in a Playwright page with the ONNX graph
// that tests/reference/export_onnx.py writes (input_ids + attention_mask → sentence_embedding, the
// whole sentence-transformers pipeline after tokenisation). Batches are cut in order and padded to
// their longest row (pad id 0, mask 0), as st5 does, so the two sides do the same work.
//
//   import { ortEmbed, ortDistDir } from './peer-ort.mjs';
//   const server = await serve({ '/': scratchDir, '/ort/': ortDistDir, '/peer/': '/tmp/st5-peer' });
//   const { page } = await open(context, `${server.url}/`);  // crossOriginIsolated: serve() sends COOP/COEP
//   const r = await ortEmbed(page, `${server.url}/ort/`, `${server.url}/peer/base/model.onnx`, ids, { threads: 2 });
//
// onnxruntime-web fixes its thread count when its runtime starts, once per page: use a fresh page
// for each thread count (and for WebGPU, which loads a different build).

import { dirname } from 'node:path';
import { createRequire } from 'node:module';

/** The folder of onnxruntime-web's browser builds (ort.*.mjs and the .wasm files) to serve. */
export const ortDistDir = dirname(
  createRequire(import.meta.url).resolve('onnxruntime-web/ort-wasm-simd-threaded.wasm'),
);

/**
 * Embeds `ids` (token id rows, already truncated; no padding) with onnxruntime-web inside `page`.
 * `ortUrl`: the served dist folder (trailing slash added if missing); `modelUrl`: the served model.onnx.
 * Options: `threads` (env.wasm.numThreads), `batchSize`, `ep` ('wasm', the CPU path, or 'webgpu'),
 * `warmupRows` (rows in the untimed warm-up batch).
 *
 * Returns { seconds, sentencesPerSec, embeddings (flat array, row-major), dim, n, threads (what
 * onnxruntime-web actually ran with: it falls back to 1 without cross-origin isolation),
 * crossOriginIsolated, sessionCreateSeconds, warmupSeconds, ep, ortVersion }. The timed part is
 * building the input tensors, session.run and reading the outputs back, batch by batch.
 */
export async function ortEmbed(
  page,
  ortUrl,
  modelUrl,
  ids,
  { threads = 1, batchSize = 32, ep = 'wasm', warmupRows = 2 } = {},
) {
  if (!ortUrl.endsWith('/')) ortUrl += '/';
  const r = await page.evaluate(
    async ({ ortUrl, modelUrl, ids, threads, batchSize, ep, warmupRows }) => {
      // The plain build for the CPU (the fastest wasm binary); the WebGPU build otherwise.
      const bundle = ep === 'webgpu' ? 'ort.webgpu.min.mjs' : 'ort.wasm.min.mjs';
      const ort = await import(ortUrl + bundle);
      const key = `__ortThreads_${bundle}`;
      if (window[key] !== undefined && window[key] !== threads) {
        throw new Error(`onnxruntime-web already started in this page with ${window[key]} threads; use a fresh page`);
      }
      window[key] = threads;
      ort.env.wasm.wasmPaths = ortUrl;
      ort.env.wasm.numThreads = threads;
      ort.env.wasm.simd = true;
      ort.env.wasm.proxy = false;

      const t0 = performance.now();
      const session = await ort.InferenceSession.create(modelUrl, {
        executionProviders: [ep],
        graphOptimizationLevel: 'all',
      });
      const sessionCreateSeconds = (performance.now() - t0) / 1000;

      // One batch: pad to the longest row, run, and return the [rows, dim] output as a Float32Array.
      const run = async (rows) => {
        const seq = Math.max(...rows.map((r) => r.length));
        const inputIds = new BigInt64Array(rows.length * seq);
        const mask = new BigInt64Array(rows.length * seq);
        rows.forEach((row, i) =>
          row.forEach((id, j) => {
            inputIds[i * seq + j] = BigInt(id);
            mask[i * seq + j] = 1n;
          }),
        );
        const out = await session.run({
          input_ids: new ort.Tensor('int64', inputIds, [rows.length, seq]),
          attention_mask: new ort.Tensor('int64', mask, [rows.length, seq]),
        });
        const t = out.sentence_embedding;
        const data = t.getData ? await t.getData() : t.data;
        return { data: Float32Array.from(data), dim: t.dims[1] };
      };

      const tw = performance.now();
      await run(ids.slice(0, Math.max(1, Math.min(warmupRows, ids.length))));
      const warmupSeconds = (performance.now() - tw) / 1000;

      const chunks = [];
      let dim = 0;
      const t1 = performance.now();
      for (let i = 0; i < ids.length; i += batchSize) {
        const b = await run(ids.slice(i, i + batchSize));
        chunks.push(b.data);
        dim = b.dim;
      }
      const seconds = (performance.now() - t1) / 1000;
      await session.release();

      const flat = new Float32Array(ids.length * dim);
      let o = 0;
      for (const c of chunks) {
        flat.set(c, o);
        o += c.length;
      }
      return {
        seconds,
        embeddings: Array.from(flat),
        dim,
        n: ids.length,
        threads: ort.env.wasm.numThreads,
        crossOriginIsolated: self.crossOriginIsolated,
        sessionCreateSeconds,
        warmupSeconds,
        ep,
        ortVersion: ort.env.versions?.web,
      };
    },
    { ortUrl, modelUrl, ids, threads, batchSize, ep, warmupRows },
  );
  return { ...r, sentencesPerSec: r.n / r.seconds };
}

/** Rows of a flat row-major embedding array. */
export function rows(flat, dim) {
  const out = [];
  for (let i = 0; i < flat.length; i += dim) out.push(flat.slice(i, i + dim));
  return out;
}
