// The Node.js test: `npm pack` the package, install the tarball into a scratch app, and use it
// from Node as a user's script does (`import ... from 'st5'`, resolved through the package's
// `exports` from the app's node_modules), on the CPU path with the same wasm as the browser: the
// reference fixture loaded by path, by file: URL, over http and by hub id from a fake hub on
// localhost, compared with the Python reference (tests/reference/make_fixtures.py) within the
// browser CPU path's 1e-5; the CPU pool on worker_threads against one thread; loadInWorker; a
// search index in memory (Node has no IndexedDB or OPFS); a script that never disposes its
// model still exits; and which batches the pool's page runs while its workers load.
//
//   node tests/browser/node.test.mjs     (after `bash pkg/build.sh`; scripts/test.sh runs all)

import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { FIXTURES, ROOT, expected, installPackage, maxAbsDiff, runCases, serve } from './harness.mjs';
import { DEFAULT_MODEL } from '../../www/serve.mjs';

// The CPU path, as in npm.test.mjs.
const CPU_TOL = 1e-5;
const ST = 'st-enc-mean-relu';
const DIR = join(FIXTURES, ST);
const st = expected(ST);
const want = st.embeddings['enc-mean'];

const { app } = installPackage();
// A module of the app that re-exports the package by its name, as any file of the app would
// import it; importing it here resolves 'st5' from the app, through the package's `exports`.
writeFileSync(join(app, 'st5.mjs'), "export * from 'st5';\n");
const st5 = await import(pathToFileURL(join(app, 'st5.mjs')).href);
// Which wasm module this Node runs (relaxed SIMD where its V8 validates it, else SIMD128): the
// installed package's own runtime.js, the module instance `st5` uses.
const { wasmFlavor } = await import(pathToFileURL(join(app, 'node_modules/st5/runtime.js')).href);

// A fake Hugging Face hub: `{hub}/{id}/resolve/{revision}/{file}`, and the fixtures over http.
const server = await serve({
  '/models/': FIXTURES,
  '/default/': DEFAULT_MODEL,
  '/hub/st5-test/tiny/resolve/main/': DIR,
});
const hubUrl = `${server.url}/hub`;
const hubHits = () => [...server.hits].filter(([p]) => p.startsWith('/hub/')).reduce((n, [, c]) => n + c, 0);

/** Loads `source` on the CPU, embeds the reference sentences, disposes; the rows and facts. */
async function embedWith(source, options = {}, open = st5.load) {
  const model = await open(source, { device: 'cpu', threads: 1, ...options });
  const rows = await model.embed(st.sentences);
  const facts = { device: model.device, dim: model.dim, threads: model.threads };
  await model.dispose();
  return { rows, ...facts };
}

/** `embedWith`'s rows within the CPU tolerance of the reference; the error. */
function checkParity(r, what) {
  const err = maxAbsDiff(r.rows, want);
  if (r.device !== 'cpu' || !(err <= CPU_TOL)) throw new Error(`${what}: device ${r.device}, max abs error ${err}`);
  return err;
}

const rejection = (promise) =>
  promise.then(
    () => 'loaded',
    (e) => e.message,
  );

