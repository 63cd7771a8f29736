// Shared pieces of the browser tests and benchmarks: pack the npm package and install it into a
// scratch app, serve it and model directories from localhost (www/serve.mjs, which counts
// requests), and drive headless Chromium with WebGPU (SwiftShader) through playwright-core.

import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { serve } from '../../www/serve.mjs';

export { serve };

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
export const FIXTURES = join(ROOT, 'tests/fixtures');

// The flags from the field notes that give headless Chromium a WebGPU adapter (SwiftShader).
export const CHROMIUM_FLAGS = [
  '--no-sandbox',
  '--headless=new',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--enable-unsafe-webgpu',
  '--enable-features=Vulkan',
  '--disable-dev-shm-usage',
];

/** `npm pack`s pkg/ (which must be built) and installs the tarball into a fresh app folder. */
export function installPackage() {
  if (!existsSync(join(ROOT, 'pkg/wasm/st5_wasm_bg.wasm'))) {
    throw new Error('pkg/wasm is not built: run `bash pkg/build.sh` first');
  }
  const dir = mkdtempSync(join(tmpdir(), 'st5-app-'));
  const out = execFileSync('npm', ['pack', join(ROOT, 'pkg'), '--pack-destination', dir, '--json'], {
    encoding: 'utf8',
  });
  const tarball = JSON.parse(out)[0].filename;
  const app = join(dir, 'app');
  execFileSync('mkdir', ['-p', app]);
  writeFileSync(
    join(app, 'package.json'),
    JSON.stringify({ name: 'scratch', private: true, type: 'module', dependencies: { st5: `file:../${tarball}` } }),
  );
  execFileSync('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline'], { cwd: app, stdio: 'inherit' });
  return { app, tarball: join(dir, tarball) };
}

/** A plain-ESM page that imports the installed package by its name through an import map. */
export function writeIndexPage(app) {
  writeFileSync(
    join(app, 'index.html'),
    `<!doctype html><meta charset="utf-8"><title>st5 scratch app</title>
<script type="importmap">{ "imports": { "st5": "/node_modules/st5/index.js" } }</script>
<script type="module">import * as st5 from 'st5'; window.st5 = st5; document.body.dataset.ready = '1';</script>`,
  );
}

/** Headless Chromium from the system (never downloaded), with `extraArgs` after the usual flags. */
export function launch(extraArgs = []) {
  return chromium.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    headless: true,
    args: [...CHROMIUM_FLAGS, ...extraArgs],
  });
}

/** Opens `url` and waits for `document.body.dataset.ready`; console lines collect in `logs`. */
export async function open(context, url) {
  const page = await context.newPage();
  const logs = [];
  page.on('console', (m) => logs.push(`${m.type()}: ${m.text()}`));
  page.on('pageerror', (e) => logs.push(`pageerror: ${e.message}`));
  await page.goto(url);
  await page.waitForFunction(() => document.body?.dataset.ready === '1', null, { timeout: 60_000 });
  return { page, logs };
}

/** A fixture's reference sentences and embeddings, written by tests/reference/make_fixtures.py. */
export function expected(model) {
  return JSON.parse(readFileSync(join(FIXTURES, model, 'expected.json'), 'utf8'));
}

export function maxAbsDiff(rows, want) {
  let err = 0;
  want.forEach((row, i) => row.forEach((w, j) => (err = Math.max(err, Math.abs(rows[i][j] - w)))));
  return err;
}

/**
 * Runs named async cases, printing cargo-style lines so scripts/test.sh can total them.
 * `node X.test.mjs NAME...` runs only the cases whose names contain one of the arguments.
 */
export async function runCases(cases) {
  let passed = 0;
  let failed = 0;
  const only = process.argv.slice(2);
  const chosen = cases.filter(([name]) => !only.length || only.some((o) => name.includes(o)));
  for (const [name, fn] of chosen) {
    const t0 = Date.now();
    try {
      const note = await fn();
      console.log(`test ${name} ... ok (${((Date.now() - t0) / 1000).toFixed(1)} s)${note ? `: ${note}` : ''}`);
      passed++;
    } catch (err) {
      console.log(`test ${name} ... FAILED\n${err?.stack ?? err}`);
      failed++;
    }
  }
  console.log(
    `\ntest result: ${failed ? 'FAILED' : 'ok'}. ${passed} passed; ${failed} failed; 0 ignored; 0 measured; ${cases.length - chosen.length} filtered out`,
  );
  return failed;
}

/** True when the page's WebGPU adapter is a software one (SwiftShader here) or there is none:
 * where the package's `device: 'auto'` takes the CPU. */
export function softwareAdapter(page) {
  return page.evaluate(async () => (await navigator.gpu?.requestAdapter())?.info.isFallbackAdapter ?? true);
}
