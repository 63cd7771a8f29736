// Benchmark of the package's search index in headless Chromium, at scale: for random unit vectors
// and (with --real) real sentence embeddings, at each size n, every quantization (f32, int8 and
// binary, the latter two rescoring from OPFS or from memory) on the wasm CPU and on WebGPU
// (SwiftShader here: a CPU emulator, so its times say nothing of a real GPU), beside the
// brute-force JavaScript f32 loop that in-browser vector libraries run, in the same page. Per row:
// bytes a vector in the searchable part and in the tab, build time, query latency (median and
// p95 over single queries, k = 10) and recall@10 against exact f32 search. Then the indexing
// throughput of the demo's default model (--throughput 0 skips it).
//
//   node tests/browser/bench-index.mjs [--sizes 100000,1000000] [--dim 384] [--queries 50]
//       [--gpu-queries 10] [--devices cpu,webgpu] [--modes none,int8,binary,int8:memory,binary:memory]
//       [--real vectors.npy] [--throughput 512]
//
// --real: an .npy of float32 rows from `st5 embed` whose last --queries rows are held-out
// queries and the rest documents, e.g. (docs/search-at-scale.md):
//   bash scripts/index-corpus.sh 1000050 /tmp/c.txt && st5 embed --input /tmp/c.txt --output /tmp/c.npy

import { closeSync, mkdtempSync, openSync, readSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { DEMO_ROUTES } from '../../www/serve.mjs';
import { CHROMIUM_FLAGS, open, serve } from './harness.mjs';

const arg = (name, dflt) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : dflt;
};
const list = (s) => s.split(',').filter(Boolean);
const sizes = list(arg('--sizes', '100000,1000000')).map(Number);
const randomDim = Number(arg('--dim', 384));
const queries = Number(arg('--queries', 50));
const gpuQueries = Number(arg('--gpu-queries', 10));
const devices = list(arg('--devices', 'cpu,webgpu'));
const modes = list(arg('--modes', 'none,int8,binary,int8:memory,binary:memory'));
const realPath = arg('--real', null);
const sentences = Number(arg('--throughput', 512));
const CHUNK = 50_000; // rows a fetch and an addVectors call

/** Splits an .npy of float32 rows into raw chunks of CHUNK rows under a served folder. */
function splitNpy(path) {
  const fd = openSync(path, 'r');
  const head = Buffer.alloc(10);
  readSync(fd, head, 0, 10, 0);
  if (head.toString('latin1', 0, 6) !== '\x93NUMPY') throw new Error(`${path}: not an .npy file`);
  const len = head.readUInt16LE(8);
  const header = Buffer.alloc(len);
  readSync(fd, header, 0, len, 10);
  const text = header.toString('latin1');
  const shape = /'shape': \((\d+), (\d+)\)/.exec(text);
  if (!/'descr': '<f4'/.test(text) || !/'fortran_order': False/.test(text) || !shape)
    throw new Error(`${path}: expected C-order float32 rows, got ${text.trim()}`);
  const [rows, dim] = [Number(shape[1]), Number(shape[2])];
  const dir = mkdtempSync(join(tmpdir(), 'st5-bench-index-'));
  const docs = rows - queries;
  const buf = Buffer.alloc(CHUNK * dim * 4);
  const copy = (from, count, file) => {
    const got = readSync(fd, buf, 0, count * dim * 4, 10 + len + from * dim * 4);
    writeFileSync(join(dir, file), buf.subarray(0, got));
  };
  for (let c = 0; c * CHUNK < docs; c++) copy(c * CHUNK, Math.min(CHUNK, docs - c * CHUNK), `docs-${c}.f32`);
  copy(docs, queries, 'queries.f32');
  closeSync(fd);
  return { dir, dim, docs };
}

const real = realPath && splitNpy(realPath);
const server = await serve({ ...DEMO_ROUTES, ...(real && { '/bench/': real.dir }) });
// A persistent profile, as a visitor's browser has: an incognito context's storage quota is a
// fraction of memory, too small for a million rows in OPFS; a profile's is a share of the disk.
const context = await chromium.launchPersistentContext(mkdtempSync(join(tmpdir(), 'st5-bench-profile-')), {
  executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
  headless: true,
  args: CHROMIUM_FLAGS,
});
// The demo page for its routes and import map; `sample=0`: it indexes nothing of its own.
const { page } = await open(context, `${server.url}/?sample=0`);
const { quota } = await page.evaluate(() => navigator.storage.estimate());
console.log(`storage quota of this origin: ${(quota / 2 ** 30).toFixed(1)} GiB\n`);

