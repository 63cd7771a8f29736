// Benchmark: st5's document collection beside Orama (npm `@orama/orama` 3.1.18) in one headless
// Chromium page, on the same documents and the same vectors. The vectors are st5's: the corpus
// embedded natively by `st5 embed` (the bits `st5 index build` stores) and handed to Orama's
// vector field; each query embedded once by the page's model and handed to both
// (`collection.search(q, { vector })`, Orama's `vector.value`), so the latencies are the searches'
// own. For corpora of 10k and 100k one-passage documents (the three tuning corpora, then sentence
// and caption sets of shared/data/train, each with a `source` to filter on), it reports:
//   - query latency p50 / p99 in each mode, without and with a filter (`source` in three values);
//   - making the collection searchable: Orama's `insertMultiple` of documents with vectors, and
//     st5's `importCollection` of the file `st5 index build --docs` wrote (that build's native
//     time, embedding included, beside it);
//   - saved size: st5's index file against Orama's `save()` as msgpack (its persistence plugin's
//     'binary') and as JSON, and the time to open each again;
//   - the page's memory: st5's wasm memory growth, Orama's JS heap growth after a GC;
// then nDCG@10 of each side's vector, keyword and hybrid modes on each tuning set's test queries.
//
//   node tests/browser/bench-orama.mjs --st5 target/release/st5 --sets DIR
//       [--data ../shared/data/train] [--work /var/tmp/st5-orama] [--sizes 10000,100000]
//       [--queries 200] [--json OUT.json]
//
// DIR: `python -m st5_recipes.retrieval_sets --out DIR` (trainer/recipes/common). Run
// `bash scripts/model-parts.sh` first (the default model's weights are committed in parts). Needs
// tests/browser's optional dependencies (`npm install` there; CI's `npm ci --omit=optional` skips
// them) and pkg/ built (`bash pkg/build.sh`). The work folder keeps the corpora, index files and
// vectors between runs.

import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { DEFAULT_MODEL } from '../../www/serve.mjs';
import { ROOT, installPackage, launch, open, serve, writeIndexPage } from './harness.mjs';

const arg = (name, dflt) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : dflt;
};
const st5 = arg('--st5') && resolve(arg('--st5'));
const setsDir = arg('--sets') && resolve(arg('--sets'));
const data = resolve(arg('--data', join(ROOT, '../shared/data/train')));
const work = resolve(arg('--work', '/var/tmp/st5-orama'));
const sizes = arg('--sizes', '10000,100000').split(',').map(Number);
const nQueries = Number(arg('--queries', 200));
if (!st5 || !setsDir) {
  console.error('usage: bench-orama.mjs --st5 PATH/st5 --sets DIR [--data DIR] [--work DIR] [--sizes N,N]');
  process.exit(2);
}
const SETS = ['wikiqa', 'selqa', 'stackexchange_small'];
// The filtered queries keep documents of these sources (about a third of the corpus).
const FILTER_SOURCES = ['selqa', 'coco', 'news'];
const MAX_WORDS = 64; // one passage of the default model's 256-token window, with room to spare

// ---- the corpora, written once into the work folder ----

const norm = (t) =>
  String(t ?? '')
    .replace(/\s+/g, ' ')
    .trim();
const jsonl = (path) =>
  readFileSync(path, 'utf8')
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l));
const lines = (path) =>
  readFileSync(path, 'utf8')
    .split('\n')
    .filter((l) => l.trim());

/** A tuning set: its documents (`title text`, as `st5 eval` embeds them), test queries and qrels. */
function tuningSet(name) {
  const dir = join(setsDir, name);
  const docs = jsonl(join(dir, 'corpus.jsonl'))
    .map((d) => ({ id: String(d._id), text: norm(`${d.title ?? ''} ${d.text}`) }))
    .filter((d) => d.text);
  const qtext = new Map(jsonl(join(dir, 'queries.jsonl')).map((q) => [String(q._id), norm(q.text)]));
  const qrels = new Map();
  for (const l of lines(join(dir, 'qrels/test.tsv')).slice(1)) {
    const [q, d, g] = l.split('\t');
    if (Number(g) > 0) (qrels.get(q) ?? qrels.set(q, new Map()).get(q)).set(d, Number(g));
  }
  const queries = [...qrels.keys()].map((id) => ({ id, text: qtext.get(id) }));
  return { name, docs, queries, qrels };
}

