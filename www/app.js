// The demo page: a person's own files (.txt, .md, .html) as documents of a collection (the
// package's `openCollection`): cut into passages, embedded here, searched by meaning, by words or
// both, filtered by kind with facet counts, the best passages shown with the query's words
// marked, and kept in OPFS across reloads. 3,000 COCO captions are the first visit's corpus
// (`?sample=0` leaves them out: the benchmarks open this page only for its routes).
// `window.st5demo` exposes what the browser test checks (texts embedded, documents restored).

import { createCollection, deleteCollection, load, openCollection, snippet } from 'st5';

const $ = (id) => document.getElementById(id);
const SCHEMA = {
  text: [{ name: 'title', boost: 2 }, { name: 'body' }],
  fields: [
    { name: 'name', type: 'string' },
    { name: 'kind', type: 'string' },
  ],
  // Headings and paragraphs are passages of their own.
  passages: 'paragraphs',
};
const KINDS = { caption: 'COCO captions', txt: 'text files', md: 'Markdown files', html: 'HTML files' };
const FILE_KINDS = { txt: 'txt', text: 'txt', md: 'md', markdown: 'md', html: 'html', htm: 'html' };
const SAMPLE_CHUNK = 250;
const FILE_CHUNK = 4;
const withSample = new URLSearchParams(location.search).get('sample') !== '0';
const demo = (window.st5demo = { embedded: [], restored: 0, model: null, collection: null, saved: null });
let model = null;
let col = null;
let kindTotals = new Map(); // kind → documents held
let unchecked = new Set(); // kinds the filter leaves out
let notKept = ''; // why the collection lives in memory only, where it does

// --- files to documents -------------------------------------------------------------------

const stem = (name) => name.replace(/\.[^.]+$/, '');
const squash = (text) => text.replace(/\s+/g, ' ').trim();

/** Markdown as the text a reader sees: headings and paragraphs on lines of their own, link
 * texts kept, markup dropped; the first heading is the title. */
function fromMarkdown(name, text) {
  let title = null;
  const lines = text
    .replace(/^---\n[\s\S]*?\n---\n/, '') // front matter
    .split('\n')
    .map((line) => {
      const heading = /^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
      if (heading) return ((title ??= heading[1]), heading[1]);
      return line
        .replace(/!\[[^\]]*\]\([^)]*\)/g, '')
        .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
        .replace(/\*\*(.+?)\*\*|__(.+?)__/g, '$1$2')
        .replace(/`([^`]+)`/g, '$1')
        .replace(/^\s*(?:[-*+]|\d+[.)])\s+/, '')
        .replace(/^\s*>\s?/, '')
        .replace(/^\s*```.*$/, '');
    });
  return {
    title: title ?? stem(name),
    body: lines
      .join('\n')
      .replace(/\n{3,}/g, '\n\n')
      .trim(),
  };
}

/** HTML as its headings and paragraphs (each block's text on its own), scripts and styles left
 * out; the title is the page's <title> or its first <h1>. */
function fromHtml(name, text) {
  const doc = new DOMParser().parseFromString(text, 'text/html');
  doc.querySelectorAll('script, style, noscript, template, svg').forEach((e) => e.remove());
  const BLOCKS = 'h1, h2, h3, h4, h5, h6, p, li, pre, blockquote, dt, dd, figcaption, caption, td, th';
  const parts = [];
  for (const el of doc.body?.querySelectorAll(BLOCKS) ?? []) {
    if (el.parentElement?.closest(BLOCKS)) continue; // its text is in the block around it
    const t = squash(el.textContent);
    if (t) parts.push(t);
  }
  if (!parts.length) parts.push(squash(doc.body?.textContent ?? ''));
  const title = squash(doc.title) || squash(doc.querySelector('h1')?.textContent ?? '') || stem(name);
  return { title, body: parts.join('\n\n') };
}

