// The demo page (www/) in headless Chromium through playwright-core, used as a person would: the
// first visit indexes the sample captions; they search as they type in each mode; they drop
// their own files (.md, .html, .txt, and one the page skips) and pick more, which become
// documents with passages, filtered by kind with facet counts and shown with the query's words
// marked; a reload restores everything from OPFS without embedding; a file is replaced, removed,
// exported (the file opens in `st5 index query`), and everything forgotten. Screenshots are
// saved. Also the package's IndexedDB index rebuilt after corruption, and its GPU index against
// its CPU index on tie-heavy random vectors.
//
//   node tests/browser/demo.test.mjs     (after `bash pkg/build.sh` and the release `st5` binary)

import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DEMO_ROUTES } from '../../www/serve.mjs';
import { ROOT, launch, open, runCases, serve, softwareAdapter } from './harness.mjs';

const SAMPLE = readFileSync(join(ROOT, 'www/corpus/coco-captions.txt'), 'utf8').trim().split('\n');
const ST5 = join(process.env.CARGO_TARGET_DIR ?? join(ROOT, 'target'), 'release/st5');
const SHOTS = mkdtempSync(join(tmpdir(), 'st5-demo-'));

// A person's files: Markdown with headings and paragraphs (long enough for several passages),
// HTML with a script that must not be indexed, plain text with non-ASCII, and an image.
const lighthouse = [
  '# Keeping the Skerryvore light',
  '',
  'The keepers climbed **ninety-six** steps each evening to trim the wicks of the great lamp.',
  '',
  '## Supplies',
  '',
  ...Array.from(
    { length: 12 },
    (_, i) =>
      `Week ${i + 1}: the relief boat brought paraffin, flour and letters from the mainland, when the swell allowed a landing on the rock. \n`,
  ),
  '## Storms',
  '',
  'In the winter gales spray rose over the lantern gallery, and the tower shook like a tree.',
].join('\n');
const FILES = {
  'lighthouse.md': { mimeType: 'text/markdown', text: lighthouse },
  'bread.html': {
    mimeType: 'text/html',
    text: `<!doctype html><html><head><title>Sourdough at home</title><style>p{color:red}</style></head>
<body><script>var quokkaSecret = 1;</script><h1>Sourdough</h1><p>Feed the starter with rye flour and water the night before baking.</p>
<ul><li>Fold the dough every half hour.</li><li>Bake in a covered pot at 250 °C.</li></ul></body></html>`,
  },
  'café.txt': {
    mimeType: 'text/plain',
    text: 'Notes from the café in Kraków: the espresso was bitter, the pierogi were superb 😀.',
  },
  'photo.png': { mimeType: 'image/png', text: '\x89PNG not really' },
};
const file = (name, text = FILES[name].text) => ({ name, mimeType: FILES[name].mimeType, buffer: Buffer.from(text) });

const server = await serve(DEMO_ROUTES);
const browser = await launch();
const context = await browser.newContext({ viewport: { width: 1100, height: 1400 }, acceptDownloads: true });
// Nothing may leave for another host: every request the pages make is recorded.
const external = [];
context.on('request', (r) => /^(blob|data):/.test(r.url()) || r.url().startsWith(server.url) || external.push(r.url()));
let { page } = await open(context, `${server.url}/`);
/** What the page has embedded since it opened, queries left out (the current query, and the
 * empty one the file list is read back with), and the documents it restored. */
const demo = () =>
  page.evaluate(() => {
    const query = document.querySelector('[data-testid=query-input]').value.trim();
    const docs = st5demo.embedded.filter((t) => t !== '' && t !== query && !st5demo.queries?.has(t));
    return { embedded: docs.length, restored: st5demo.restored };
  });
const status = () => page.getByTestId('index-status').textContent();

/** Waits until the indexing status matches `re` (and is not a progress line). */
async function settled(re) {
  await page.waitForFunction(
    (src) => {
      const t = document.querySelector('[data-testid=index-status]').textContent;
      return new RegExp(src).test(t) && !t.endsWith('…');
    },
    re.source,
    { timeout: 600_000 },
  );
  return status();
}

async function reload() {
  await page.close();
  ({ page } = await open(context, `${server.url}/`));
}

