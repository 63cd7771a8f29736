// The demo page: load a model in a worker, index a corpus on the GPU, search as you type.
// `window.st5demo` exposes counters for the browser test (texts embedded, vectors restored).

import { importIndex, loadInWorker, openIndex } from 'st5';

const $ = (id) => document.getElementById(id);
const demo = (window.st5demo = { embeddedTexts: 0, restored: 0, model: null, index: null });
let model = null;
let index = null;

// --- model -------------------------------------------------------------------------------

function setBackend() {
  $('backend').textContent = model
    ? `Backend: ${model.device === 'webgpu' ? 'WebGPU' : 'CPU'} · model dim ${model.dim} · index on ${index?.device ?? '—'}`
    : 'Backend: not loaded';
  $('webgpu-notice').hidden = !model || model.device === 'webgpu';
}

async function loadModel(source, label) {
  $('index-button').disabled = true;
  $('load-status').textContent = `Loading ${label}…`;
  const bar = $('load-progress');
  bar.value = 0;
  await model?.dispose();
  index?.dispose();
  index = null;
  try {
    model = await loadInWorker(source, {
      onProgress: (e) => {
        if (e.stage === 'download' && e.overallTotal) bar.value = e.overallLoaded / e.overallTotal;
        if (e.stage === 'init') $('load-status').textContent = 'Initialising the model…';
      },
    });
  } catch (err) {
    model = null;
    $('load-status').textContent = `Could not load ${label}: ${err.message}`;
    setBackend();
    return;
  }
  // Count every text the page embeds, so a restored index shows as zero.
  const embedFlat = model.embedFlat.bind(model);
  model.embedFlat = (texts) => ((demo.embeddedTexts += texts.length), embedFlat(texts));
  demo.model = model;
  bar.value = 1;
  $('load-status').textContent = `Loaded ${label}.`;
  $('index-button').disabled = false;
  $('import-file').disabled = false;
  setBackend();
}

$('model-form').addEventListener('submit', (e) => {
  e.preventDefault();
  loadModel($('model-url').value, $('model-url').value);
});
$('model-files').addEventListener(
  'change',
  (e) => e.target.files.length && loadModel(e.target.files, 'the picked folder'),
);
document.addEventListener('dragover', (e) => (e.preventDefault(), document.body.classList.add('dragging')));
document.addEventListener('dragleave', () => document.body.classList.remove('dragging'));
document.addEventListener('drop', (e) => {
  e.preventDefault();
  document.body.classList.remove('dragging');
  if (e.dataTransfer.files.length) loadModel([...e.dataTransfer.files], 'the dropped files');
});

// --- corpus ------------------------------------------------------------------------------

/** Splits a CSV line respecting double quotes. */
function csvFields(line) {
  const out = [];
  let cur = '';
  let quoted = false;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (quoted && c === '"' && line[i + 1] === '"') ((cur += '"'), i++);
    else if (c === '"') quoted = !quoted;
    else if (c === ',' && !quoted) (out.push(cur), (cur = ''));
    else cur += c;
  }
  out.push(cur);
  return out;
}

/** Documents from an uploaded file: lines, a CSV column, or a JSONL field. */
function documents(name, text, field) {
  const lines = text.split(/\r?\n/).filter((l) => l.trim());
  if (name.endsWith('.jsonl')) {
    return lines.map((l, i) => {
      const v = JSON.parse(l)[field];
      if (typeof v !== 'string') throw new Error(`line ${i + 1} has no string field "${field}"`);
      return v;
    });
  }
  if (name.endsWith('.csv')) {
    const header = csvFields(lines[0]);
    const col = header.indexOf(field);
    if (col < 0) throw new Error(`no column "${field}" (columns: ${header.join(', ')})`);
    return lines.slice(1).map((l) => csvFields(l)[col] ?? '');
  }
  return lines;
}

$('corpus-file').addEventListener('change', async (e) => {
  const file = e.target.files[0];
  if (!file) return;
  try {
    $('corpus-input').value = documents(file.name, await file.text(), $('corpus-field').value).join('\n');
    $('index-status').textContent = `Read ${file.name}.`;
  } catch (err) {
    $('index-status').textContent = `Could not read ${file.name}: ${err.message}`;
  }
});

