// The npm package in three browser engines: Chromium (Playwright), Firefox (puppeteer-core over
// WebDriver BiDi) and WebKit, Safari's engine (WebKitGTK's MiniBrowser over classic WebDriver,
// under Xvfb: it has no headless mode). Each opens the same page of the packed, installed
// package, which runs engines/cases.js (load and CPU parity, the built-in default, the worker
// pool, a module Worker, the index saved, reopened and imported, typed errors) and leaves a
// report; then the demo page (www/, on the installed package) with engines/demo.js acting as a
// person would: files dropped, searched, a reload restoring them from OPFS; a screenshot. This
// file prints the reports as cargo-style test lines, and what the engine offered (the wasm module
// it validated, WebGPU, OPFS, cores).
//
//   node tests/browser/engines.test.mjs [firefox|webkit|chromium] [CASE...]
// (after `bash pkg/build.sh`; scripts/setup-test.sh installs firefox-esr, webkit2gtk-driver and
// xvfb; an engine that is not installed is reported as skipped.) No browser is ever downloaded.

import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import puppeteer from 'puppeteer-core';
import { DEFAULT_MODEL } from '../../www/serve.mjs';
import { FIXTURES, ROOT, installPackage, launch, maxAbsDiff, runCases, serve } from './harness.mjs';

const MINIBROWSER = '/usr/lib/x86_64-linux-gnu/webkit2gtk-4.1/MiniBrowser';
// One engine's run: the page loads two models several times on two loaded cores.
const REPORT_TIMEOUT_MS = 15 * 60_000;

/** A free TCP port on 127.0.0.1. */
function freePort() {
  return new Promise((ok, fail) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => ok(port));
    });
    s.on('error', fail);
  });
}

/** Starts `cmd` in the background; the returned function stops it. */
function background(cmd, args, env = {}) {
  const child = spawn(cmd, args, { env: { ...process.env, ...env }, stdio: 'ignore' });
  return () => child.kill();
}

/** Calls until `fn` resolves to something other than null/undefined, or fails after `ms`. */
async function poll(fn, ms, what) {
  const end = Date.now() + ms;
  for (;;) {
    const value = await fn().catch(() => null);
    if (value != null) return value;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((ok) => setTimeout(ok, 500));
  }
}

const REPORT = 'return window.__st5Report ?? null';

/** Each engine: the binary it needs, and how to open a URL and read an expression back. */
const ENGINES = {
  chromium: {
    binary: process.env.CHROMIUM ?? '/usr/bin/chromium',
    async open(url) {
      const browser = await launch();
      const page = await browser.newPage();
      await page.goto(url);
      return {
        read: () => page.evaluate(REPORT.replace('return ', '')),
        goto: (u) => page.goto(u),
        screenshot: (path) => page.screenshot({ path, fullPage: true }),
        close: () => browser.close(),
      };
    },
  },
  firefox: {
    binary: '/usr/bin/firefox-esr',
    async open(url) {
      const browser = await puppeteer.launch({
        browser: 'firefox',
        executablePath: this.binary,
        headless: true,
        protocol: 'webDriverBiDi',
      });
      const page = await browser.newPage();
      await page.goto(url);
      return {
        read: () => page.evaluate(REPORT.replace('return ', '')),
        goto: (u) => page.goto(u),
        screenshot: (path) => page.screenshot({ path, fullPage: true }),
        close: () => browser.close(),
      };
    },
  },
  webkit: {
    binary: MINIBROWSER,
    async open(url) {
      if (!existsSync('/usr/bin/WebKitWebDriver') || !existsSync('/usr/bin/Xvfb'))
        throw new Error('WebKitWebDriver or Xvfb missing (apt-get install webkit2gtk-driver xvfb)');
      const display = `:${90 + (process.pid % 100)}`;
      const port = await freePort();
      const stops = [background('Xvfb', [display, '-screen', '0', '1280x1024x24'])];
      stops.push(background('WebKitWebDriver', [`--port=${port}`], { DISPLAY: display }));
      const base = `http://127.0.0.1:${port}`;
      const call = async (method, path, body) => {
        const res = await fetch(base + path, {
          method,
          headers: { 'content-type': 'application/json' },
          body: body && JSON.stringify(body),
        });
        const { value } = await res.json();
        if (!res.ok) throw new Error(`WebDriver ${method} ${path}: ${value?.message ?? res.status}`);
        return value;
      };
      const capabilities = {
        alwaysMatch: {
          browserName: 'MiniBrowser',
          'webkitgtk:browserOptions': { binary: this.binary, args: ['--automation'] },
        },
      };
      const { sessionId } = await poll(() => call('POST', '/session', { capabilities }), 30_000, 'WebKitWebDriver');
      const session = `/session/${sessionId}`;
      await call('POST', `${session}/url`, { url });
      return {
        read: () => call('POST', `${session}/execute/sync`, { script: REPORT, args: [] }),
        goto: (u) => call('POST', `${session}/url`, { url: u }),
        screenshot: async (path) =>
          writeFileSync(path, Buffer.from(await call('GET', `${session}/screenshot`), 'base64')),
        close: async () => {
          await call('DELETE', session).catch(() => {});
          stops.forEach((stop) => stop());
        },
      };
    },
  },
};

const args = process.argv.slice(2);
const chosen = Object.keys(ENGINES).filter((e) => args.includes(e));
const engines = chosen.length ? chosen : Object.keys(ENGINES);
const caseArgs = args.filter((a) => !ENGINES[a]);