/** Types `query` (in `mode`) and returns the hits once they show: ids, scores, passages, marks. */
async function search(query, mode = 'hybrid') {
  await page.evaluate((q) => (st5demo.queries ??= new Set()).add(q.trim()), query);
  await page.getByTestId('mode-select').selectOption(mode);
  await page.getByTestId('query-input').fill(query);
  await page.waitForFunction(
    ({ q, mode }) => {
      const r = document.querySelector('[data-testid=results]');
      return r.dataset.query === q.trim() && r.dataset.mode === mode;
    },
    { q: query, mode },
    { timeout: 120_000 },
  );
  return page.$$eval('[data-testid=results] [data-testid=result]', (lis) =>
    lis.map((li) => ({
      id: li.dataset.id,
      score: Number(li.dataset.score),
      passages: [...li.querySelectorAll('.passage')].map((p) => p.textContent),
      marks: [...li.querySelectorAll('mark')].map((m) => m.textContent),
    })),
  );
}

const kindCount = async (kind) => Number(await page.getByTestId(`count-${kind}`).textContent());
const files = () => page.$$eval('[data-testid=file]', (lis) => lis.map((li) => li.dataset.id));

/** Drops `names` on the page as a person drags files from their desktop. */
async function drop(names) {
  const dt = await page.evaluateHandle(
    (items) => {
      const dt = new DataTransfer();
      for (const { name, type, text } of items) dt.items.add(new File([text], name, { type }));
      return dt;
    },
    names.map((name) => ({ name, type: FILES[name].mimeType, text: FILES[name].text })),
  );
  await page.dispatchEvent('[data-testid=drop-zone]', 'drop', { dataTransfer: dt });
}

