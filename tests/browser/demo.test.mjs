// The demo page (www/) in headless Chromium through playwright-core: index the sample corpus,
// search as you type, screenshot, reload and restore the index from IndexedDB without
// embedding, add documents (only they are embedded), rebuild a corrupt saved index, export and
// import, index int8 and binary (the quantize selector) and restore them; and the package's GPU
// index against its CPU index on tie-heavy random vectors.
//
//   node tests/browser/demo.test.mjs     (after `bash pkg/build.sh`)

import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DEMO_ROUTES } from '../../www/serve.mjs';
import { ROOT, launch, open, runCases, serve, softwareAdapter } from './harness.mjs';

const SAMPLE = readFileSync(join(ROOT, 'www/corpus/coco-captions.txt'), 'utf8').trim().split('\n');
const server = await serve(DEMO_ROUTES);
const browser = await launch();
const context = await browser.newContext({ viewport: { width: 1100, height: 1400 } });
// Nothing may leave for another host: every request the pages make is recorded.
const external = [];
context.on('request', (r) => /^(blob|data):/.test(r.url()) || r.url().startsWith(server.url) || external.push(r.url()));
let { page } = await open(context, `${server.url}/`);
const demo = () => page.evaluate(() => ({ embedded: st5demo.embeddedTexts, restored: st5demo.restored }));
const status = () => page.getByTestId('index-status').textContent();

async function index(expect) {
  await page.getByTestId('index-button').click();
  await page.waitForFunction(
    (re) => new RegExp(re).test(document.querySelector('[data-testid=index-status]').textContent),
    expect.source,
    { timeout: 600_000 },
  );
}

async function reload() {
  await page.close();
  ({ page } = await open(context, `${server.url}/`));
}

/** Types `query` and returns the result items' texts and scores once they show. */
async function search(query) {
  await page.getByTestId('query-input').fill(query);
  await page.waitForFunction((q) => document.querySelector('[data-testid=results]').dataset.query === q.trim(), query, {
    timeout: 120_000,
  });
  return page.$$eval('[data-testid=results] [data-testid=result]', (lis) =>
    lis.map((li) => ({ text: li.lastChild.textContent, score: Number(li.dataset.score) })),
  );
}