/** Sentences and captions beyond the tuning corpora, by source. */
function* extraTexts() {
  const leipzig = join(data, 'leipzig_sentences');
  for (const [source, file] of [
    ['news', 'eng_news_2016_10K-sentences.txt'],
    ['wikipedia', 'eng_wikipedia_2016_10K-sentences.txt'],
  ])
    for (const l of lines(join(leipzig, file))) yield [source, l.split('\t')[1]];
  const coco = JSON.parse(readFileSync(join(data, 'coco_captions_val2017/captions_val2017.json'), 'utf8'));
  for (const a of coco.annotations) yield ['coco', a.caption];
  for (const f of ['tune.tsv', 'validation.tsv', 'test.tsv'])
    for (const l of lines(join(data, 'wikisplit', f))) yield ['wikisplit', l.split('\t')[0]];
  for (let k = 1; k <= 5; k++)
    for (const l of lines(join(data, 'multi30k_flickr30k_captions', `train.${k}.en`))) yield ['flickr30k', l];
}

/** A seeded shuffle (mulberry32), so every run and machine gets the same corpora. */
function shuffle(xs, seed = 20261207) {
  let s = seed >>> 0;
  const next = () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  for (let i = xs.length - 1; i > 0; i--) {
    const j = Math.floor(next() * (i + 1));
    [xs[i], xs[j]] = [xs[j], xs[i]];
  }
  return xs;
}

/** Runs the native st5, returning its wall time in seconds. */
function native(args) {
  const t = performance.now();
  execFileSync(st5, args, { stdio: ['ignore', 'ignore', 'inherit'] });
  return (performance.now() - t) / 1000;
}

/** Writes `name`'s documents, builds its index natively and embeds its texts (once per work folder). */
function materialise(name, docs, fields) {
  const base = join(work, name);
  const timing = `${base}.build.json`;
  if (!existsSync(timing)) {
    writeFileSync(`${base}.jsonl`, docs.map((d) => JSON.stringify(d)).join('\n') + '\n');
    writeFileSync(`${base}.txt`, docs.map((d) => d.text).join('\n') + '\n');
    const build = native([
      'index',
      'build',
      '--docs',
      `${base}.jsonl`,
      '--text',
      'text',
      ...fields,
      '--codes',
      'none',
      '--output',
      `${base}.st5index`,
    ]);
    const embed = native(['embed', '--input', `${base}.txt`, '--output', `${base}.npy`]);
    writeFileSync(timing, JSON.stringify({ build, embed }));
  }
  return {
    name,
    count: docs.length,
    ...JSON.parse(readFileSync(timing, 'utf8')),
    bytes: statSync(`${base}.st5index`).size,
  };
}

mkdirSync(work, { recursive: true });
const sets = SETS.map(tuningSet);
const pool = [];
const seen = new Set();
const take = (source, id, text) => {
  text = norm(text);
  if (!text || text.split(' ').length > MAX_WORDS || seen.has(text)) return;
  seen.add(text);
  pool.push({ id, text, source });
};
for (const s of sets) for (const d of s.docs) take(s.name, `${s.name}:${d.id}`, d.text);
let n = 0;
for (const [source, text] of extraTexts()) take(source, `${source}:${n++}`, text);
shuffle(pool);
if (pool.length < Math.max(...sizes)) throw new Error(`only ${pool.length} distinct short texts for ${sizes}`);
console.log(`pool: ${pool.length} distinct texts of at most ${MAX_WORDS} words`);
const setFiles = sets.map((s) => materialise(`set-${s.name}`, s.docs, []));
const corpora = sizes.map((size) => materialise(`corpus-${size}`, pool.slice(0, size), ['--field', 'source:string']));
// The latency queries: the tuning sets' test questions, interleaved.
const latencyQueries = shuffle(sets.flatMap((s) => s.queries.map((q) => q.text))).slice(0, nQueries);

// ---- the page ----