let beforeReload = null;
const failed = await runCases([
  [
    'first_visit_indexes_the_sample_with_the_default_model',
    async () => {
      for (const id of [
        'model-url',
        'drop-zone',
        'doc-files',
        'index-progress',
        'query-input',
        'mode-select',
        'results',
      ])
        if ((await page.getByTestId(id).count()) !== 1) throw new Error(`no data-testid=${id}`);
      const backend = await page.getByTestId('backend').textContent();
      // 'auto' takes WebGPU on a hardware adapter only; here the adapter is SwiftShader's.
      const software = await softwareAdapter(page);
      const notice = await page.getByTestId('webgpu-notice').isVisible();
      if (!backend.includes(software ? 'CPU' : 'WebGPU') || notice !== software)
        throw new Error(`${backend}, software adapter ${software}, notice shown ${notice}`);
      const note = await settled(/^Indexed 3000 sample documents/);
      const { embedded } = await demo();
      if (embedded !== SAMPLE.length) throw new Error(`embedded ${embedded} texts`);
      if ((await kindCount('caption')) !== SAMPLE.length) throw new Error('caption count');
      return `${backend}; ${note}`;
    },
  ],
  [
    'search_as_you_type_in_each_mode',
    async () => {
      // By meaning: other words, the same scene.
      const query = 'someone riding the waves in the ocean';
      const meant = await search(query, 'vector');
      if (!meant.slice(0, 3).every((h) => /surf/i.test(h.passages[0]))) throw new Error(JSON.stringify(meant));
      // By words: every hit holds the word, marked.
      const words = await search('giraffe', 'keyword');
      if (!words.length || !words.every((h) => h.marks.some((m) => /^giraffes?$/i.test(m))))
        throw new Error(JSON.stringify(words));
      // As you type: the last word's prefix.
      const typed = await search('giraf', 'keyword');
      if (typed[0]?.id !== words[0].id) throw new Error(`prefix: ${JSON.stringify(typed)}`);
      const both = await search(query, 'hybrid');
      if (!both.slice(0, 3).every((h) => /surf|wave/i.test(h.passages[0]))) throw new Error(JSON.stringify(both));
      await page.screenshot({ path: join(SHOTS, 'search.png'), fullPage: true });
      return `"${query}" by meaning → "${meant[0].passages[0]}"; "giraffe" by words: ${words.length} hits, each marked; "giraf" as typed → the same first hit; screenshot ${SHOTS}/search.png`;
    },
  ],
  [
    'dropped_and_picked_files_become_documents_with_passages',
    async () => {
      const before = (await demo()).embedded;
      await drop(['lighthouse.md', 'bread.html', 'photo.png']);
      const note = await settled(/^Added 2 files .*skipped 1/);
      await page.getByTestId('doc-files').setInputFiles([file('café.txt')]);
      const picked = await settled(/^Added 1 file /);
      const held = await files();
      if (held.join() !== 'file:bread.html,file:café.txt,file:lighthouse.md') throw new Error(`files: ${held}`);
      const passages = [note, picked].map((n) => Number(/\((\d+) passages\)/.exec(n)[1]));
      const embedded = (await demo()).embedded - before;
      // The Markdown's long body is cut into several passages; only the files' passages were
      // embedded, not the sample again.
      if (!(passages[0] >= 4) || embedded !== passages[0] + passages[1])
        throw new Error(`${passages} passages, ${embedded} texts embedded`);
      // A word only in the Markdown's later paragraphs: its passage is shown, the word marked, and
      // the passage is the file's text at its offsets.
      const hits = await search('paraffin', 'keyword');
      const doc = await page.evaluate(() => st5demo.collection.get('file:lighthouse.md'));
      if (hits[0]?.id !== 'file:lighthouse.md' || !hits[0].marks.includes('paraffin'))
        throw new Error(JSON.stringify(hits));
      // Split by paragraphs: the passage shown is the one paragraph that holds the word.
      if (!/^Week \d+: the relief boat brought paraffin[^\n]*rock\.$/.test(hits[0].passages[0]))
        throw new Error(`not a paragraph: ${JSON.stringify(hits[0].passages[0])}`);
      if (!hits[0].passages.every((p) => doc.body.includes(p)) || doc.body.includes('**'))
        throw new Error(`passages not in the body: ${JSON.stringify(hits[0].passages)}`);
      // HTML: its text is searched, its script is not; the title is the page's.
      const html = await page.evaluate(() => st5demo.collection.get('file:bread.html'));
      if (html.title !== 'Sourdough at home' || html.body.includes('quokka') || !html.body.includes('covered pot'))
        throw new Error(JSON.stringify(html));
      if ((await search('quokkaSecret', 'keyword')).length) throw new Error('the script was indexed');
      // By meaning, across wording and kinds.
      const bread = await search('how do I bake a loaf with a starter', 'vector');
      if (bread[0]?.id !== 'file:bread.html') throw new Error(JSON.stringify(bread.slice(0, 2)));
      const cafe = await search('kraków', 'keyword');
      if (cafe[0]?.id !== 'file:café.txt' || !cafe[0].marks.includes('Kraków')) throw new Error(JSON.stringify(cafe));
      return `${note}; "paraffin" → lighthouse.md, marked in its passage; the HTML's script left out; "how do I bake a loaf with a starter" by meaning → bread.html; "kraków" → café.txt ("Kraków" marked)`;
    },
  ],
  [
    'kinds_filter_the_results_with_facet_counts',
    async () => {
      const all = await search('a man riding a wave', 'vector');
      if (!all.some((h) => h.id.startsWith('coco:'))) throw new Error(JSON.stringify(all));
      const counts = { md: await kindCount('md'), html: await kindCount('html'), txt: await kindCount('txt') };
      if (counts.md !== 1 || counts.html !== 1 || counts.txt !== 1) throw new Error(JSON.stringify(counts));
      await page.getByTestId('kind-caption').uncheck();
      const mine = await page.waitForFunction(
        () => [...document.querySelectorAll('[data-testid=result]')].every((li) => li.dataset.id.startsWith('file:')),
        null,
        { timeout: 60_000 },
      );
      await mine.dispose();
      const only = await page.$$eval('[data-testid=result]', (lis) => lis.map((li) => li.dataset.id));
      if (only.length !== 3 || (await kindCount('caption')) !== 0) throw new Error(`filtered: ${only}`);
      await page.screenshot({ path: join(SHOTS, 'filtered.png'), fullPage: true });
      await page.getByTestId('kind-caption').check();
      return `captions unchecked: only the 3 files (${only.join(', ')}), caption count 0; screenshot ${SHOTS}/filtered.png`;
    },
  ],
  [
    'reload_restores_everything_without_embedding',
    async () => {
      beforeReload = await search('lighthouse keepers in a storm', 'hybrid');
      await reload();
      const note = await settled(/^Restored 3003 documents/);
      const d = await demo();
      if (d.embedded !== 0) throw new Error(JSON.stringify(d));
      const again = await search('lighthouse keepers in a storm', 'hybrid');
      if (JSON.stringify(again) !== JSON.stringify(beforeReload))
        throw new Error(`${JSON.stringify(again)} vs ${JSON.stringify(beforeReload)}`);
      if ((await files()).length !== 3) throw new Error('files list');
      return `${note}; the same hits and scores as before the reload`;
    },
  ],
  [
    'a_file_dropped_again_is_replaced_and_a_removed_one_stays_removed',
    async () => {
      await page
        .getByTestId('doc-files')
        .setInputFiles([file('café.txt', 'Notes from the café in Gdańsk: the herring was superb.')]);
      await settled(/^Added 1 file /);
      if ((await search('pierogi', 'keyword')).some((h) => h.id === 'file:café.txt')) throw new Error('old text kept');
      if ((await search('herring', 'keyword'))[0]?.id !== 'file:café.txt') throw new Error('new text missing');
      await page.getByRole('button', { name: 'Remove bread.html' }).click();
      await settled(/^Removed bread.html/);
      await reload();
      await settled(/^Restored 3002 documents/);
      const held = await files();
      if (held.join() !== 'file:café.txt,file:lighthouse.md') throw new Error(`files: ${held}`);
      if ((await search('sourdough starter', 'keyword')).length) throw new Error('removed file found');
      return `café.txt replaced (its new words found, its old ones gone); bread.html removed, still gone after a reload`;
    },
  ],
  [
    'the_exported_index_opens_in_the_cli',
    async () => {
      const download = page.waitForEvent('download');
      await page.getByTestId('export-button').click();
      const path = join(SHOTS, 'demo.st5index');
      await (await download).saveAs(path);
      const out = JSON.parse(
        execFileSync(ST5, ['index', 'query', path, '--mode', 'keyword', '--json', '-k', '3', 'paraffin'], {
          encoding: 'utf8',
        }),
      );
      const first = (out.results ?? out)[0]?.hits?.[0] ?? out.hits?.[0];
      if (first?.id !== 'file:lighthouse.md') throw new Error(JSON.stringify(out).slice(0, 500));
      return `st5 index query ${path} --mode keyword paraffin → ${first.id}`;
    },
  ],
  [
    'forget_everything_starts_again_from_the_sample',
    async () => {
      await page.getByTestId('reset-button').click();
      await settled(/^Indexed 3000 sample documents/);
      if ((await files()).length || (await search('paraffin', 'keyword')).length) throw new Error('files kept');
      return await status();
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
    'a_corrupt_saved_search_index_is_detected_and_rebuilt',
    async () => {
      const r = await page.evaluate(
        async (texts) => {
          const { openIndex } = await import('st5');
          const model = st5demo.model;
          const first = await openIndex(model, texts, { name: 'corrupt-test' });
          first.index.dispose();
          await new Promise((ok, fail) => {
            const req = indexedDB.open('st5-index', 1);
            req.onsuccess = () => {
              const tx = req.result.transaction('indexes', 'readwrite');
              const store = tx.objectStore('indexes');
              store.get('corrupt-test').onsuccess = (e) => {
                const rec = e.target.result;
                new Float32Array(rec.vectors)[5] += 0.5; // one flipped value
                store.put(rec, 'corrupt-test');
              };
              tx.oncomplete = () => (req.result.close(), ok());
              tx.onerror = () => fail(tx.error);
            };
          });
          const again = await openIndex(model, texts, { name: 'corrupt-test' });
          const out = { restored: again.restored, reason: again.reason, size: again.index.size };
          again.index.dispose();
          return out;
        },
        SAMPLE.slice(0, 40),
      );
      if (r.restored !== 0 || !r.reason || r.size !== 40) throw new Error(JSON.stringify(r));
      return `restored 0, rebuilt (${r.reason})`;
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