const failed = await runCases([
  [
    'page_has_its_controls_and_the_default_model',
    async () => {
      for (const id of ['model-url', 'corpus-input', 'index-button', 'index-progress', 'query-input', 'results']) {
        if ((await page.getByTestId(id).count()) !== 1) throw new Error(`no data-testid=${id}`);
      }
      const lines = (await page.getByTestId('corpus-input').inputValue()).split('\n').length;
      const backend = await page.getByTestId('backend').textContent();
      // 'auto' takes WebGPU on a hardware adapter only; here the adapter is SwiftShader's.
      const software = await softwareAdapter(page);
      const notice = await page.getByTestId('webgpu-notice').isVisible();
      if (lines !== SAMPLE.length || !backend.includes(software ? 'CPU' : 'WebGPU') || notice !== software) {
        throw new Error(`${lines} sample lines, ${backend}, software adapter ${software}, notice shown ${notice}`);
      }
      return `${backend}; software adapter: ${software}; sample corpus of ${lines} lines preloaded`;
    },
  ],
  [
    'index_the_sample_and_search_as_you_type',
    async () => {
      await page.evaluate(() => indexedDB.deleteDatabase('st5-index'));
      await index(/^Indexed \d+/);
      const { embedded } = await demo();
      if (embedded !== SAMPLE.length) throw new Error(`embedded ${embedded} texts`);
      const note = await status();
      // A document's own text comes back first, with cosine 1.
      const target = SAMPLE[1234];
      const hits = await search(target);
      const rank = hits.findIndex((h) => h.text === target);
      if (rank < 0 || rank > 2 || !(Math.abs(hits[0].score - 1) < 1e-4))
        throw new Error(`"${target}" at rank ${rank}: ${JSON.stringify(hits)}`);
      // The default model (st5-small) searches by meaning: a query in other words finds captions
      // of the same scene.
      const query = 'someone riding the waves in the ocean';
      const meant = await search(query);
      if (!meant.slice(0, 3).every((h) => /surf/i.test(h.text)))
        throw new Error(`"${query}": ${JSON.stringify(meant.slice(0, 3))}`);
      const shot = join(mkdtempSync(join(tmpdir(), 'st5-demo-')), 'demo.png');
      await page.screenshot({ path: shot, fullPage: true });
      console.log(`screenshot: ${shot}`);
      return `${note}; "${target}" ranked ${rank + 1} (score ${hits[0].score}); "${query}" → ${meant
        .slice(0, 3)
        .map((h) => `"${h.text}" ${h.score.toFixed(3)}`)
        .join(', ')}; ${await page.getByTestId('query-time').textContent()}`;
    },
  ],
  [
    'reload_restores_the_index_without_embedding',
    async () => {
      await reload();
      await index(/^Restored \d+/);
      const d = await demo();
      if (d.embedded !== 0 || d.restored !== SAMPLE.length) throw new Error(JSON.stringify(d));
      const hits = await search(SAMPLE[7]);
      if (hits[0].text !== SAMPLE[7]) throw new Error(JSON.stringify(hits));
      return `${await status()} (${d.embedded} texts embedded)`;
    },
  ],
  [
    'added_documents_are_the_only_ones_embedded',
    async () => {
      await reload();
      const extra = ['A lighthouse on a rocky coast at dusk.', 'Two kittens asleep in a laundry basket.'];
      // Set the 3,002 lines directly: Playwright's fill() types them through the input pipeline,
      // which took 23 s here and sometimes ran past its 30 s timeout.
      await page
        .getByTestId('corpus-input')
        .evaluate(
          (el, v) => ((el.value = v), el.dispatchEvent(new Event('input', { bubbles: true }))),
          [...SAMPLE, ...extra].join('\n'),
        );
      await index(/^Restored \d+ vectors .*embedded 2 new/);
      const d = await demo();
      if (d.embedded !== 2 || d.restored !== SAMPLE.length) throw new Error(JSON.stringify(d));
      const hits = await search(extra[1]);
      if (hits[0].text !== extra[1]) throw new Error(JSON.stringify(hits));
      return await status();
    },
  ],
  [
    'corrupt_saved_index_is_detected_and_rebuilt',
    async () => {
      await page.evaluate(
        () =>
          new Promise((ok, fail) => {
            const req = indexedDB.open('st5-index', 1);
            req.onsuccess = () => {
              const tx = req.result.transaction('indexes', 'readwrite');
              const store = tx.objectStore('indexes');
              store.get('demo').onsuccess = (e) => {
                const rec = e.target.result;
                new Float32Array(rec.vectors)[5] += 0.5; // one flipped value
                store.put(rec, 'demo');
              };
              tx.oncomplete = () => (req.result.close(), ok());
              tx.onerror = () => fail(tx.error);
            };
          }),
      );
      await reload();
      const small = SAMPLE.slice(0, 40);
      await page.getByTestId('corpus-input').fill(small.join('\n'));
      await index(/rebuilt/);
      const d = await demo();
      if (d.embedded !== small.length) throw new Error(JSON.stringify(d));
      return await status();
    },
  ],
  [
    'export_and_import_round_trip',
    async () => {
      const r = await page.evaluate(async () => {
        const { importIndex } = await import('st5');
        const blob = await st5demo.index.export();
        const back = await importIndex(st5demo.model, blob);
        const q = await st5demo.model.embedFlat([st5demo.index.texts[3]]);
        const [a] = await st5demo.index.searchVectors(q, 5);
        const [b] = await back.searchVectors(q, 5);
        let rejected = '';
        try {
          await importIndex(st5demo.model, new Blob([blob.slice(0, 100)]));
        } catch (e) {
          rejected = e.message;
        }
        return { same: JSON.stringify(a) === JSON.stringify(b), size: blob.size, n: back.size, rejected };
      });
      if (!r.same || !r.rejected) throw new Error(JSON.stringify(r));
      return `${r.n} vectors in ${r.size} bytes; a truncated file: "${r.rejected}"`;
    },
  ],
  [
    'quantize_selector_rescores_and_restores_the_quantized_index',
    async () => {
      const small = SAMPLE.slice(0, 40);
      const notes = [];
      for (const mode of ['int8', 'binary']) {
        await page.getByTestId('quantize-select').selectOption(mode);
        // The saved index holds the other form: rebuilt, every text embedded again. (An empty
        // query, so that the page's re-run of it embeds nothing.)
        await page.getByTestId('query-input').fill('');
        const before = (await demo()).embedded;
        await index(new RegExp(`^Indexed 40 documents .*rebuilt.*\\(${mode}, \\d+ B a vector, rescored from`));
        if ((await demo()).embedded - before !== small.length)
          throw new Error(`${mode}: ${JSON.stringify(await demo())}`);
        // Rescoring is exact: a document's own text comes back first with cosine 1.
        const hits = await search(small[9]);
        if (hits[0].text !== small[9] || !(Math.abs(hits[0].score - 1) < 1e-4)) throw new Error(JSON.stringify(hits));
        notes.push(await status());
      }
      // A new page restores the binary index (codes and rescoring vectors) without embedding.
      await reload();
      await page.getByTestId('corpus-input').fill(small.join('\n'));
      await page.getByTestId('quantize-select').selectOption('binary');
      await index(/^Restored 40 vectors/);
      const d = await demo();
      if (d.embedded !== 0 || d.restored !== small.length) throw new Error(JSON.stringify(d));
      const hits = await search(small[21]);
      if (hits[0].text !== small[21]) throw new Error(JSON.stringify(hits));
      notes.push(await status());
      return notes.join(' | ');
    },
  ],
  [
    'no_request_leaves_localhost',
    async () => {
      if (external.length) throw new Error(external.join(', '));
      return 'every request went to the local server';
    },
  ],
  [
    'gpu_index_equals_cpu_index_with_ties_and_large_k',
    async () => {
      const r = await page.evaluate(async () => {
        const { createIndex } = await import('st5');
        const dim = 32;
        const n = 3000;
        let s = 12345;
        const quarter = () => ((s = (s * 1103515245 + 12345) % 2147483648), (s % 5) / 4 - 0.5);
        const vectors = Float32Array.from({ length: n * dim }, quarter);
        vectors.copyWithin(100 * dim, 0, 20 * dim); // exact duplicates: ties
        const queries = Float32Array.from({ length: 4 * dim }, quarter);
        const model = { dim, fingerprint: 'test', embedFlat: async () => new Float32Array(0) };
        const out = {};
        for (const device of ['webgpu', 'cpu']) {
          const idx = await createIndex(model, { device, shardRows: 1100 });
          idx.addVectors(
            Array.from({ length: n }, (_, i) => String(i)),
            vectors,
          );
          out[device] = { device: idx.device, shards: idx.shards, ks: [] };
          for (const k of [1, 10, n + 7]) out[device].ks.push(await idx.searchVectors(queries, k));
          idx.dispose();
        }
        return out;
      });
      if (r.webgpu.device !== 'webgpu' || r.webgpu.shards !== 3)
        throw new Error(`${r.webgpu.device}, ${r.webgpu.shards} shards`);
      let worst = 0;
      r.webgpu.ks.forEach((perQuery, ki) =>
        perQuery.forEach((hits, qi) => {
          const cpu = r.cpu.ks[ki][qi];
          if (hits.length !== cpu.length || hits.some((h, j) => h.id !== cpu[j].id))
            throw new Error(`ids differ (k #${ki}, query ${qi})`);
          hits.forEach((h, j) => (worst = Math.max(worst, Math.abs(h.score - cpu[j].score))));
        }),
      );
      if (!(worst <= 1e-5)) throw new Error(`scores differ by ${worst}`);
      return `3 shards, k = 1, 10, n+7: identical ids, max score difference ${worst}`;
    },
  ],
]);

await browser.close();
await server.close();
process.exit(failed ? 1 : 0);