const { app } = installPackage();
writeFileSync(
  join(app, 'engines.html'),
  `<!doctype html><meta charset="utf-8"><title>st5 in this engine</title>
<script type="importmap">{ "imports": { "st5": "/node_modules/st5/index.js" } }</script>
<script type="module" src="/cases/cases.js"></script>`,
);
// The demo page, as www/ serves it but on the installed package, with engines/demo.js beside
// its app.js to act as a person would.
const demoPage = join(app, 'demo.html');
writeFileSync(
  demoPage,
  readFileSync(join(ROOT, 'www/index.html'), 'utf8').replace(
    '</head>',
    '  <script type="module" src="/cases/demo.js"></script>\n</head>',
  ),
);
const server = await serve(
  {
    '/': app,
    '/models/': FIXTURES,
    '/models/default/': DEFAULT_MODEL,
    '/shipped/': DEFAULT_MODEL,
    '/pkg/': join(app, 'node_modules/st5'),
    '/demo/': join(ROOT, 'www'),
    '/cases/': join(ROOT, 'tests/browser/engines'),
  },
  { overlay: { '/demo/': demoPage } },
);
const SHOTS = mkdtempSync(join(tmpdir(), 'st5-engines-'));
const query = new URLSearchParams([['default', basename(DEFAULT_MODEL)], ...caseArgs.map((c) => ['case', c])]);
const url = `${server.url}/engines.html?${query}`;

let failed = 0;
// Each engine's int8-computed embeddings of the default model (the int8_compute case), by module.
const int8Runs = [];
for (const name of engines) {
  const engine = ENGINES[name];
  if (!existsSync(engine.binary)) {
    console.log(`skipped: ${name}: ${engine.binary} is not installed (bash scripts/setup-test.sh installs it)`);
    continue;
  }
  let report;
  const t0 = Date.now();
  const session = await engine.open(url).catch((err) => ({ error: err }));
  try {
    if (session.error) throw session.error;
    report = await poll(session.read, REPORT_TIMEOUT_MS, `${name}'s report`);
    // The demo page, first visit then a reload, in the same profile; each phase's report read
    // back as the cases' is.
    if (!caseArgs.length) {
      for (const phase of ['1', '2']) {
        await session.goto(`${server.url}/demo/?sample=0&phase=${phase}`);
        const demo = await poll(session.read, REPORT_TIMEOUT_MS, `${name}'s demo report`);
        report.results.push(...demo.results);
        if (phase === '1') {
          const shot = join(SHOTS, `demo-${name}.png`);
          await session.screenshot(shot).then(
            () => console.log(`screenshot: ${shot}`),
            (e) => console.log(`no screenshot from ${name}: ${e.message}`),
          );
        }
      }
    }
  } catch (err) {
    report = { ...report, error: String(err?.stack ?? err) };
    (report.results ??= []).push({ name: 'page', ok: false, note: report.error, ms: 0 });
  } finally {
    await session.close?.().catch(() => {});
  }
  const f = report.features;
  console.log(
    f
      ? `${name}: ${f.module} module, WebGPU ${f.webgpu}, OPFS ${f.opfs ? 'yes' : 'no'}, ${f.cores} cores (${((Date.now() - t0) / 1000).toFixed(0)} s)`
      : `${name}: no report`,
  );
  const results = report.results ?? [{ name: 'page', ok: false, note: report.error }];
  if (report.int8Rows) int8Runs.push({ engine: name, module: f.module, rows: report.int8Rows });
  failed += await runCases(
    results.map((r) => [
      `${name}_${r.name}`,
      async () => {
        if (!r.ok) throw new Error(r.note);
        return `${r.note} (${(r.ms / 1000).toFixed(1)} s in the page)`;
      },
    ]),
  );
}
// int8 compute across engines: the same bits wherever the same module runs; between the relaxed
// and the SIMD128 module, whose f32 parts differ as on the f32 path, within INT8_ACROSS_MODULES.
// A BERT default's hidden states are larger and more varied than a Sentence-T5 model's, so an f32
// difference in the last bit (the relaxed module's f32 products) can move a 7-bit activation code
// by one step: all-MiniLM-L6-v2 measured 1.01e-3 uncalibrated and 4.76e-3 calibrated (WebKit's
// SIMD128 module against Chromium's relaxed one, one run each; which row flips is chance); the
// Sentence-T5 models stay within 1e-5.
const DEFAULT_FAMILY = JSON.parse(readFileSync(join(DEFAULT_MODEL, 'config.json'), 'utf8')).model_type;
const INT8_ACROSS_MODULES = DEFAULT_FAMILY === 'bert' ? 1e-2 : 1e-5;
if (int8Runs.length > 1)
  failed += await runCases([
    [
      'int8_compute_agrees_across_engines',
      async () => {
        const [first, ...rest] = int8Runs;
        const notes = [];
        for (const run of rest) {
          const err = maxAbsDiff(run.rows, first.rows);
          const same = run.rows.every((row, i) => row.every((x, j) => Object.is(x, first.rows[i][j])));
          const what = `${run.engine} (${run.module}) vs ${first.engine} (${first.module})`;
          if (run.module === first.module ? !same : !(err <= INT8_ACROSS_MODULES))
            throw new Error(`${what}: max abs difference ${err}`);
          notes.push(`${what}: ${same ? 'identical' : `max abs difference ${err.toExponential(2)}`}`);
        }
        return notes.join('; ');
      },
    ],
  ]);
await server.close();
process.exit(failed ? 1 : 0);