const corpus = () =>
  $('corpus-input')
    .value.split('\n')
    .map((l) => l.trim())
    .filter(Boolean);

/** What the searchable vectors take, e.g. "int8, 388 B a vector, rescored from OPFS". */
function footprint() {
  const perVector = index.size ? Math.round(index.bytes / index.size) : 0;
  const rescore = index.rescore ? `, rescored from ${index.rescore === 'opfs' ? 'OPFS' : 'memory'}` : '';
  return `${index.quantize === 'none' ? 'f32' : index.quantize}, ${perVector} B a vector${rescore}`;
}

function indexReady(note) {
  $('index-status').textContent = `${note.replace(/\.$/, '')} (${footprint()}).`;
  $('quantize-select').value = index.quantize;
  $('query-input').disabled = false;
  $('export-button').disabled = false;
  demo.index = index;
  setBackend();
  search();
}

$('index-button').addEventListener('click', async () => {
  const texts = corpus();
  $('index-button').disabled = true;
  $('index-status').textContent = `Indexing ${texts.length} documents…`;
  const bar = $('index-progress');
  bar.value = 0;
  index?.dispose();
  try {
    const r = await openIndex(model, texts, {
      name: 'demo',
      quantize: $('quantize-select').value,
      batchSize: 128,
      onProgress: ({ done, total, perSecond }) => {
        bar.value = done / total;
        $('index-status').textContent = `Embedded ${done} / ${total} (${perSecond.toFixed(1)} sentences/s)`;
      },
    });
    index = r.index;
    demo.restored = r.restored;
    bar.value = 1;
    const fresh = index.size - r.restored;
    indexReady(
      r.restored
        ? `Restored ${r.restored} vectors from this browser without embedding${fresh ? `; embedded ${fresh} new` : ''}.`
        : `Indexed ${index.size} documents${r.reason ? ` (saved index ${r.reason}, rebuilt)` : ''}.`,
    );
  } catch (err) {
    $('index-status').textContent = `Indexing failed: ${err.message}`;
  } finally {
    $('index-button').disabled = false;
  }
});

$('export-button').addEventListener('click', async () => {
  const a = document.createElement('a');
  a.href = URL.createObjectURL(await index.export());
  a.download = 'corpus.st5index';
  a.click();
  URL.revokeObjectURL(a.href);
});

$('import-file').addEventListener('change', async (e) => {
  const file = e.target.files[0];
  if (!file) return;
  try {
    index?.dispose();
    index = await importIndex(model, file);
    $('corpus-input').value = index.texts.join('\n');
    indexReady(`Imported ${index.size} vectors from ${file.name}.`);
  } catch (err) {
    $('index-status').textContent = `Could not import ${file.name}: ${err.message}`;
  }
});

// --- search ------------------------------------------------------------------------------

let pending = 0;
async function search() {
  const q = $('query-input').value.trim();
  const k = Math.max(1, Math.min(100, Number($('k-input').value) || 5));
  if (!index || !q) return;
  const ticket = ++pending;
  const { hits, embedMs, searchMs } = await index.search(q, k);
  if (ticket !== pending) return; // a newer keystroke's results are on their way
  $('query-time').textContent =
    `${hits.length} results · query embedded in ${embedMs.toFixed(1)} ms · top-${k} over ${index.size} vectors in ${searchMs.toFixed(1)} ms (${index.device})`;
  $('results').dataset.query = q; // which query these results answer (for tests and screen readers)
  $('results').replaceChildren(
    ...hits.map((h) => {
      const li = document.createElement('li');
      li.dataset.testid = 'result';
      li.dataset.score = h.score.toFixed(6);
      const score = document.createElement('span');
      score.className = 'score';
      score.textContent = h.score.toFixed(3);
      li.append(score, h.text);
      return li;
    }),
  );
}
$('query-input').addEventListener('input', search);
$('k-input').addEventListener('change', search);

// --- start -------------------------------------------------------------------------------

setBackend();
const sample = await fetch('corpus/coco-captions.txt');
if (sample.ok) $('corpus-input').value = (await sample.text()).trim();
await loadModel($('model-url').value, 'the built-in default model');
document.body.dataset.ready = '1';
