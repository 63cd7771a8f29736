// The npm package's core paths, run inside the page of any browser engine: the drivers in
// engines.test.mjs (Chromium through Playwright, Firefox through WebDriver BiDi, WebKit through
// classic WebDriver) only open engines.html and read `window.__st5Report` back, so every engine
// runs the same cases with the same checks. Each case returns a note (what the engine chose and
// the figures) or throws.
//
// Served by engines.test.mjs: the installed package under /node_modules/st5/ (engines.html maps
// 'st5' to it), the reference fixtures under /models/, the built-in default under /shipped/.

import * as st5 from 'st5';

const CPU_TOL = 1e-5; // the CPU path against the Python reference, as in npm.test.mjs
const FIXTURE = 'st-enc-mean-relu';
const params = new URLSearchParams(location.search);
const DEFAULT = params.get('default');

const json = async (url) => {
  const res = await fetch(url);
  if (!res.ok) throw new Error(`${url}: HTTP ${res.status}`);
  return res.json();
};

function maxAbsDiff(rows, want) {
  let err = 0;
  want.forEach((row, i) => row.forEach((w, j) => (err = Math.max(err, Math.abs(rows[i][j] - w)))));
  return err;
}

/** The least cosine between corresponding rows. */
function leastCosine(rows, want) {
  let least = 1;
  rows.forEach((row, i) => {
    let [dot, a, b] = [0, 0, 0];
    row.forEach((x, j) => {
      dot += x * want[i][j];
      a += x * x;
      b += want[i][j] * want[i][j];
    });
    least = Math.min(least, dot / Math.sqrt(a * b));
  });
  return least;
}

// The int8 case's rows, handed back with the report.
let int8Rows = null;

const sameBits = (a, b) => a.length === b.length && a.every((row, i) => row.every((x, j) => Object.is(x, b[i][j])));

/** Embeds `texts` with a fresh model from `url`, disposes it, and returns rows and facts. */
async function embedOnce(url, options, texts, loader = st5.load) {
  const m = await loader(url, options);
  try {
    const rows = (await m.embed(texts)).map((r) => Array.from(r));
    return { rows, device: m.device, threads: m.threads };
  } finally {
    await m.dispose();
  }
}

/** What this engine offers the package, as the package's own probes see it. */
async function features() {
  const { wasmFlavor } = await import('/node_modules/st5/runtime.js');
  const adapter = await navigator.gpu?.requestAdapter().catch(() => null);
  let opfs = false;
  try {
    opfs = typeof (await navigator.storage?.getDirectory?.()) === 'object';
  } catch {
    // refused (no OPFS here)
  }
  return {
    module: wasmFlavor(),
    webgpu: adapter ? (adapter.info?.isFallbackAdapter ? 'software adapter' : 'hardware adapter') : 'none',
    opfs,
    cores: navigator.hardwareConcurrency,
  };
}

