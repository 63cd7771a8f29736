// Peak memory of loading a model in the browser: the renderer process's peak resident set
// (Linux VmHWM: JS heap, wasm memory and everything else the page holds) while the npm package
// fetches a model from a URL and loads it on the CPU path (one thread, no worker copies), beside
// the weight files' size. Run it against two builds of pkg/ (before and after a change) to
// compare; the figure is what a user's tab costs, not a test assertion.
//
//   bash pkg/build.sh && (cd tests/browser && npm ci)
//   node tests/browser/load-memory.mjs [--model DIR] [--repeats 3]
//
// DIR defaults to /tmp/st5-bench-base, the sentence-t5-base-sized model of bench-peer.mjs.

import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { installPackage, launch, open, serve, writeIndexPage } from './harness.mjs';

const arg = (name, dflt) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : dflt;
};
const modelDir = arg('--model', '/tmp/st5-bench-base');
const repeats = Number(arg('--repeats', 3));
const mib = (bytes) => (bytes / 2 ** 20).toFixed(0);

/** Bytes of every `.safetensors` file under `dir`. */
function weightBytes(dir) {
  let n = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory())
      n += e.name.startsWith('_') ? 0 : weightBytes(p); // _hf: bench-peer's copy
    else if (e.name.endsWith('.safetensors')) n += statSync(p).size;
  }
  return n;
}

/** Linux `/proc/PID/status` fields in bytes, for every Chromium renderer process now running. */
function renderers() {
  const out = new Map();
  for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      if (!cmd.includes('--type=renderer')) continue;
      const status = readFileSync(`/proc/${pid}/status`, 'utf8');
      const kb = (field) => Number(status.match(new RegExp(`^${field}:\\s+(\\d+)`, 'm'))?.[1] ?? 0) * 1024;
      out.set(pid, { hwm: kb('VmHWM'), rss: kb('VmRSS') });
    } catch {
      // the process ended between listing and reading
    }
  }
  return out;
}

const { app } = installPackage();
writeIndexPage(app);
const server = await serve({ '/': app, '/model/': modelDir });
console.log(`model ${modelDir}: weight files ${mib(weightBytes(modelDir))} MiB`);
const peaks = [];
for (let r = 0; r < repeats; r++) {
  const before = new Set(renderers().keys());
  const browser = await launch();
  const context = await browser.newContext();
  await context.addInitScript((c) => (globalThis.__cache = c), process.argv.includes('--no-cache') ? false : true);
  const { page } = await open(context, `${server.url}/`);
  // The module compiled and instantiated first, so that the figure is the load's own.
  await page.evaluate(async () => (await import('/node_modules/st5/runtime.js')).wasm());
  const ours = [...renderers()].filter(([pid]) => !before.has(pid));
  const baseline = Math.max(...ours.map(([, m]) => m.rss));
  const { dim, wasmBytes } = await page.evaluate(async () => {
    const model = await window.st5.load('/model/', { device: 'cpu', threads: 1, cache: globalThis.__cache ?? true });
    const e = await model.embed(['one sentence to embed']);
    // The package's own module instance (same URL), whose linear memory only grows: its size
    // now is the most the wasm side held at once.
    const runtime = await import('/node_modules/st5/runtime.js');
    await runtime.wasm();
    return { dim: e[0].length, wasmBytes: runtime.wasmMemoryBytes() };
  });
  const now = renderers();
  const peak = Math.max(...ours.map(([pid]) => now.get(pid)?.hwm ?? 0));
  peaks.push(peak - baseline);
  console.log(
    `run ${r + 1}: dim ${dim}; renderer peak ${mib(peak)} MiB, ${mib(peak - baseline)} MiB above the page before loading; wasm memory ${mib(wasmBytes)} MiB`,
  );
  await browser.close();
}
peaks.sort((a, b) => a - b);
console.log(`median peak above the page: ${mib(peaks[Math.floor(peaks.length / 2)])} MiB`);
await server.close();