const { app } = installPackage();
writeIndexPage(app);
const nm = join(ROOT, 'tests/browser/node_modules');
const server = await serve({
  '/': app,
  '/model/': DEFAULT_MODEL,
  '/work/': work,
  '/orama/': join(nm, '@orama/orama/dist/browser'),
  '/msgpack/': join(nm, '@msgpack/msgpack/dist.esm'),
});
const oramaVersion = JSON.parse(readFileSync(join(nm, '@orama/orama/package.json'), 'utf8')).version;
const browser = await launch(['--js-flags=--expose-gc']);
const { page, logs } = await open(await browser.newContext(), `${server.url}/`);
page.setDefaultTimeout(0);

// Helpers defined once in the page: loading a corpus both ways, timing, percentiles.
await page.evaluate(async () => {
  const orama = await import('/orama/index.js');
  const msgpack = await import('/msgpack/index.mjs');
  const runtime = await import('/node_modules/st5/runtime.js');
  const model = await window.st5.load('/model/', { device: 'cpu' });
  const npy = async (url) => {
    const buf = await (await fetch(url)).arrayBuffer();
    const headerLen = new DataView(buf).getUint16(8, true);
    return new Float32Array(buf, 10 + headerLen);
  };
  const gcHeap = () => (globalThis.gc(), performance.memory.usedJSHeapSize);
  const pct = (xs, p) => {
    const s = [...xs].sort((a, b) => a - b);
    return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)];
  };
  window.bench = { orama, msgpack, runtime, model, npy, gcHeap, pct };
});

/** Loads corpus `name` into st5 (its index file) and Orama (its documents with the same vectors). */
const loadBoth = (name, withSource, stemming = false) =>
  page.evaluate(
    async ({ name, withSource, stemming }) => {
      const { orama, msgpack, runtime, model, npy, gcHeap } = window.bench;
      const out = {};
      const wasm0 = runtime.wasmMemoryBytes();
      let t = performance.now();
      window.col?.dispose();
      window.col = await window.st5.importCollection(model, `/work/${name}.st5index`);
      out.st5Open = performance.now() - t;
      out.st5Wasm = runtime.wasmMemoryBytes() - wasm0;
      out.st5Docs = window.col.size;
      out.st5Passages = window.col.passages;
      const docs = (await (await fetch(`/work/${name}.jsonl`)).text())
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l));
      const vectors = await npy(`/work/${name}.npy`);
      const dim = model.dim;
      if (vectors.length !== docs.length * dim) throw new Error(`${name}: ${vectors.length} values for ${docs.length}`);
      window.db = null;
      const schema = { id: 'string', text: 'string', embedding: `vector[${dim}]` };
      if (withSource) schema.source = 'enum';
      const options = stemming ? { schema, components: { tokenizer: { stemming: true } } } : { schema };
      // Plain arrays, as Orama's schema check wants them (it keeps a Float32Array of each).
      let rows = docs.map((d, i) => ({ ...d, embedding: Array.from(vectors.subarray(i * dim, (i + 1) * dim)) }));
      const heap0 = gcHeap();
      t = performance.now();
      const db = orama.create(options);
      await orama.insertMultiple(db, rows, 1000);
      out.oramaBuild = performance.now() - t;
      rows = null;
      out.oramaHeap = gcHeap() - heap0;
      out.oramaDocs = orama.count(db);
      window.db = db;
      window.dbOptions = options;
      return out;
    },
    { name, withSource, stemming },
  );

/** Saved sizes and reopening: st5's export, Orama's save() as msgpack and as JSON. */
const saveBoth = () =>
  page.evaluate(async () => {
    const { orama, msgpack } = window.bench;
    const out = {};
    const file = await window.col.export();
    out.st5Bytes = file.size;
    let t = performance.now();
    const again = await window.st5.importCollection(window.bench.model, file);
    out.st5Reopen = performance.now() - t;
    again.dispose();
    const raw = orama.save(window.db);
    const bin = msgpack.encode(raw);
    out.oramaMsgpack = bin.byteLength;
    t = performance.now();
    const db2 = orama.create(window.dbOptions);
    orama.load(db2, msgpack.decode(bin));
    out.oramaReopen = performance.now() - t;
    try {
      out.oramaJson = new Blob([JSON.stringify(raw)]).size;
    } catch (e) {
      out.oramaJson = `not written: ${e.message}`; // a string over V8's limit at 100k
    }
    return out;
  });

/** Each query's vector from the page's model, kept in the page for both sides. */
const embedQueries = (texts) =>
  page.evaluate(async (texts) => {
    window.queries = texts;
    window.qvecs = await window.bench.model.embed(texts);
    return window.qvecs.length;
  }, texts);