/** Puts `n` documents and the queries in `window.bench`, with the JS loop's exact top-10 and times. */
async function prepare(source, n, dim) {
  return page.evaluate(
    async ({ source, n, dim, queries, CHUNK }) => {
      const k = 10;
      const vectors = new Float32Array(n * dim);
      let held;
      if (source === 'real') {
        for (let c = 0; c * CHUNK < n; c++) {
          const rows = new Float32Array(await (await fetch(`/bench/docs-${c}.f32`)).arrayBuffer());
          vectors.set(rows.subarray(0, Math.min(rows.length, (n - c * CHUNK) * dim)), c * CHUNK * dim);
        }
        held = new Float32Array(await (await fetch('/bench/queries.f32')).arrayBuffer());
      } else {
        // Gaussian directions (as `st5 index bench --random`), from mulberry32: a 32-bit
        // generator in integer arithmetic (an LCG in doubles loses bits past 2^53 and repeats).
        let s = 42;
        const uniform = () => {
          s = (s + 0x6d2b79f5) | 0;
          let t = Math.imul(s ^ (s >>> 15), 1 | s);
          t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
          return (((t ^ (t >>> 14)) >>> 0) + 0.5) / 4294967296;
        };
        const rand = () => Math.sqrt(-2 * Math.log(uniform())) * Math.cos(2 * Math.PI * uniform());
        const unit = (out) => {
          for (let i = 0; i < out.length; i += dim) {
            let norm = 0;
            for (let j = 0; j < dim; j++) norm += (out[i + j] = rand()) ** 2;
            norm = Math.sqrt(norm);
            for (let j = 0; j < dim; j++) out[i + j] /= norm;
          }
          return out;
        };
        unit(vectors);
        held = unit(new Float32Array(queries * dim));
      }
      // The peer: a dot-product loop with a top-k insert, as in-browser vector libraries run it.
      const bruteForce = (query) => {
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
        return best.map(([i]) => i);
      };
      const truth = [];
      const ms = [];
      for (let q = 0; q < queries; q++) {
        const t0 = performance.now();
        truth.push(bruteForce(held.subarray(q * dim, (q + 1) * dim)));
        ms.push(performance.now() - t0);
      }
      const texts = Array.from({ length: n }, (_, i) => String(i));
      window.bench = { vectors, held, truth, texts, n, dim };
      ms.sort((a, b) => a - b);
      return { median: ms[ms.length >> 1], p95: ms[Math.min(ms.length - 1, Math.floor(ms.length * 0.95))] };
    },
    { source, n, dim, queries, CHUNK },
  );
}

/** One index: build it from window.bench, time `count` single queries, measure recall@10. */
async function run(device, mode, count) {
  const [quantize, rescore = 'opfs'] = mode.split(':');
  return page.evaluate(
    async ({ device, quantize, rescore, count, CHUNK }) => {
      const { createIndex } = await import('st5');
      const { vectors, held, truth, texts, n, dim } = window.bench;
      const k = 10;
      const model = { dim, fingerprint: 'bench', embedFlat: async () => new Float32Array(0) };
      const options = { device, quantize, ...(quantize !== 'none' && { rescore }) };
      const idx = await createIndex(model, options);
      try {
        const t0 = performance.now();
        for (let at = 0; at < n; at += CHUNK) {
          const end = Math.min(n, at + CHUNK);
          await idx.addVectors(texts.slice(at, end), vectors.subarray(at * dim, end * dim));
        }
        const build = performance.now() - t0;
        const one = (q) => idx.searchVectors(held.subarray(q * dim, (q + 1) * dim), k);
        await one(0); // warm-up: kernel compilation, allocation
        const ms = [];
        let found = 0;
        for (let q = 0; q < count; q++) {
          const t = performance.now();
          const [hits] = await one(q);
          ms.push(performance.now() - t);
          const want = new Set(truth[q]);
          found += hits.filter((h) => want.has(h.id)).length;
        }
        ms.sort((a, b) => a - b);
        const inTab = idx.rescore === 'memory' ? n * dim * 4 : 0;
        return {
          device: idx.device,
          searchable: idx.bytes / n,
          tab: (idx.bytes + inTab) / n,
          build,
          median: ms[ms.length >> 1],
          p95: ms[Math.min(ms.length - 1, Math.floor(ms.length * 0.95))],
          recall: found / (k * count),
        };
      } finally {
        idx.dispose();
      }
    },
    { device, quantize, rescore, count, CHUNK },
  );
}

const sources = [['random', randomDim, Infinity], ...(real ? [['real', real.dim, real.docs]] : [])];
console.log(
  '| vectors | n | dim | index | device | B/vector searchable | B/vector in tab | build s | median ms | p95 ms | ×JS loop | recall@10 |',
);
console.log('|---|---|---|---|---|---|---|---|---|---|---|---|');
for (const [source, dim, max] of sources) {
  for (const n of sizes) {
    if (n > max) {
      console.log(`| ${source} | ${n} | ${dim} | (the .npy holds ${max} documents) |`);
      continue;
    }
    const js = await prepare(source, n, dim);
    const row = (index, device, r) =>
      console.log(
        `| ${source} | ${n} | ${dim} | ${index} | ${device} | ${r.searchable.toFixed(0)} | ${r.tab.toFixed(0)} | ${r.build === null ? '—' : (r.build / 1000).toFixed(2)} | ${r.median.toFixed(2)} | ${r.p95.toFixed(2)} | ${(js.median / r.median).toFixed(2)} | ${r.recall.toFixed(4)} |`,
      );
    row('JS f32 loop', 'js', { ...js, searchable: dim * 4, tab: dim * 4, build: null, recall: 1 });
    for (const device of devices) {
      for (const mode of modes) {
        const count = device === 'cpu' ? queries : Math.min(queries, gpuQueries);
        try {
          const r = await run(device, mode, count);
          row(mode.replace(':', ', rescore '), r.device, r);
        } catch (e) {
          console.log(`| ${source} | ${n} | ${dim} | ${mode} | ${device} | failed: ${e.message.split('\n')[0]} |`);
        }
      }
    }
    await page.evaluate(() => delete window.bench);
  }
}

// Indexing throughput: the demo's default model embedding the sample corpus through the index.
const corpus = (await (await fetch(`${server.url}/corpus/coco-captions.txt`)).text())
  .trim()
  .split('\n')
  .slice(0, sentences);
for (const device of sentences ? devices : []) {
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

await context.close();
await server.close();