/** A dropped file as a document, or null if it is not text, Markdown or HTML. */
async function fileDocument(file) {
  const kind = FILE_KINDS[/\.([^.]+)$/.exec(file.name)?.[1].toLowerCase()];
  if (!kind) return null;
  const text = (await file.text()).replace(/\r\n?/g, '\n');
  const parsed =
    kind === 'md'
      ? fromMarkdown(file.name, text)
      : kind === 'html'
        ? fromHtml(file.name, text)
        : { title: stem(file.name), body: text.trim() };
  return { id: `file:${file.name}`, ...parsed, name: file.name, kind };
}

// --- model and collection -----------------------------------------------------------------

function setBackend() {
  $('backend').textContent = model
    ? `Backend: ${model.device === 'webgpu' ? 'WebGPU' : 'CPU'} · model dim ${model.dim}`
    : 'Backend: not loaded';
  $('webgpu-notice').hidden = !model || model.device === 'webgpu';
}

function setBusy(busy) {
  for (const id of ['doc-files', 'export-button', 'reset-button']) $(id).disabled = busy || !col;
  $('query-input').disabled = !col;
}

/** The collection's name in OPFS: one per model, so that each keeps its own vectors. */
const collectionName = () => `demo-${model.fingerprint.replace(/[^\w.-]/g, '').slice(-32)}`;

/** Opens this model's saved collection (a new one on the first visit); one saved by another
 * version of the page is started again, and where OPFS is missing the collection lives in memory. */
async function openSaved() {
  const name = collectionName();
  notKept = '';
  try {
    return { collection: await openCollection(model, name, SCHEMA), note: '' };
  } catch (err) {
    if (err.code === 'model') {
      await deleteCollection(name);
      return {
        collection: await openCollection(model, name, SCHEMA),
        note: ` (the saved one was ${err.message.includes('schema') ? 'from another version of this page' : 'unreadable'}: started again)`,
      };
    }
    if (err.code !== 'storage') throw err;
    const why = /Origin Private File System/.test(err.message)
      ? 'this browser has no Origin Private File System'
      : err.message.replace(/^st5: /, '');
    notKept = `not kept in this browser (${why})`;
    return { collection: await createCollection(model, SCHEMA), note: '' };
  }
}