/** Latency of every query in one configuration: `side` st5 or orama, `mode`, filter, Orama's similarity. */
const latency = (side, mode, filtered, similarity = 0.8, embedded = false) =>
  page.evaluate(
    async ({ side, mode, filtered, similarity, embedded, sources }) => {
      const { orama, pct } = window.bench;
      const run = async (i) => {
        const q = window.queries[i];
        const v = window.qvecs[i];
        if (side === 'st5') {
          const o = { mode, k: 10 };
          if (filtered) o.where = { source: { in: sources } };
          if (!embedded) o.vector = v;
          return (await window.col.search(q, o)).hits.length;
        }
        const o = { term: q, limit: 10, mode: mode === 'keyword' ? 'fulltext' : mode };
        if (mode !== 'keyword') Object.assign(o, { vector: { value: v, property: 'embedding' }, similarity });
        if (filtered) o.where = { source: { in: sources } };
        return (await orama.search(window.db, o)).hits.length;
      };
      for (let i = 0; i < 3; i++) await run(i);
      const ms = [];
      let hits = 0;
      for (let i = 0; i < window.queries.length; i++) {
        const t = performance.now();
        hits += await run(i);
        ms.push(performance.now() - t);
      }
      return { p50: pct(ms, 50), p99: pct(ms, 99), hits: hits / ms.length };
    },
    { side, mode, filtered, similarity, embedded, sources: FILTER_SOURCES },
  );

/** Each query's top 10 ids in one configuration. */
const runs = (side, mode, similarity = 0) =>
  page.evaluate(
    async ({ side, mode, similarity }) => {
      const { orama } = window.bench;
      const out = [];
      for (let i = 0; i < window.queries.length; i++) {
        const q = window.queries[i];
        const v = window.qvecs[i];
        if (side === 'st5') {
          out.push((await window.col.search(q, { mode, k: 10, vector: v })).hits.map((h) => h.id));
        } else {
          const o = { term: q, limit: 10, mode: mode === 'keyword' ? 'fulltext' : mode };
          if (mode !== 'keyword') Object.assign(o, { vector: { value: v, property: 'embedding' }, similarity });
          out.push((await orama.search(window.db, o)).hits.map((h) => h.id));
        }
      }
      return out;
    },
    { side, mode, similarity },
  );

/** nDCG@10 with linear gains, as `st5 eval` and pytrec_eval count it. */
function ndcg10(set, ranked) {
  let sum = 0;
  set.queries.forEach((q, i) => {
    const grades = set.qrels.get(q.id);
    const dcg = ranked[i].slice(0, 10).reduce((s, d, r) => s + (grades.get(d) ?? 0) / Math.log2(r + 2), 0);
    const ideal = [...grades.values()].sort((a, b) => b - a).slice(0, 10);
    sum += dcg / ideal.reduce((s, g, r) => s + g / Math.log2(r + 2), 0);
  });
  return (100 * sum) / set.queries.length;
}

const ms = (x) => (typeof x === 'number' ? x.toFixed(x < 10 ? 2 : 1) : x);
const mib = (b) => (typeof b === 'number' ? (b / 2 ** 20).toFixed(1) : b);
const result = { chromium: browser.version(), orama: oramaVersion, corpora: [], quality: [] };
console.log(
  `Chromium ${browser.version()}, @orama/orama ${oramaVersion}, model ${DEFAULT_MODEL.slice(ROOT.length + 1)}`,
);

