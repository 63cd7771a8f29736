// The bundler test: the packed package installed into a scratch app, built by Vite and by
// webpack 5 with the configurations pkg/README.md shows (tests/browser/bundler/: the app's page,
// entry and configs; the bundlers pinned by its package-lock.json), then each build served from
// localhost and run in headless Chromium: CPU parity with the Python reference within 1e-5, the
// CPU pool (2 workers) bit-identical to one thread, a search index (f32, and int8 with its OPFS
// rescoring worker), and recovery from a trap (the wasm glue imported again). These are what a
// bundler can break: the workers, the `.wasm` files and the glue, all found through
// `new URL(..., import.meta.url)`. Nothing is fetched from anywhere but localhost.
//
//   node tests/browser/bundler.test.mjs   (after `bash pkg/build.sh`; scripts/test.sh runs all)

import { execFileSync, spawnSync } from 'node:child_process';
import { copyFileSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { FIXTURES, ROOT, expected, installPackage, launch, maxAbsDiff, open, runCases, serve } from './harness.mjs';

// The CPU path, as in npm.test.mjs.
const CPU_TOL = 1e-5;
const ST = 'st-enc-mean-relu';
const BUNDLER = join(ROOT, 'tests/browser/bundler');
const st = expected(ST);
const want = st.embeddings['enc-mean'];
// Which module a page ran, told apart by size (webpack names assets by hash alone).
const RELAXED_BYTES = statSync(join(ROOT, 'pkg/wasm/st5_wasm_relaxed_bg.wasm')).size;

execFileSync('npm', ['ci', '--no-audit', '--no-fund', '--prefer-offline'], { cwd: BUNDLER, stdio: 'inherit' });
const { app } = installPackage();
for (const file of ['index.html', 'main.js', 'vite.config.js', 'webpack.config.js'])
  copyFileSync(join(BUNDLER, file), join(app, file));

const filesUnder = (dir) => readdirSync(dir, { recursive: true }).filter((f) => statSync(join(dir, f)).isFile());

/** Each bundler: builds the app into `dist` and returns its warnings (none expected). */
const BUILDS = {
  vite: {
    dist: join(app, 'dist/vite'),
    async build() {
      // Vite reports progress on stdout and warnings on stderr.
      const r = spawnSync(join(BUNDLER, 'node_modules/.bin/vite'), ['build'], { cwd: app, encoding: 'utf8' });
      if (r.status !== 0) throw new Error(`vite build: exit ${r.status}\n${r.stdout}${r.stderr}`);
      return r.stderr.split('\n').filter((l) => l.trim());
    },
  },
  webpack: {
    dist: join(app, 'dist/webpack'),
    async build() {
      const webpack = createRequire(join(BUNDLER, 'package.json'))('webpack');
      const config = (await import(pathToFileURL(join(app, 'webpack.config.js')).href)).default;
      const stats = await new Promise((resolve, reject) =>
        webpack({ ...config, context: app }, (err, s) => (err ? reject(err) : resolve(s))),
      );
      const { errors, warnings } = stats.toJson({ all: false, errors: true, warnings: true });
      if (errors.length) throw new Error(errors.map((e) => e.message).join('\n'));
      // webpack writes no page: the app's is one script tag.
      writeFileSync(
        join(this.dist, 'index.html'),
        '<!doctype html><meta charset="utf-8"><title>st5 bundled by webpack</title><body><script src="main.js"></script>',
      );
      return warnings.map((w) => w.message);
    },
  },
};

const browser = await launch();
const servers = [];
const pages = {};

/** The built app's page for `bundler`, opened once its build case has passed. */
function pageOf(bundler) {
  if (!pages[bundler]) throw new Error(`the ${bundler} build failed`);
  return pages[bundler];
}

const cases = Object.entries(BUILDS).flatMap(([name, bundler]) => [
  [
    `${name}_builds_the_app_without_warnings`,
    async () => {
      const warnings = await bundler.build();
      if (warnings.length) throw new Error(`warnings:\n${warnings.join('\n')}`);
      const files = filesUnder(bundler.dist);
      const server = await serve({ '/': bundler.dist, '/models/': FIXTURES });
      servers.push(server);
      const context = await browser.newContext();
      pages[name] = { ...(await open(context, `${server.url}/`)), server, dist: bundler.dist };
      const wasm = files.filter((f) => f.endsWith('.wasm')).length;
      return `${files.length} files (${wasm} .wasm, ${files.filter((f) => f.endsWith('.js')).length} .js)`;
    },
  ],
  [
    `${name}_bundle_embeds_on_the_cpu_matching_reference`,
    async () => {
      const { page, server, dist } = pageOf(name);
      const r = await page.evaluate(
        async ({ url, texts }) => {
          const m = await st5.load(url, { device: 'cpu', threads: 1 });
          const rows = (await m.embed(texts)).map((x) => Array.from(x));
          const device = m.device;
          await m.dispose();
          return { rows, device };
        },
        { url: `/models/${ST}/`, texts: st.sentences },
      );
      const err = maxAbsDiff(r.rows, want);
      if (r.device !== 'cpu' || !(err <= CPU_TOL)) throw new Error(`device ${r.device}, max abs error ${err}`);
      const modules = [...server.hits.keys()]
        .filter((p) => p.endsWith('.wasm'))
        .map((p) => (statSync(join(dist, p)).size === RELAXED_BYTES ? 'relaxed' : 'simd128'));
      return `${[...new Set(modules)].join(', ')} module; max abs error ${err.toExponential(2)}`;
    },
  ],
  [
    `${name}_bundle_worker_pool_is_bit_identical_to_one_thread`,
    async () => {
      const r = await pageOf(name).page.evaluate(
        async ({ url, texts }) => {
          const run = async (threads) => {
            const m = await st5.load(url, { device: 'cpu', batchSize: 2, threads });
            await m.embed(texts); // starts the workers; the page runs this call
            for (let i = 0; i < 1200 && m.threads < threads; i++) await new Promise((ok) => setTimeout(ok, 50));
            const out = { threads: m.threads, flat: Array.from(await m.embedFlat(texts)) };
            await m.dispose();
            return out;
          };
          return { one: await run(1), pool: await run(2) };
        },
        // 48 texts in batches of 2: with both workers loaded, each takes batches from the start.
        { url: `/models/${ST}/`, texts: [...st.sentences, ...st.sentences, ...st.sentences, ...st.sentences] },
      );
      const same = r.pool.flat.length === r.one.flat.length && r.pool.flat.every((x, i) => Object.is(x, r.one.flat[i]));
      if (r.pool.threads !== 2 || !same) throw new Error(`threads ${r.pool.threads}, bit-identical ${same}`);
      return `2 workers, 48 texts in batches of at most 2: bit-identical to one thread`;
    },
  ],
  [
    `${name}_bundle_search_index_f32_and_int8_rescored_from_opfs`,
    async () => {
      const r = await pageOf(name).page.evaluate(
        async ({ url, texts, queries }) => {
          const m = await st5.load(url, { device: 'cpu', threads: 1 });
          const out = [];
          for (const quantize of ['none', 'int8']) {
            const index = await st5.createIndex(m, { device: 'cpu', quantize });
            await index.add(texts);
            const tops = [];
            for (const i of queries) tops.push((await index.search(texts[i], 1)).hits[0]);
            out.push({ quantize, rescore: index.rescore, tops });
            index.dispose();
          }
          await m.dispose();
          return out;
        },
        // Distinct texts only: '' and '   ' may embed alike, and a tie goes to the lower id.
        { url: `/models/${ST}/`, texts: st.sentences, queries: [0, 3, 7, 9, 11] },
      );
      for (const { quantize, tops } of r) {
        const wrong = tops.filter((h, j) => h.id !== [0, 3, 7, 9, 11][j] || !(h.score > 0.999));
        if (wrong.length) throw new Error(`${quantize}: ${JSON.stringify(wrong)}`);
      }
      if (r[1].rescore !== 'opfs') throw new Error(`int8 rescored from ${r[1].rescore}`);
      return `f32 and int8 (rescore ${r[1].rescore}): every query's own text is its top hit`;
    },
  ],
  [
    `${name}_bundle_recovers_from_a_trap_on_a_fresh_instance`,
    async () => {
      const r = await pageOf(name).page.evaluate(
        async ({ url, texts }) => {
          const m = await st5.load(url, { device: 'cpu', threads: 1 });
          const trap = await m[Symbol.for('st5.panicForTest')]().then(
            () => 'none',
            (e) => e.code,
          );
          const rows = (await m.embed(texts)).map((x) => Array.from(x));
          await m.dispose();
          return { trap, rows };
        },
        { url: `/models/${ST}/`, texts: st.sentences },
      );
      const err = maxAbsDiff(r.rows, want);
      if (r.trap !== 'internal' || !(err <= CPU_TOL)) throw new Error(`trap ${r.trap}, then max abs error ${err}`);
      return `an 'internal' error, then the glue imported again: max abs error ${err.toExponential(2)}`;
    },
  ],
]);

const failed = await runCases(cases);
for (const { logs } of Object.values(pages)) if (failed) console.log(logs.slice(-10).join('\n'));
await browser.close();
await Promise.all(servers.map((s) => s.close()));
process.exit(failed ? 1 : 0);