async function loadModel(source, label) {
  setBusy(true);
  $('load-status').textContent = `Loading ${label}…`;
  const bar = $('load-progress');
  bar.value = 0;
  await col?.dispose();
  col = null;
  await model?.dispose();
  try {
    model = await load(source, {
      startWorkers: true,
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
  // Log every text the page embeds (documents' passages and queries), so that a restored
  // collection shows as embedding none of its documents.
  const embedFlat = model.embedFlat.bind(model);
  model.embedFlat = (texts) => (demo.embedded.push(...texts), embedFlat(texts));
  demo.model = model;
  bar.value = 1;
  $('load-status').textContent = `Loaded ${label}.`;
  setBackend();
  const { collection, note } = await openSaved();
  col = demo.collection = collection;
  demo.restored = col.restored ?? 0;
  if (demo.restored) {
    $('index-progress').value = 1;
    await refresh(`Restored ${demo.restored} documents from this browser without embedding${note}.`);
  } else if (withSample) {
    await indexSample(note);
  } else {
    await refresh(`No documents yet${note}.`);
  }
}

// --- indexing -----------------------------------------------------------------------------

/** Upserts `docs` in chunks, with the progress bar. */
async function index(docs, chunk, label) {
  const bar = $('index-progress');
  bar.value = 0;
  const started = performance.now();
  let passages = 0;
  for (let i = 0; i < docs.length; i += chunk) {
    const part = docs.slice(i, i + chunk);
    passages += (await col.upsert(part)).passages;
    const done = i + part.length;
    bar.value = done / docs.length;
    const rate = done / ((performance.now() - started) / 1000);
    $('index-status').textContent =
      `${label}: ${done} / ${docs.length} documents, ${passages} passages (${rate.toFixed(1)} documents/s)…`;
  }
  await col.saved?.();
  return passages;
}

async function indexSample(note = '') {
  setBusy(true);
  const sample = await fetch('corpus/coco-captions.txt');
  const lines = sample.ok ? (await sample.text()).trim().split('\n') : [];
  const docs = lines.map((body, i) => ({ id: `coco:${i}`, body, name: 'COCO captions', kind: 'caption' }));
  try {
    await index(docs, SAMPLE_CHUNK, 'Indexing the sample');
    await refresh(`Indexed ${docs.length} sample documents${note}.`);
  } catch (err) {
    $('index-status').textContent = `Indexing failed: ${err.message}`;
  } finally {
    setBusy(false);
  }
}

async function addFiles(files) {
  if (!col) return;
  setBusy(true);
  try {
    const docs = (await Promise.all(files.map(fileDocument))).filter(Boolean);
    const skipped = files.length - docs.length;
    const passages = docs.length ? await index(docs, FILE_CHUNK, 'Indexing your files') : 0;
    await refresh(
      `Added ${docs.length} file${docs.length === 1 ? '' : 's'} (${passages} passages)` +
        (skipped ? `; skipped ${skipped} not .txt, .md or .html` : '') +
        '.',
    );
  } catch (err) {
    $('index-status').textContent = `Could not add the files: ${err.message}`;
  } finally {
    setBusy(false);
  }
}

/** The kinds' totals and the list of the person's files, read back from the collection. */
async function refresh(note) {
  const all = await col.search('', { mode: 'vector', k: 1, facets: ['kind'] });
  kindTotals = new Map(all.facets.kind);
  const files = col.size
    ? (await col.search('', { mode: 'vector', k: 10000, where: { not: { kind: 'caption' } } })).hits
    : [];
  $('files').replaceChildren(
    ...files
      .sort((a, b) => (a.document.name < b.document.name ? -1 : 1))
      .map((h) => {
        const li = document.createElement('li');
        li.dataset.testid = 'file';
        li.dataset.id = h.id;
        const remove = document.createElement('button');
        remove.type = 'button';
        remove.textContent = 'Remove';
        remove.setAttribute('aria-label', `Remove ${h.document.name}`);
        remove.addEventListener('click', async () => {
          col.remove(h.id);
          await col.saved?.();
          await refresh(`Removed ${h.document.name}.`);
        });
        li.append(
          `${h.document.name} (${KINDS[h.document.kind] ?? h.document.kind}, ${h.document.body.length} characters) `,
          remove,
        );
        return li;
      }),
  );
  const storage = col.storage
    ? ` · kept in this browser (${((col.storage.baseBytes + col.storage.logBytes) / 1024).toFixed(0)} KiB)`
    : ` · ${notKept || 'not kept in this browser'}`;
  $('index-status').textContent = `${note} ${col.size} documents, ${col.passages} passages${storage}.`;
  demo.saved = col.storage ?? null;
  drawFacets(null);
  setBusy(false);
  await search();
}

// --- search -------------------------------------------------------------------------------

/** The kind filter's checkboxes, each with the documents of that kind among the matches. */
function drawFacets(counts) {
  $('type-filters').replaceChildren(
    ...[...kindTotals.keys()].sort().map((kind) => {
      const label = document.createElement('label');
      const box = document.createElement('input');
      box.type = 'checkbox';
      box.value = kind;
      box.checked = !unchecked.has(kind);
      box.dataset.testid = `kind-${kind}`;
      box.addEventListener('change', () => {
        if (box.checked) unchecked.delete(kind);
        else unchecked.add(kind);
        search();
      });
      const n = counts ? (counts.get(kind) ?? 0) : kindTotals.get(kind);
      label.append(box, ` ${KINDS[kind] ?? kind} `);
      const count = document.createElement('span');
      count.className = 'count';
      count.dataset.testid = `count-${kind}`;
      count.textContent = String(n);
      label.append(count);
      return label;
    }),
  );
}

function passageElement(p) {
  const q = document.createElement('blockquote');
  q.className = 'passage';
  for (const piece of snippet(p)) {
    if (!piece.marked) q.append(piece.text);
    else {
      const mark = document.createElement('mark');
      mark.textContent = piece.text;
      q.append(mark);
    }
  }
  return q;
}

let pending = 0;
async function search() {
  const q = $('query-input').value.trim();
  const k = Math.max(1, Math.min(100, Number($('k-input').value) || 5));
  const mode = $('mode-select').value;
  if (!col || !q) {
    $('results').replaceChildren();
    $('query-time').textContent = '';
    return;
  }
  const ticket = ++pending;
  const kinds = [...kindTotals.keys()].filter((kind) => !unchecked.has(kind));
  const where = unchecked.size ? { kind: { in: kinds } } : undefined;
  const started = performance.now();
  const r = await col.search(q, { mode, k, where, facets: ['kind'], prefix: true });
  const ms = performance.now() - started;
  if (ticket !== pending) return; // a newer keystroke's results are on their way
  drawFacets(new Map(r.facets.kind));
  $('query-time').textContent =
    `${r.hits.length} of ${r.matched} matching documents · ${mode} · ${ms.toFixed(1)} ms over ${col.passages} passages`;
  $('results').dataset.query = q; // which query these results answer (for tests and screen readers)
  $('results').dataset.mode = mode;
  $('results').replaceChildren(
    ...r.hits.map((h) => {
      const li = document.createElement('li');
      li.dataset.testid = 'result';
      li.dataset.id = h.id;
      li.dataset.score = h.score.toFixed(6);
      const head = document.createElement('div');
      head.className = 'hit';
      const score = document.createElement('span');
      score.className = 'score';
      score.textContent = h.score.toFixed(3);
      const title = document.createElement('strong');
      title.textContent = h.document.title || '';
      const meta = document.createElement('span');
      meta.className = 'meta';
      meta.textContent = h.document.kind === 'caption' ? 'COCO caption' : h.document.name;
      head.append(score, title, ' ', meta);
      // The title is shown above; its passage only repeats it.
      li.append(
        head,
        ...h.passages
          .filter((p) => p.field !== 'title')
          .slice(0, 2)
          .map(passageElement),
      );
      return li;
    }),
  );
}
$('query-input').addEventListener('input', search);
$('k-input').addEventListener('change', search);
$('mode-select').addEventListener('change', search);

// --- controls -----------------------------------------------------------------------------

$('model-form').addEventListener('submit', (e) => {
  e.preventDefault();
  loadModel($('model-url').value, $('model-url').value);
});
$('model-files').addEventListener(
  'change',
  (e) => e.target.files.length && loadModel(e.target.files, 'the picked folder'),
);
$('doc-files').addEventListener('change', async (e) => {
  await addFiles([...e.target.files]);
  e.target.value = '';
});
document.addEventListener('dragover', (e) => (e.preventDefault(), document.body.classList.add('dragging')));
document.addEventListener('dragleave', () => document.body.classList.remove('dragging'));
document.addEventListener('drop', (e) => {
  e.preventDefault();
  document.body.classList.remove('dragging');
  if (e.dataTransfer.files.length) addFiles([...e.dataTransfer.files]);
});
$('export-button').addEventListener('click', async () => {
  const a = document.createElement('a');
  a.href = URL.createObjectURL(await col.export());
  a.download = 'st5-demo.st5index';
  a.click();
  URL.revokeObjectURL(a.href);
});
$('reset-button').addEventListener('click', async () => {
  setBusy(true);
  const name = col.name;
  await col.dispose();
  col = null;
  unchecked = new Set();
  if (name) await deleteCollection(name);
  const { collection, note } = await openSaved();
  col = demo.collection = collection;
  if (withSample) await indexSample(note);
  else await refresh(`Started again${note}.`);
});

// --- start --------------------------------------------------------------------------------

setBackend();
await loadModel($('model-url').value, 'the built-in default model');
document.body.dataset.ready = '1';
