// Benchmark: an index built natively by `st5 index build`, opened in headless Chromium with the
// model that built it, as docs/search-at-scale.md's "build once natively, search in the page"
// does. Reports the file's size, `importIndex` from its URL (download, checksum, restore; a
// quantized index's rescoring rows go to OPFS), the first query (embedding it and searching) and
// the next ones; and, in the same page, the model's embedding throughput on a sample of the
// corpus: what building the same index in the page would cost (extrapolated, and labelled so).
//
//   node tests/browser/bench-index-file.mjs --file corpus.st5index --model models/st5-mini
//       [--corpus corpus.txt] [--sample 512] [--queries 5] [--device cpu]

import { mkdtempSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import { chromium } from 'playwright-core';
import { DEMO_ROUTES } from '../../www/serve.mjs';
import { CHROMIUM_FLAGS, open, serve } from './harness.mjs';

const arg = (name, dflt) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : dflt;
};
const file = resolve(arg('--file', ''));
const model = resolve(arg('--model', ''));
const corpus = arg('--corpus', null);
const sample = Number(arg('--sample', 512));
const queries = Number(arg('--queries', 5));
const device = arg('--device', 'cpu');
if (!arg('--file') || !arg('--model')) {
  console.error('usage: bench-index-file.mjs --file F.st5index --model DIR [--corpus TXT] [--sample N]');
  process.exit(2);
}
// The page gets the sample and the query texts only, not the corpus.
const texts = corpus ? readFileSync(corpus, 'utf8').split('\n').filter(Boolean) : [];
const docs = [
  ...texts.slice(0, sample),
  ...Array.from({ length: queries }, (_, q) => texts[(q * 7919) % texts.length]),
];

const server = await serve({ ...DEMO_ROUTES, '/file/': dirname(file), '/model/': model });
// A persistent profile, as a visitor's browser has: an incognito context's storage quota is too
// small for a million rescoring rows in OPFS.
const context = await chromium.launchPersistentContext(mkdtempSync(join(tmpdir(), 'st5-bench-file-')), {
  executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
  headless: true,
  args: CHROMIUM_FLAGS,
});
// The demo page for its routes and import map; `sample=0`: it indexes nothing of its own.
const { page } = await open(context, `${server.url}/?sample=0`);
const browser = context.browser()?.version() ?? (await page.evaluate(() => navigator.userAgent));
const r = await page.evaluate(
  async ({ url, queries, sample, device, docs }) => {
    const st5 = await import('st5');
    const m = await st5.load('/model/', { device: 'cpu' });
    const stages = {};
    const t0 = performance.now();
    const index = await st5.importIndex(m, url, {
      device,
      onProgress: (e) => (stages[e.stage] = performance.now() - t0),
    });
    const open = performance.now() - t0;
    const ms = [];
    let first;
    for (let q = 0; q < queries; q++) {
      const t = performance.now();
      const { hits } = await index.search(docs[sample + q] ?? `query ${q}`, 10);
      ms.push(performance.now() - t);
      first ??= hits[0];
    }
    // The page's own embedding throughput, threads as `load` chose them.
    const batch = docs.slice(0, sample);
    let perSecond = null;
    if (batch.length) {
      await m.embed(batch.slice(0, 16));
      const t = performance.now();
      await m.embed(batch);
      perSecond = batch.length / ((performance.now() - t) / 1000);
    }
    const out = {
      size: index.size,
      quantize: index.quantize,
      rescore: index.rescore,
      device: index.device,
      threads: m.threads,
      stages,
      open,
      ms,
      first,
      perSecond,
      heap: performance.memory?.usedJSHeapSize ?? null,
    };
    index.dispose();
    await m.dispose();
    return out;
  },
  { url: `/file/${basename(file)}`, queries, sample, device, docs },
);
const bytes = statSync(file).size;
const s = (ms) => (ms / 1000).toFixed(2);
console.log(`${browser}; ${file}: ${(bytes / 2 ** 20).toFixed(1)} MiB, ${r.size} documents, codes ${r.quantize}`);
console.log(
  `importIndex from the URL (${r.device}, rescoring rows: ${r.rescore}): ${s(r.open)} s ` +
    `(downloaded ${s(r.stages.download ?? 0)} s, checked ${s(r.stages.check ?? 0)} s, ready ${s(r.stages.ready)} s)`,
);
console.log(
  `queries (embed + search, k = 10): first ${r.ms[0].toFixed(1)} ms, then ${r.ms
    .slice(1)
    .map((x) => x.toFixed(1))
    .join(', ')} ms; first hit ${JSON.stringify(r.first)}`,
);
if (r.perSecond) {
  const hours = r.size / r.perSecond / 3600;
  console.log(
    `embedding in this page: ${r.perSecond.toFixed(0)} sentences/s on ${r.threads} thread(s) (${sample} corpus lines); ` +
      `embedding all ${r.size} here would take ~${hours.toFixed(2)} h (extrapolated)`,
  );
}
await context.close();
await server.close();