for (const c of corpora) {
  const load = await loadBoth(c.name, true);
  if (load.st5Passages !== c.count || load.oramaDocs !== c.count) throw new Error(JSON.stringify({ c, load }));
  const saved = await saveBoth();
  await embedQueries(latencyQueries);
  const rows = [];
  for (const filtered of [false, true])
    for (const mode of ['vector', 'keyword', 'hybrid']) {
      const ours = await latency('st5', mode, filtered);
      const sims = mode === 'keyword' ? [0.8] : [0.8, 0];
      for (const sim of sims) {
        const theirs = await latency('orama', mode, filtered, sim);
        rows.push({ mode, filtered, sim: mode === 'keyword' ? null : sim, ours, theirs });
      }
    }
  const embeddedHybrid = await latency('st5', 'hybrid', false, 0.8, true);
  result.corpora.push({ ...c, load, saved, rows, embeddedHybrid });
  console.log(`\n## ${c.count.toLocaleString('en')} documents (one passage each)`);
  console.log(
    `native \`st5 index build --docs\` ${c.build.toFixed(1)} s (embedding included); \`st5 embed\` of the same texts ${c.embed.toFixed(1)} s`,
  );
  console.log('| | st5 | Orama | st5 / Orama |\n|---|---|---|---|');
  console.log(
    `| searchable from documents + vectors (ms) | ${ms(load.st5Open)} (importCollection of the file) | ${ms(load.oramaBuild)} (insertMultiple) | ${(load.st5Open / load.oramaBuild).toFixed(3)} |`,
  );
  console.log(
    `| saved size (MiB) | ${mib(saved.st5Bytes)} | ${mib(saved.oramaMsgpack)} msgpack, ${mib(saved.oramaJson)} JSON | ${(saved.st5Bytes / saved.oramaMsgpack).toFixed(3)} |`,
  );
  console.log(
    `| reopening the saved bytes (ms) | ${ms(saved.st5Reopen)} | ${ms(saved.oramaReopen)} (msgpack) | ${(saved.st5Reopen / saved.oramaReopen).toFixed(3)} |`,
  );
  console.log(
    `| page memory grown (MiB) | ${mib(load.st5Wasm)} wasm memory | ${mib(load.oramaHeap)} JS heap after GC | ${(load.st5Wasm / load.oramaHeap).toFixed(3)} |`,
  );
  console.log(`\n${latencyQueries.length} queries, k 10, latency in ms (the query's vector given to both):`);
  console.log(
    '| mode | filter | Orama similarity | st5 p50 | st5 p99 | Orama p50 | Orama p99 | p50 ratio | p99 ratio |',
  );
  console.log('|---|---|---|---|---|---|---|---|---|');
  for (const r of rows)
    console.log(
      `| ${r.mode} | ${r.filtered ? `source in ${FILTER_SOURCES.join('/')}` : 'none'} | ${r.sim ?? '-'} | ${ms(r.ours.p50)} | ${ms(r.ours.p99)} | ${ms(r.theirs.p50)} | ${ms(r.theirs.p99)} | ${(r.ours.p50 / r.theirs.p50).toFixed(3)} | ${(r.ours.p99 / r.theirs.p99).toFixed(3)} |`,
    );
  console.log(
    `st5 hybrid with the query embedded in the search: p50 ${ms(embeddedHybrid.p50)} ms, p99 ${ms(embeddedHybrid.p99)} ms`,
  );
}

console.log(`\n## nDCG@10 ×100, tuning sets' test queries (st5's default fusion; Orama's default weights 0.5/0.5)`);
console.log('| set | side | vector | keyword | hybrid | hybrid (Orama similarity 0.8) |\n|---|---|---|---|---|---|');
for (const [i, s] of sets.entries()) {
  await embedQueries(s.queries.map((q) => q.text));
  const scores = {};
  for (const [side, stemming] of [
    ['st5', false],
    ['orama', false],
    ['orama', true],
  ]) {
    const label = side === 'st5' ? 'st5' : stemming ? 'Orama, English stemming' : 'Orama (defaults)';
    const load = await loadBoth(setFiles[i].name, false, stemming);
    const row = {};
    for (const mode of ['vector', 'keyword', 'hybrid']) row[mode] = ndcg10(s, await runs(side, mode));
    if (side === 'orama') row.hybridDefault = ndcg10(s, await runs(side, 'hybrid', 0.8));
    scores[label] = { ...row, passages: load.st5Passages };
    console.log(
      `| ${s.name} (${s.docs.length} docs, ${s.queries.length} queries) | ${label} | ${row.vector.toFixed(2)} | ${row.keyword.toFixed(2)} | ${row.hybrid.toFixed(2)} | ${row.hybridDefault?.toFixed(2) ?? '-'} |`,
    );
  }
  result.quality.push({ set: s.name, scores });
}

if (arg('--json')) writeFileSync(arg('--json'), JSON.stringify(result, null, 1));
const errors = logs.filter((l) => l.startsWith('pageerror') || l.startsWith('error'));
if (errors.length) console.log(`page errors:\n${errors.join('\n')}`);
await browser.close();
await server.close();