const cases = {
  async cpu_load_matches_reference(want) {
    const r = await embedOnce(`/models/${FIXTURE}/`, { threads: 1 }, want.fixture.sentences);
    const err = maxAbsDiff(r.rows, want.fixture.embeddings['enc-mean']);
    if (r.device !== 'cpu' || !(err <= CPU_TOL)) throw new Error(`device ${r.device}, max abs error ${err}`);
    return `device 'auto' took ${r.device}; max abs error ${err.toExponential(2)}`;
  },

  async built_in_default_matches_reference(want) {
    // The reference computes in f32 on the dequantized int8 weights: so does `compute: 'f32'`.
    const r = await embedOnce('/shipped/', { threads: 1, compute: 'f32' }, want.shipped.sentences);
    const err = maxAbsDiff(r.rows, want.shipped.embeddings['enc-mean']);
    if (!(err <= CPU_TOL)) throw new Error(`max abs error ${err}`);
    return `${DEFAULT} on ${r.device}: max abs error ${err.toExponential(2)}`;
  },

  // The default is int8, so the CPU computes it in int8 (st5-core's int8.rs): within cosine 0.98
  // of the f32 computation (0.982 natively for the BERT default, whose outlier channels are coarse
  // in 7-bit activation rows; tests/quant.rs). The int8 products are the same on both modules (7-bit activation
  // codes on both, so the relaxed and the SIMD128 kernels compute the same dot products), but the
  // f32 parts between them (attention) differ as the f32 path does: engines.test.mjs compares the
  // rows across engines (the same bits on one module, a bound across the two).
  async int8_compute_tracks_f32(want) {
    const m = await st5.load('/shipped/', { device: 'cpu', threads: 1 });
    try {
      const rows = (await m.embed(want.shipped.sentences)).map((r) => Array.from(r));
      int8Rows = rows;
      if (m.arithmetic !== 'int8') throw new Error(`arithmetic ${m.arithmetic}, not int8`);
      const least = leastCosine(rows, want.shipped.embeddings['enc-mean']);
      if (!(least >= 0.98)) throw new Error(`least cosine to the f32 computation ${least}`);
      return `int8 arithmetic, ${(m.weightBytes / 2 ** 20).toFixed(1)} MiB of weights; least cosine to the f32 computation ${least.toFixed(6)}`;
    } finally {
      await m.dispose();
    }
  },

  async worker_pool_is_bit_identical_to_one_thread(want) {
    const texts = want.fixture.sentences;
    const one = await embedOnce(`/models/${FIXTURE}/`, { device: 'cpu', threads: 1 }, texts);
    const m = await st5.load(`/models/${FIXTURE}/`, { device: 'cpu', threads: 2, batchSize: 2 });
    try {
      await m.embed(texts); // starts the workers; the page runs batches until they have loaded
      for (let i = 0; i < 1200 && m.threads < 2; i++) await new Promise((ok) => setTimeout(ok, 50));
      const rows = (await m.embed(texts)).map((r) => Array.from(r));
      if (m.threads !== 2) throw new Error(`${m.threads} threads running, not 2`);
      if (!sameBits(rows, one.rows)) throw new Error(`pool differs from one thread by ${maxAbsDiff(rows, one.rows)}`);
      return `2 workers, ${Math.ceil(texts.length / 2)} batches of 2: bit-identical to one thread`;
    } finally {
      await m.dispose();
    }
  },

  async load_in_worker_matches_reference(want) {
    const url = new URL(`/models/${FIXTURE}/`, location.href).href;
    const r = await embedOnce(url, { threads: 1 }, want.fixture.sentences, st5.loadInWorker);
    const err = maxAbsDiff(r.rows, want.fixture.embeddings['enc-mean']);
    if (!(err <= CPU_TOL)) throw new Error(`max abs error ${err}`);
    return `a module Worker on ${r.device}: max abs error ${err.toExponential(2)}`;
  },

  async index_searches_saves_reopens_and_imports(want) {
    const docs = want.shipped.sentences;
    const m = await st5.load('/shipped/', { threads: 1 });
    try {
      const name = `engines-${Date.now()}`;
      const top = async (index) => (await index.search(docs[0], 3)).hits.map((h) => h.id);
      const first = await st5.openIndex(m, docs, { name });
      const reopened = await st5.openIndex(m, docs, { name });
      const imported = await st5.importIndex(m, await first.index.export());
      const int8 = await st5.createIndex(m, { quantize: 'int8' });
      await int8.add(docs);
      const tops = [await top(first.index), await top(reopened.index), await top(imported), await top(int8)];
      if (first.restored !== 0 || reopened.restored !== docs.length)
        throw new Error(`restored ${first.restored} then ${reopened.restored} of ${docs.length}`);
      if (!tops.every((t) => t[0] === 0 && t.join() === tops[0].join()))
        throw new Error(`top hits ${JSON.stringify(tops)}`);
      return `f32 on ${first.index.device}, saved to IndexedDB and reopened without embedding, exported and imported; int8 rescoring rows in ${int8.rescore}: same top 3`;
    } finally {
      await m.dispose();
    }
  },

  async bad_input_is_a_typed_error() {
    const errors = [];
    for (const attempt of [
      () => st5.load('/models/nope/', { cache: false }),
      async () => (await st5.load(`/models/${FIXTURE}/`, { threads: 1 })).embed(['ok', 3]),
    ]) {
      errors.push(
        await attempt().then(
          () => null,
          (e) => e,
        ),
      );
    }
    const [missing, notText] = errors;
    if (!missing?.message.includes('/models/nope/')) throw new Error(`missing model: ${missing?.message}`);
    if (!(notText instanceof TypeError)) throw new Error(`non-string text: ${notText}`);
    return `${missing.message} | ${notText.name}: ${notText.message}`;
  },
};

async function run() {
  const want = {
    fixture: await json(`/models/${FIXTURE}/expected.json`),
    shipped: await json(`/models/${DEFAULT}-expected.json`),
  };
  const report = { features: await features(), results: [] };
  const only = params.getAll('case');
  for (const [name, fn] of Object.entries(cases)) {
    if (only.length && !only.some((o) => name.includes(o))) continue;
    const t0 = performance.now();
    try {
      report.results.push({ name, ok: true, note: await fn(want), ms: performance.now() - t0 });
    } catch (err) {
      report.results.push({ name, ok: false, note: String(err?.stack ?? err), ms: performance.now() - t0 });
    }
  }
  report.int8Rows = int8Rows;
  return report;
}

run()
  .catch((err) => ({ error: String(err?.stack ?? err) }))
  .then((report) => {
    window.__st5Report = report;
  });