const failed = await runCases([
  [
    'path_loads_absolute_and_relative_and_match_reference_on_cpu',
    async () => {
      const absolute = checkParity(await embedWith(DIR), 'absolute path');
      const rel = relative(process.cwd(), DIR);
      const relErr = checkParity(await embedWith(rel), `relative path ${rel}`);
      return `${wasmFlavor()} module; max abs error ${absolute.toExponential(2)} (absolute), ${relErr.toExponential(2)} (${rel})`;
    },
  ],
  [
    // The built-in default's weights (18 MB) take more than one read from disk: the bytes read in
    // pieces straight into the weights' buffer must be the file's, so the vectors equal those of
    // the same files over http (fetch's stream), bit for bit.
    'a_model_read_from_disk_in_several_pieces_equals_it_over_http',
    async () => {
      const sentences = st.sentences;
      const rowsOf = async (source) => {
        const progress = [];
        const model = await st5.load(source, { device: 'cpu', threads: 1, onProgress: (p) => progress.push(p) });
        const rows = await model.embed(sentences);
        await model.dispose();
        const weights = progress.filter((p) => p.stage === 'download' && p.file === 'model.safetensors');
        return { rows, reads: weights.filter((p) => p.loaded < p.total).length + 1 };
      };
      const disk = await rowsOf(DEFAULT_MODEL);
      const http = await rowsOf(`${server.url}/default/`);
      if (!(disk.reads > 1)) throw new Error(`the weights came in ${disk.reads} read(s): the test needs several`);
      const diff = maxAbsDiff(disk.rows, http.rows);
      if (diff !== 0) throw new Error(`path vs http: max abs difference ${diff}`);
      return `${disk.reads} reads from disk; ${sentences.length} vectors identical to http`;
    },
  ],
  [
    'directory_path_wins_over_a_hub_id_spelled_the_same',
    async () => {
      // `fixtures/st-enc-mean-relu` reads as a hub id; from tests/ it is also a directory.
      const id = `fixtures/${ST}`;
      const cwd = process.cwd();
      const before = hubHits();
      let err;
      let elsewhere;
      try {
        process.chdir(join(ROOT, 'tests'));
        err = checkParity(await embedWith(id, { hubUrl }), id);
        // Where no such directory exists, the same string goes to the hub (which lacks it).
        process.chdir(ROOT);
        elsewhere = await rejection(st5.load(id, { device: 'cpu', hubUrl }));
      } finally {
        process.chdir(cwd);
      }
      if (!elsewhere.includes(`${id} (revision main)`)) throw new Error(`from the root: ${elsewhere}`);
      if (hubHits() === before) throw new Error('from the root the id never reached the hub');
      return `from tests/: the directory (max abs error ${err.toExponential(2)}); from the root: "${elsewhere.slice(0, 100)}"`;
    },
  ],
  [
    'file_urls_load_and_match_reference',
    async () => {
      const url = pathToFileURL(DIR);
      const errs = [
        checkParity(await embedWith(url), 'a URL object'),
        checkParity(await embedWith(`${url.href}/`), 'a file: URL string'),
      ];
      return `max abs error ${errs.map((e) => e.toExponential(2)).join(', ')}`;
    },
  ],
  [
    'http_url_loads_and_matches_reference',
    async () => {
      const err = checkParity(await embedWith(`${server.url}/models/${ST}/`), 'http');
      return `max abs error ${err.toExponential(2)}`;
    },
  ],
  [
    'missing_directory_is_an_error_naming_it',
    async () => {
      const missing = join(FIXTURES, 'no-such-model');
      const message = await rejection(st5.load(missing, { device: 'cpu' }));
      if (!message.includes(pathToFileURL(missing).href)) throw new Error(message);
      return `"${message.slice(0, 140)}"`;
    },
  ],
  [
    'hub_id_loads_from_a_mirror_and_a_missing_one_names_id_and_revision',
    async () => {
      const err = checkParity(await embedWith('st5-test/tiny', { hubUrl }), 'hub id');
      const refused = [
        await rejection(st5.load('st5-test/missing', { device: 'cpu', hubUrl })),
        await rejection(st5.load('st5-test/tiny', { device: 'cpu', hubUrl, revision: 'v2' })),
      ];
      const names = [
        ['st5-test/missing', 'revision main'],
        ['st5-test/tiny', 'revision v2'],
      ];
      refused.forEach((m, i) => {
        if (!names[i].every((w) => m.includes(w))) throw new Error(`error ${i}: ${m}`);
      });
      return `max abs error ${err.toExponential(2)}; "${refused[1].slice(0, 120)}"`;
    },
  ],
  [
    'the_page_leaves_batches_to_workers_loading_on_every_core',
    async () => {
      // PoolModel alone, over a fake page model and fake workers: which batches of a first call
      // the page runs itself, by cores and by whether the workers load. Where the page should run
      // all 8, the workers load once it has (or after 2 s, when it has not: the case fails); else
      // after 50 ms. No outcome depends on how fast timers fire on a loaded machine.
      const { PoolModel } = await import(pathToFileURL(join(app, 'node_modules/st5/pool.js')).href);
      const sleep = (ms) => new Promise((ok) => setTimeout(ok, ms));
      const fake = (runs, ranAll = () => {}) => ({
        dim: 1,
        planBatches: (texts) => texts.map((_, i) => [i]),
        embedFlat: async (texts) => {
          runs.push(texts[0]);
          if (runs.length === 8) ranAll();
          await sleep(5);
          return new Float32Array(texts.map(Number));
        },
        dispose: async () => {},
      });
      const cases = [
        // workers, cores, workers load?, batches the page should run of 8
        [2, 2, true, 0],
        [3, 2, true, 0],
        [2, 4, true, 8],
        [2, 2, false, 8],
      ];
      for (const [workers, cores, loads, want] of cases) {
        const page = [];
        let ranAll;
        const pageRanAll = new Promise((ok) => (ranAll = ok));
        const spawners = Array.from({ length: workers }, () => async () => {
          await (want === 8 && loads ? Promise.race([pageRanAll, sleep(2000)]) : sleep(50));
          if (!loads) throw new Error('this worker fails to start');
          return fake([]);
        });
        const pool = new PoolModel(fake(page, ranAll), spawners, cores);
        const texts = Array.from({ length: 8 }, (_, i) => String(i));
        const warn = console.warn;
        console.warn = () => {};
        const out = await pool.embedFlat(texts).finally(() => (console.warn = warn));
        await pool.dispose();
        const what = `${workers} workers on ${cores} cores${loads ? '' : ', failing'}`;
        if (out.join() !== texts.join()) throw new Error(`${what}: rows ${out.join()}`);
        if (page.length !== want) throw new Error(`${what}: the page ran ${page.length} batches, not ${want}`);
      }
      return 'workers loading on every core: the page ran none of 8 batches; a core left over: all 8 before the workers loaded; workers failing: all 8';
    },
  ],
  [
    'cpu_pool_on_worker_threads_is_bit_identical_to_one_thread',
    async () => {
      // 48 texts in batches of 2: once both workers have loaded, each takes batches from the
      // start of the call (pool.js hands the next batch to every idle worker), so both run.
      const texts = [...st.sentences, ...st.sentences, ...st.sentences, ...st.sentences];
      const one = await st5.load(DIR, { device: 'cpu', threads: 1, batchSize: 2 });
      const single = await one.embedFlat(texts);
      // Each text alone: the same bits as in its batch of 2 (the CPU never pads).
      const alone = [];
      for (const t of st.sentences) alone.push(...(await one.embedFlat([t])));
      await one.dispose();
      const pool = await st5.load(DIR, { device: 'cpu', threads: 2, batchSize: 2 });
      const first = await pool.embedFlat(texts); // starts the workers; the main thread runs it
      for (let i = 0; i < 1200 && pool.threads < 2; i++) await new Promise((ok) => setTimeout(ok, 50));
      const threads = pool.threads;
      const batches = pool.planBatches(texts).length;
      const pooled = await pool.embedFlat(texts);
      const dim = pool.dim;
      // Each loaded worker reports its own module's memory, which holds a copy of the weights.
      const memory = await pool.memory();
      const weights = pool.weightBytes;
      await pool.dispose();
      const same = (a) => a.length === single.length && a.every((x, i) => Object.is(x, single[i]));
      const aloneSame = alone.every((x, i) => Object.is(x, single[i]));
      if (threads !== 2 || !same(first) || !same(pooled) || !aloneSame)
        throw new Error(
          `threads ${threads}, first call identical ${same(first)}, pooled identical ${same(pooled)}, alone identical ${aloneSame}`,
        );
      const holds = (bytes) => Number.isInteger(bytes) && bytes >= weights;
      if (memory.workers.length !== 2 || !holds(memory.page) || !memory.workers.every(holds))
        throw new Error(`memory ${JSON.stringify(memory)} with ${weights} bytes of weights`);
      const rows = want.map((_, i) => pooled.subarray(i * dim, (i + 1) * dim));
      const err = maxAbsDiff(rows, want);
      if (!(err <= CPU_TOL)) throw new Error(`max abs error ${err}`);
      const mib = (b) => (b / 2 ** 20).toFixed(1);
      return `2 worker_threads, ${batches} batches: bit-identical to one thread and to each text alone; max abs error ${err.toExponential(2)}; wasm memory page ${mib(memory.page)} MiB, workers ${memory.workers.map(mib).join(', ')} MiB`;
    },
  ],
  [
    'load_in_worker_runs_on_worker_threads',
    async () => {
      const errs = [
        checkParity(await embedWith(DIR, {}, st5.loadInWorker), 'a path'),
        checkParity(await embedWith('st5-test/tiny', { hubUrl }, st5.loadInWorker), 'a hub id'),
      ];
      const inWorker = await st5.loadInWorker(DIR, { device: 'cpu', threads: 1 });
      const memory = await inWorker.memory();
      await inWorker.dispose();
      if (memory.page !== 0 || memory.workers.length !== 1 || !(memory.workers[0] > 0))
        throw new Error(`loadInWorker's memory ${JSON.stringify(memory)}`);
      const refused = await rejection(st5.loadInWorker('st5-test/missing', { device: 'cpu', hubUrl }));
      if (!refused.includes('st5-test/missing (revision main)')) throw new Error(refused);
      return `max abs error ${errs.map((e) => e.toExponential(2)).join(', ')}; "${refused.slice(0, 90)}"`;
    },
  ],
  [
    'search_index_works_in_memory',
    async () => {
      const model = await st5.load(DIR, { device: 'cpu', threads: 1 });
      const warnings = [];
      const warn = console.warn;
      console.warn = (...args) => warnings.push(args.join(' '));
      try {
        // Distinct texts only: '' and '   ' may embed alike, and a tie goes to the lower id.
        const queries = [0, 3, 7, 9, 11];
        const out = [];
        for (const quantize of ['none', 'int8']) {
          const index = await st5.createIndex(model, { quantize });
          await index.add(st.sentences);
          if (index.device !== 'cpu' || index.size !== st.sentences.length)
            throw new Error(`${quantize}: device ${index.device}, size ${index.size}`);
          if (quantize !== 'none' && index.rescore !== 'memory') throw new Error(`rescore ${index.rescore}`);
          const top = async (ix) => Promise.all(queries.map(async (i) => (await ix.search(st.sentences[i], 3)).hits));
          const hits = await top(index);
          hits.forEach((h, j) => {
            if (h[0].id !== queries[j] || !(h[0].score > 0.999))
              throw new Error(`${quantize}: "${st.sentences[queries[j]]}" → ${JSON.stringify(h[0])}`);
          });
          // export → importIndex gives the same hits and scores.
          const imported = await st5.importIndex(model, await index.export());
          const again = await top(imported);
          if (JSON.stringify(again) !== JSON.stringify(hits)) throw new Error(`${quantize}: import changed the hits`);
          imported.dispose();
          index.dispose();
          out.push(`${quantize}${index.rescore ? ` (rescore ${index.rescore})` : ''}`);
        }
        // openIndex builds in memory without IndexedDB, quietly; save() says why it cannot.
        const { index, restored, reason } = await st5.openIndex(model, st.sentences);
        const saved = await rejection(index.save());
        index.dispose();
        if (restored !== 0 || reason !== null || index.texts.length !== st.sentences.length)
          throw new Error(`openIndex: restored ${restored}, reason ${reason}`);
        if (!saved.includes('IndexedDB')) throw new Error(`save(): ${saved}`);
        if (warnings.length) throw new Error(`warnings: ${warnings.join(' | ')}`);
        return `${out.join(', ')}: top hits right, export/import identical; openIndex in memory; save(): "${saved}"`;
      } finally {
        console.warn = warn;
        await model.dispose();
      }
    },
  ],
  [
    'a_collection_searches_documents_and_its_file_opens_in_the_cli',
    async () => {
      // Documents with fields (one long, with text outside the BMP so that UTF-16 offsets differ
      // from character ones), searched in each mode under a filter, updated by id; its file and
      // the CLI's answer alike.
      const model = await st5.load(DIR, { device: 'cpu', threads: 1 });
      const schema = {
        text: [{ name: 'title', boost: 2 }, { name: 'body' }],
        fields: [
          { name: 'year', type: 'number' },
          { name: 'tags', type: 'string[]' },
        ],
      };
      const lines = [...new Set(st.sentences.filter((t) => t.trim() && !t.includes('\n')))].slice(0, 8);
      const docs = lines.map((body, i) => ({
        id: `d${i}`,
        title: body.split(' ').slice(0, 2).join(' '),
        body,
        year: 2015 + i,
        tags: [i % 2 ? 'odd' : 'even'],
      }));
      docs.push({
        id: 'long',
        title: 'A café 😀 story',
        body: 'The river flooded the old town 😀. '.repeat(30),
        year: 2024,
        tags: ['odd'],
      });
      const col = await st5.createCollection(model, schema);
      const added = await col.add(docs);
      if (col.size !== docs.length || !(added.passages > docs.length * 2))
        throw new Error(`size ${col.size}, ${added.passages} passages`);
      const dup = await col.add([{ id: 'd0', body: 'again' }]).then(
        () => null,
        (e) => e.message,
      );
      if (!dup?.includes('already') || col.size !== docs.length) throw new Error(`a repeated id: ${dup}`);
      const bad = await col
        .upsert([
          { id: 'x', body: 'ok' },
          { id: 'y', year: 'soon' },
        ])
        .then(
          () => null,
          (e) => e.message,
        );
      if (!bad?.includes('`year`') || col.get('x') !== undefined) throw new Error(`a bad document: ${bad}`);
      // Keyword: the word marked in the passage, offsets in UTF-16 units.
      const kw = await col.search('flooded', { mode: 'keyword' });
      const hit = kw.hits[0];
      if (hit?.id !== 'long') throw new Error(`keyword: ${JSON.stringify(kw.hits.map((h) => h.id))}`);
      for (const p of hit.passages) {
        const field = hit.document[p.field];
        if (field.slice(p.start, p.end) !== p.text) throw new Error(`passage offsets: ${p.start}..${p.end}`);
        if (!p.highlights.every(([a, b]) => field.slice(a, b) === 'flooded')) throw new Error('highlights');
      }
      const title = await col.search('cafe story', { mode: 'keyword', prefix: true });
      const marked = title.hits[0].passages.find((p) => p.field === 'title');
      if (!marked || marked.highlights.map(([a, b]) => hit.document.title.slice(a, b)).join() !== 'story')
        throw new Error(`title highlights: ${JSON.stringify(marked)}`);
      // Vector: each passage's score is the cosine of its text's vector with the query's.
      const q = lines[3];
      const vec = await col.search(q, { mode: 'vector', k: 3 });
      if (vec.hits[0].id !== 'd3') throw new Error(`vector: ${vec.hits.map((h) => h.id)}`);
      const [qv] = await model.embed([q]);
      const norm = (v) => Math.hypot(...v);
      let worst = 0;
      for (const h of vec.hits) {
        for (const p of h.passages) {
          const [pv] = await model.embed([p.text]);
          const cos = pv.reduce((s, x, i) => s + x * qv[i], 0) / norm(pv) / norm(qv);
          worst = Math.max(worst, Math.abs(cos - p.score));
        }
      }
      if (!(worst <= 1e-6)) throw new Error(`passage scores off by ${worst}`);
      // A filter: only matching documents, facets over all of them.
      const f = await col.search('a story', { where: { year: { gte: 2019 }, tags: 'odd' }, facets: ['tags'], k: 20 });
      const want = docs
        .filter((d) => d.year >= 2019 && d.tags.includes('odd'))
        .map((d) => d.id)
        .sort();
      if (
        f.hits
          .map((h) => h.id)
          .sort()
          .join() !== want.join() ||
        f.matched !== want.length
      )
        throw new Error(`filtered: ${f.hits.map((h) => h.id)} vs ${want}`);
      if (JSON.stringify(f.facets.tags) !== JSON.stringify([['odd', want.length]]))
        throw new Error(`facets ${JSON.stringify(f.facets)}`);
      const text = await col.search('a story', { where: 'year >= 2019 and tags = odd', facets: ['tags'], k: 20 });
      if (JSON.stringify(text) !== JSON.stringify(f))
        throw new Error('the text form of a filter differs from the object form');
      // Saved collections need OPFS, which Node has not: refused by name.
      const saved = await st5.openCollection(model, 'notes', schema).then(
        () => null,
        (e) => e,
      );
      if (saved?.code !== 'storage' || !saved.message.includes('importCollection'))
        throw new Error(`openCollection in Node: ${saved?.code} ${saved?.message}`);
      // Updates by id.
      await col.upsert([{ id: 'd1', body: 'Shallots and garlic.', year: 2030, tags: ['odd'] }]);
      if (!col.remove('d2') || col.remove('d2') || col.get('d2') !== undefined) throw new Error('remove');
      if ((await col.search('shallots', { mode: 'keyword' })).hits[0]?.id !== 'd1') throw new Error('upsert');
      // Its file in the CLI: the same keyword answer, and the same vector ranking.
      const bin = process.env.ST5_BIN ?? join(process.env.CARGO_TARGET_DIR ?? join(ROOT, 'target'), 'release/st5');
      let cli = 'no st5 binary: the CLI half skipped';
      if (existsSync(bin)) {
        const dir = mkdtempSync(join(tmpdir(), 'st5-collection-'));
        const file = join(dir, 'page.st5index');
        writeFileSync(file, Buffer.from(await (await col.export({ quantize: 'int8' })).arrayBuffer()));
        const query = async (mode, query) =>
          JSON.parse(
            (
              await promisify(execFile)(bin, [
                'index',
                'query',
                '--model',
                DIR,
                file,
                '--json',
                '-k',
                '5',
                '--mode',
                mode,
                query,
              ])
            ).stdout,
          );
        // The same f32 score, however each side prints it.
        const ids = (r) => r.hits.map((h) => `${h.id}:${Math.fround(h.keyword_score ?? 0)}`).join();
        for (const [mode, qq] of [
          ['keyword', 'river town'],
          ['vector', q],
        ]) {
          const [mine, theirs] = [await col.search(qq, { mode, k: 5 }), await query(mode, qq)];
          if (
            mine.hits.map((h) => h.id).join() !== theirs.hits.map((h) => h.id).join() ||
            (mode === 'keyword' && ids(mine) !== ids(theirs))
          )
            throw new Error(`${mode}: ${ids(mine)} vs ${ids(theirs)}`);
        }
        // And the CLI's file here.
        const built = join(dir, 'cli.st5index');
        const jsonl = join(dir, 'docs.jsonl');
        writeFileSync(jsonl, docs.map((d) => JSON.stringify(d)).join('\n') + '\n');
        await promisify(execFile)(bin, [
          'index',
          'build',
          '--model',
          DIR,
          '--docs',
          jsonl,
          '--text',
          'title:2,body',
          '--field',
          'year:number,tags:string[]',
          '--output',
          built,
        ]);
        const opened = await st5.importCollection(model, built);
        const a = await opened.search('river town', { mode: 'keyword', k: 5 });
        const argv = ['index', 'query', '--model', DIR, built, '--json', '-k', '5', '--mode', 'keyword', 'river town'];
        const b = JSON.parse((await promisify(execFile)(bin, argv)).stdout);
        if (opened.size !== docs.length || a.hits[0].id !== 'long' || ids(a) !== ids(b))
          throw new Error(`the CLI's file: ${ids(a)} vs ${ids(b)}`);
        opened.dispose();
        cli = "its file answers alike in st5 index query, and the CLI's opens here";
      }
      col.dispose();
      await model.dispose();
      return `${docs.length} documents, ${added.passages} passages; passage cosines within ${worst.toExponential(1)}; filter, facets, prefix, upsert, remove; ${cli}`;
    },
  ],
  [
    'index_files_open_in_the_cli_and_the_package_both_ways',
    async () => {
      // One index file format (st5_format::index_file): `st5 index build` writes it, importIndex
      // reads it, export() writes it back byte for byte, and `st5 index query` reads the
      // package's; the old ST5IDX1 export still opens, once, with a note.
      const bin = process.env.ST5_BIN ?? join(process.env.CARGO_TARGET_DIR ?? join(ROOT, 'target'), 'release/st5');
      if (!existsSync(bin)) {
        console.log(
          `skipped: index_files_open_in_the_cli_and_the_package_both_ways: no st5 binary at ${bin} (cargo build --release --bin st5, or ST5_BIN)`,
        );
        return 'skipped';
      }
      const st5cli = async (...args) => (await promisify(execFile)(bin, args)).stdout;
      const dir = mkdtempSync(join(tmpdir(), 'st5-index-files-'));
      // Distinct one-line documents (the CLI reads one a line).
      const docs = [...new Set(st.sentences.filter((t) => t.trim() && !t.includes('\n')))];
      const corpus = join(dir, 'corpus.txt');
      writeFileSync(corpus, docs.join('\n') + '\n');
      const queries = [docs[0], docs[3], 'a question nobody indexed'];
      // `st5 index query`'s lines: rank, score, text.
      const cliHits = async (file, q) =>
        (await st5cli('index', 'query', '--model', DIR, file, '-k', '3', q))
          .trim()
          .split('\n')
          .map((l) => l.split('\t'))
          .map(([, score, text]) => ({ text, score: Number(score) }));
      const same = (what, a, b) => {
        const ok =
          a.length === b.length && a.every((h, i) => h.text === b[i].text && Math.abs(h.score - b[i].score) <= 2e-4);
        if (!ok) throw new Error(`${what}: ${JSON.stringify(a)} vs ${JSON.stringify(b)}`);
      };
      const model = await st5.load(DIR, { device: 'cpu', threads: 1 });
      const warnings = [];
      const warn = console.warn;
      console.warn = (...args) => warnings.push(args.join(' '));
      const out = [];
      try {
        for (const codes of ['none', 'int8', 'binary']) {
          const built = join(dir, `cli-${codes}.st5index`);
          await st5cli('index', 'build', '--model', DIR, '--corpus', corpus, '--output', built, '--codes', codes);
          const index = await st5.importIndex(model, built);
          if (index.quantize !== codes || index.size !== docs.length)
            throw new Error(`${codes}: ${index.quantize}, ${index.size}`);
          for (const q of queries) {
            const { hits } = await index.search(q, 3);
            same(`${codes} "${q}"`, hits, await cliHits(built, q));
          }
          const exported = Buffer.from(await (await index.export()).arrayBuffer());
          if (!exported.equals(readFileSync(built))) throw new Error(`${codes}: export() differs from the CLI's file`);
          index.dispose();
          // Built here: the CLI answers from the package's file as the package does.
          const mine = await st5.createIndex(model, { quantize: codes });
          await mine.add(docs.slice(0, 6));
          const file = join(dir, `page-${codes}.st5index`);
          writeFileSync(file, Buffer.from(await (await mine.export()).arrayBuffer()));
          same(`${codes}: the package's file`, (await mine.search(docs[2], 3)).hits, await cliHits(file, docs[2]));
          mine.dispose();
          out.push(codes);
        }
        // Another model's file (here: another pooling) is refused, naming both identities.
        const other = join(dir, 'enc-first.st5index');
        await st5cli('index', 'build', '--model', DIR, '--variant', 'enc-first', '--corpus', corpus, '--output', other);
        const refused = await st5.importIndex(model, other).then(
          () => null,
          (e) => e,
        );
        if (refused?.code !== 'model' || !refused.message.includes('another model'))
          throw new Error(`another model's file: ${refused?.message}`);
        // A damaged file: the checksum, checked in wasm over the file in pieces.
        const bytes = readFileSync(join(dir, 'cli-int8.st5index'));
        bytes[bytes.length - 40] ^= 1;
        const damaged = await rejection(st5.importIndex(model, new Blob([bytes])));
        if (!damaged.includes('checksum mismatch')) throw new Error(`damaged: ${damaged}`);
        // The package's old format: header JSON with the texts and hashes, then the f32 vectors.
        const index = await st5.createIndex(model);
        await index.add(docs);
        const vectors = await index.vectors();
        const sha = async (b) => Buffer.from(await crypto.subtle.digest('SHA-256', b)).toString('hex');
        const header = {
          fingerprint: model.legacyFingerprint,
          corpus: await sha(new TextEncoder().encode(docs.join('\u0000'))),
          dim: model.dim,
          texts: docs,
          quantize: 'none',
          checksum: await sha(vectors),
        };
        const head = new TextEncoder().encode(JSON.stringify(header));
        const legacy = new Blob(['ST5IDX1\n', new Uint32Array([head.length]), head, vectors]);
        const old = await st5.importIndex(model, legacy);
        same('ST5IDX1', (await old.search(docs[4], 3)).hits, (await index.search(docs[4], 3)).hits);
        old.dispose();
        index.dispose();
        if (warnings.length !== 1 || !warnings[0].includes('ST5IDX1') || !warnings[0].includes('export() it again'))
          throw new Error(`warnings: ${warnings.join(' | ')}`);
        return `${out.join(', ')}: CLI file → package → export() byte-identical, package file → st5 index query, same hits; another model's and a damaged file refused; ST5IDX1 opened with a note`;
      } finally {
        console.warn = warn;
        await model.dispose();
      }
    },
  ],
  [
    'a_script_that_never_disposes_its_pool_still_exits',
    async () => {
      // A user's script in the app, run by a child Node: `import { load } from 'st5'`, a pool of
      // two worker_threads that has loaded and embedded, and no dispose(). Idle workers must not
      // hold the process open (rpc.js unrefs them between calls).
      writeFileSync(
        join(app, 'script.mjs'),
        `import { load } from 'st5';
const model = await load(process.argv[2], { device: 'cpu', threads: 2, batchSize: 2 });
const texts = Array.from({ length: 16 }, (_, i) => 'text number ' + i);
await model.embed(texts);
while (model.threads < 2) await new Promise((ok) => setTimeout(ok, 50));
const rows = await model.embed(texts);
console.log(JSON.stringify({ threads: model.threads, rows: rows.length, dim: model.dim }));
`,
      );
      const t0 = Date.now();
      const { stdout } = await promisify(execFile)(process.execPath, ['script.mjs', DIR], {
        cwd: app,
        timeout: 120_000,
      });
      const r = JSON.parse(stdout.trim().split('\n').at(-1));
      if (r.threads !== 2 || r.rows !== 16) throw new Error(stdout);
      return `exited by itself after ${((Date.now() - t0) / 1000).toFixed(1)} s: ${stdout.trim()}`;
    },
  ],
]);

await server.close();
process.exit(failed ? 1 : 0);
