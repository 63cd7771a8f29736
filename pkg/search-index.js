// Semantic search over a corpus: documents embedded by a model, their vectors kept on the GPU
// (the wasm `Index`: one matrix product per shard plus a top-k selection on the device), saved in
// IndexedDB keyed by the model's fingerprint and the corpus hash, exportable as a file in the
// ST5INDEX format `st5 index build` writes (st5_format::index_file, whose checks run here through
// wasm): a file built natively opens here, and one exported here opens in `st5 index query`.
// A quantized index (`quantize: 'int8' | 'binary'`) searches codes of 1 byte or 1 bit a
// dimension, then rescores `k × oversample` candidates exactly with their f32 vectors, which a
// row store keeps outside the searchable part (row-store.js: OPFS by default, or memory).
// Node has neither IndexedDB nor OPFS: there an index lives in memory, and `export` and
// `importIndex` keep it.

import { chooseDevice } from './devices.js';
import { absoluteUrl, fetchUrl } from './host.js';
import { sha256 } from './hashes.js';
import { generation, glue, guard, wasm } from './runtime.js';
import { createRowStore, opfsAvailable } from './row-store.js';

const DB = 'st5-index';
const STORE = 'indexes';
// The package's own format before ST5INDEX: still read, with a note to export again.
const LEGACY_MAGIC = 'ST5IDX1\n';
// Bytes read from a Blob, or handed to wasm, at a time: a large file never sits in memory twice.
const CHUNK = 16 * 2 ** 20;
// Candidates whose rescoring rows one read of the row store fetches (SearchIndex.searchVectors).
const RESCORE_BATCH = 16384;

const corpusHash = (texts) => sha256(new TextEncoder().encode(texts.join('\u0000')));
const bytesOf = (a) => new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
const vectorHash = (vectors) => sha256(bytesOf(vectors));
/** The checksum of a quantized index's codes: its words, then its scales. */
const codesHash = async (words, scales) => sha256(new Uint8Array(await new Blob([words, scales]).arrayBuffer()));
const QUANTIZE = ['none', 'int8', 'binary'];
const blobBytes = async (blob, start, end) => new Uint8Array(await blob.slice(start, end).arrayBuffer());
/** `bytes` in pieces of at most CHUNK bytes. */
function* chunks(bytes) {
  for (let at = 0; at < bytes.length; at += CHUNK) yield bytes.subarray(at, at + CHUNK);
}
/** Appends `items` to `array` in slices: a spread of a million arguments overflows the stack. */
function appendAll(array, items) {
  for (let at = 0; at < items.length; at += 8192) array.push(...items.slice(at, at + 8192));
}
const invalid = (message) => Object.assign(new Error(message), { code: 'model' });
/** Rethrows a wasm error (st5-format's name the file: "index file NAME: ...") as the package's
 * errors read: starting with st5:. */
const asPackageError = (e) => {
  if (e.code === 'model' && !e.message.startsWith('st5:')) e.message = `st5: ${e.message}`;
  throw e;
};
// Restores a checked record; a symbol, so that only this module's openIndex and importIndex call it.
const RESTORE = Symbol('restore');

function idb(op) {
  return new Promise((resolve, reject) => {
    if (!globalThis.indexedDB)
      throw new Error('st5: no IndexedDB here (Node.js has none): keep an index with export()');
    const open = indexedDB.open(DB, 1);
    open.onupgradeneeded = () => open.result.createObjectStore(STORE);
    open.onerror = () => reject(open.error);
    open.onsuccess = () => {
      const tx = open.result.transaction(STORE, 'readwrite');
      const req = op(tx.objectStore(STORE));
      tx.oncomplete = () => (open.result.close(), resolve(req.result));
      tx.onerror = () => (open.result.close(), reject(tx.error));
    };
  });
}

/** A searchable corpus. Ids are positions in `texts`. */
export class SearchIndex {
  #model;
  #wasmIndex;
  #generation = generation();
  #name;
  #rows;
  #oversample;
  /** The indexed documents, in id order. */
  texts = [];
  /** Texts embedded by this object so far (a restored index embeds none). */
  embedded = 0;

  constructor(model, index, name, rows = null, oversample = index.defaultOversample) {
    this.#model = model;
    this.#wasmIndex = index;
    this.#name = name;
    this.#rows = rows;
    this.#oversample = oversample;
  }

  /** The wasm index, unless the module it lived in has trapped since (its vectors went with it). */
  get #index() {
    if (this.#generation !== generation()) {
      throw Object.assign(new Error('st5: this index was lost when the wasm module trapped; open or import it again'), {
        code: 'internal',
      });
    }
    return this.#wasmIndex;
  }

  get size() {
    return this.#index.length;
  }
  /** Where the vectors live: `'webgpu'` or `'cpu'`. */
  get device() {
    return this.#index.device;
  }
  /** Device buffers the vectors occupy (more than one past the binding limit). */
  get shards() {
    return this.#index.shards;
  }
  /** How the searchable vectors are stored: `'none'` (f32), `'int8'` or `'binary'`. */
  get quantize() {
    return this.#index.quantize;
  }
  /** Bytes of the searchable part (device or wasm memory). */
  get bytes() {
    return this.#index.bytes;
  }
  /** Where a quantized index's f32 vectors for rescoring live: `'opfs'`, `'memory'`, or null. */
  get rescore() {
    return this.#rows?.kind ?? null;
  }

  /**
   * Embeds and adds the texts not already indexed. `onProgress({ done, total, perSecond })`
   * follows each batch.
   * @returns {Promise<{ added: number, ms: number }>}
   */
  async add(texts, { batchSize = 64, onProgress } = {}) {
    const known = new Set(this.texts);
    const fresh = [...new Set(texts)].filter((t) => !known.has(t));
    const t0 = performance.now();
    // `batchSize` texts per thread in each call, so that every worker of a CPU pool has batches.
    const step = batchSize * (this.#model.maxThreads ?? 1);
    for (let i = 0; i < fresh.length; i += step) {
      const batch = fresh.slice(i, i + step);
      const vectors = await this.#model.embedFlat(batch);
      await guard('SearchIndex.add', () => this.#index.add(vectors));
      await this.#rows?.append(vectors);
      this.texts.push(...batch);
      this.embedded += batch.length;
      const done = Math.min(i + step, fresh.length);
      onProgress?.({ done, total: fresh.length, perSecond: done / ((performance.now() - t0) / 1000) });
    }
    // Once per call, not per batch: releasing also empties the model's scratch buffers.
    this.#index.releaseMemory();
    return { added: fresh.length, ms: performance.now() - t0 };
  }

  /**
   * Adds precomputed vectors (row-major) for `texts`, without embedding. Searchable at once;
   * the promise settles when a quantized index's rescoring copy is written.
   */
  async addVectors(texts, vectors) {
    // Added before the first await: searchable at once. Guarded, as `add` is: wasm memory running
    // out (an f32 index of a million 384-wide vectors on the CPU) traps the module.
    await guard('SearchIndex.addVectors', () => {
      this.#index.add(vectors);
      appendAll(this.texts, texts);
    });
    this.#index.releaseMemory();
    await this.#rows?.append(vectors);
  }

  /**
   * The `k` documents closest to `query`, best first (ties to the lower id).
   * @returns {Promise<{ hits: { id: number, text: string, score: number }[], embedMs: number, searchMs: number }>}
   */
  async search(query, k = 10) {
    const t0 = performance.now();
    const vector = await this.#model.embedFlat([query]);
    const t1 = performance.now();
    const [hits] = await this.searchVectors(vector, k);
    return { hits, embedMs: t1 - t0, searchMs: performance.now() - t1 };
  }

  /**
   * Top-k for row-major query vectors: one hit list per query. A quantized index searches
   * `k × oversample` candidates on its codes, then orders them by their exact f32 scores.
   */
  async searchVectors(queries, k = 10) {
    const wanted = this.#rows ? k * this.#oversample : k;
    const found = await guard('SearchIndex.search', () => this.#index.search(queries, wanted));
    const dim = this.#index.dim;
    const q = queries.length / dim;
    const lists = [];
    // The rescoring rows of several queries are read in one call (RESCORE_BATCH candidates at
    // most, 24 MB at 384 dimensions), where the rows' worker merges their reads.
    const step = Math.max(1, Math.floor(RESCORE_BATCH / Math.max(1, found.k)));
    for (let first = 0; first < q; first += step) {
      const end = Math.min(q, first + step);
      const batch = this.#rows ? await this.#rows.rows(found.ids.subarray(first * found.k, end * found.k)) : null;
      for (let i = first; i < end; i++) {
        let { ids, scores, k: kk } = found;
        let at = i * kk;
        if (batch) {
          const from = (i - first) * kk;
          const query = queries.subarray(i * dim, (i + 1) * dim);
          const rows = batch.subarray(from * dim, (from + kk) * dim);
          ({ ids, scores, k: kk } = glue().Index.rescore(query, ids.slice(at, at + kk), rows, k));
          at = 0;
        }
        lists.push(
          Array.from({ length: kk }, (_, j) => ({
            id: ids[at + j],
            text: this.texts[ids[at + j]],
            score: scores[at + j],
          })),
        );
      }
    }
    return lists;
  }

  /** Every vector, row-major in id order (a quantized index's from its rescoring copy). */
  vectors() {
    if (this.#rows) return this.#rows.all();
    return guard('SearchIndex.vectors', () => this.#index.vectors());
  }

  async #record() {
    const vectors = await this.vectors();
    const record = {
      fingerprint: this.#model.fingerprint,
      corpus: await corpusHash(this.texts),
      dim: this.#index.dim,
      texts: this.texts,
      quantize: this.quantize,
      checksum: await vectorHash(vectors),
      vectors: vectors.buffer,
    };
    if (this.#rows) {
      // The codes as searched, so that a restored index needs no re-encoding.
      const { words, scales } = await guard('SearchIndex.codes', () => this.#index.codes());
      record.codesChecksum = await codesHash(words, scales);
      record.words = words.buffer;
      record.scales = scales.buffer;
    }
    return record;
  }

  /** Saves to IndexedDB under this index's name (replacing what was there). */
  async save() {
    const record = await this.#record();
    await idb((store) => store.put(record, this.#name));
  }

  /**
   * The index as one ST5INDEX file (st5_format::index_file), for `importIndex` and for
   * `st5 index query`: the head, a quantized index's codes as searched, the f32 vectors, the
   * texts and a checksum.
   */
  async export() {
    const g = glue();
    const dim = this.#index.dim;
    const vectors = await this.vectors();
    const { words, scales } = this.#rows ? await guard('SearchIndex.codes', () => this.#index.codes()) : {};
    const parts = await guard('SearchIndex.export', () => {
      // Finite rows of the right width, as the CLI's writer requires, handed to wasm in pieces.
      const rows = Math.max(1, Math.floor(CHUNK / (4 * dim)));
      for (let r = 0; r * dim < vectors.length; r += rows)
        g.checkIndexVectors(dim, r, vectors.subarray(r * dim, (r + rows) * dim));
      const texts = g.indexTextsJson(this.texts);
      const head = g.indexHead(this.quantize, this.#model.fingerprint, dim, this.texts.length, texts.length);
      return [head, ...(words ? [bytesOf(words), bytesOf(scales)] : []), bytesOf(vectors), texts];
    }).catch(asPackageError);
    const sum = new g.IndexChecksum();
    for (const part of parts) for (const piece of chunks(part)) sum.update(piece);
    return new Blob([...parts, sum.finish()], { type: 'application/octet-stream' });
  }

  dispose() {
    this.#rows?.dispose();
    if (this.#generation === generation()) this.#wasmIndex.dispose();
  }

  /**
   * Restores checked `texts`, their f32 vectors (`vectors()`: their Float32Array pieces, in
   * order) and a quantized index's codes into this empty index.
   */
  async [RESTORE](texts, vectors, codes) {
    if (!this.#rows) {
      const parts = [];
      for await (const piece of vectors()) parts.push(piece);
      return this.addVectors(texts, parts.length === 1 ? parts[0] : concat(parts));
    }
    await guard('importIndex', () => {
      this.#index.addCodes(codes.words, codes.scales);
      this.#index.releaseMemory();
      appendAll(this.texts, texts);
    });
    for await (const piece of vectors()) await this.#rows.append(piece);
  }
}

const concat = (parts) => {
  const out = new Float32Array(parts.reduce((n, p) => n + p.length, 0));
  parts.reduce((at, p) => (out.set(p, at), at + p.length), 0);
  return out;
};

/**
 * An empty index for `model`'s vectors. Options: `device` ('auto': as for `load`), `name`
 * (IndexedDB key), `quantize` ('none', 'int8' or 'binary'), `oversample` (candidates per result
 * before rescoring; the mode's default), `rescore` (where the f32 vectors for rescoring live:
 * 'opfs' where the browser has it, else 'memory').
 */
export async function createIndex(
  model,
  { device = 'auto', name = 'default', maxBufferBytes, shardRows, quantize = 'none', oversample, rescore } = {},
) {
  if (!QUANTIZE.includes(quantize)) {
    throw Object.assign(new Error(`st5: unknown quantize '${quantize}' (expected none, int8 or binary)`), {
      code: 'invalid',
    });
  }
  if (oversample !== undefined && !(Number.isInteger(oversample) && oversample >= 1)) {
    throw Object.assign(new Error(`st5: oversample must be a whole number ≥ 1, not ${oversample}`), {
      code: 'invalid',
    });
  }
  await wasm();
  // An index is built by embedding many texts: a CPU pool's workers start loading now, beside the
  // index's set-up and the caller's first batches (their failures are the pool's to report).
  model.startWorkers?.().catch(() => {});
  const wanted = await chooseDevice(device);
  const index = await guard('createIndex', () =>
    glue().Index.create(model.dim, { device: wanted, maxBufferBytes, shardRows, quantize }),
  );
  let rows = null;
  if (quantize !== 'none') {
    const kind = rescore ?? ((await opfsAvailable()) ? 'opfs' : 'memory');
    if (kind !== 'opfs' && kind !== 'memory') {
      index.dispose();
      throw Object.assign(new Error(`st5: unknown rescore '${kind}' (expected opfs or memory)`), { code: 'invalid' });
    }
    try {
      rows = await createRowStore(kind, model.dim);
    } catch (e) {
      // OPFS chosen by default but unusable here (no sync access handle in a worker, storage
      // refused): rescoring from memory still answers. Asked for explicitly, it is an error.
      if (rescore !== undefined) {
        index.dispose();
        throw e;
      }
      console.warn(`st5: OPFS unavailable for rescoring (${e.message}); keeping the vectors in memory`);
      rows = await createRowStore('memory', model.dim);
    }
  }
  return new SearchIndex(model, index, name, rows, oversample ?? index.defaultOversample);
}

/**
 * Checks a record (saved in IndexedDB, or read from an old ST5IDX1 file, whose model identity was
 * `fingerprint`) against `model`; returns why it is unusable, if it is.
 */
async function problem(record, model, fingerprint = model.fingerprint) {
  if (!record || typeof record !== 'object') return 'no saved index';
  if (record.fingerprint !== fingerprint) return 'saved for another model';
  // A file from anywhere (or an old record): every field is checked before it is used.
  const strings = (xs) => Array.isArray(xs) && xs.every((t) => typeof t === 'string');
  if (!Number.isInteger(record.dim) || !strings(record.texts) || typeof record.checksum !== 'string')
    return 'corrupt (its header lacks dim, texts or checksum, or has the wrong types)';
  if (!(record.vectors instanceof ArrayBuffer) || record.vectors.byteLength % 4)
    return 'corrupt (the vectors are not whole float32 values)';
  const vectors = new Float32Array(record.vectors);
  if (record.dim !== model.dim || vectors.length !== record.texts.length * model.dim) return 'corrupt (sizes disagree)';
  if ((await vectorHash(vectors)) !== record.checksum) return 'corrupt (checksum mismatch)';
  if ((await corpusHash(record.texts)) !== record.corpus) return 'corrupt (corpus hash mismatch)';
  const quantize = record.quantize ?? 'none';
  if (!QUANTIZE.includes(quantize)) return `corrupt (unknown quantize '${quantize}')`;
  if (quantize !== 'none') {
    const n = record.texts.length;
    const perWord = quantize === 'int8' ? 4 : 32;
    const words = record.words;
    const scales = record.scales;
    if (!(words instanceof ArrayBuffer) || !(scales instanceof ArrayBuffer)) return 'corrupt (its codes are missing)';
    if (words.byteLength !== n * Math.ceil(model.dim / perWord) * 4 || scales.byteLength !== n * 4)
      return 'corrupt (code sizes disagree)';
    if ((await codesHash(words, scales)) !== record.codesChecksum) return 'corrupt (codes checksum mismatch)';
  }
  return null;
}

/**
 * The index of `texts` for `model`: restored from IndexedDB when a saved one matches (no
 * embedding), extended when the saved corpus is a prefix of `texts` (only the new texts are
 * embedded), else built from scratch. Stale or corrupt entries are rebuilt and replaced.
 * @returns {Promise<{ index: SearchIndex, restored: number, reason: string | null }>}
 */
export async function openIndex(model, texts, { onProgress, batchSize, ...options } = {}) {
  const index = await createIndex(model, options);
  const name = options.name ?? 'default';
  let record;
  try {
    record = await idb((store) => store.get(name));
  } catch {
    record = null; // IndexedDB unavailable (private mode): build in memory
  }
  let reason = await problem(record, model);
  if (!reason && !record.texts.every((t, i) => t === texts[i])) reason = 'saved for another corpus';
  if (!reason && (record.quantize ?? 'none') !== index.quantize) reason = `stored as ${record.quantize ?? 'none'}`;
  let restored = 0;
  if (!reason) {
    await index[RESTORE](record.texts, recordVectors(record), recordCodes(record));
    restored = record.texts.length;
  } else if (record) {
    console.warn(`st5: saved index "${name}" ${reason}; rebuilding it`);
  }
  const { added } = await index.add(texts, { onProgress, batchSize });
  // Without IndexedDB (Node) there is nowhere to save, and nothing to warn about on every open.
  if ((added || reason) && globalThis.indexedDB)
    await index.save().catch((e) => console.warn(`st5: could not save the index: ${e.message}`));
  return { index, restored, reason: record ? reason : null };
}

const recordVectors = (record) =>
  async function* () {
    yield new Float32Array(record.vectors);
  };
const recordCodes = (record) =>
  record.words && { words: new Int32Array(record.words), scales: new Float32Array(record.scales) };

/** `source` (a Blob or File, bytes, or a URL to fetch with progress) as a Blob and its name. */
/** An index file as a Blob with its name: a Blob or File, bytes, or a path or URL (fetched). */
export async function indexBlob(source, onProgress) {
  if (source instanceof Blob) return { blob: source, name: source.name || '(in memory)' };
  if (source instanceof ArrayBuffer || ArrayBuffer.isView(source))
    return { blob: new Blob([source]), name: '(in memory)' };
  if (typeof source !== 'string' && !(source instanceof URL))
    throw new TypeError('st5: importIndex takes a Blob, a File, bytes or a URL');
  const url = await absoluteUrl(source);
  const response = await fetchUrl(url);
  if (!response.ok) throw invalid(`st5: index file ${url}: HTTP ${response.status}`);
  const total = Number(response.headers.get('content-length')) || null;
  // Chunks are gathered into a Blob every CHUNK bytes, which the browser keeps (on disk for a
  // large one), so that a file of gigabytes never sits in the page's memory as chunks.
  const blobs = [];
  let parts = [];
  let pending = 0;
  let loaded = 0;
  for (const reader = response.body.getReader(); ;) {
    const { done, value } = await reader.read();
    if (done) break;
    parts.push(value);
    pending += value.length;
    loaded += value.length;
    if (pending >= CHUNK) {
      blobs.push(new Blob(parts));
      parts = [];
      pending = 0;
    }
    onProgress?.({ stage: 'download', loaded, total });
  }
  return { blob: new Blob([...blobs, ...parts]), name: String(url) };
}

/**
 * Opens an index file: one `st5 index build` wrote or `SearchIndex.export` made (ST5INDEX), or
 * an old ST5IDX1 export, which opens with a note to export it again. `source` is a Blob or File,
 * its bytes, or a URL. Everything is checked before anything is used (st5_format::index_file:
 * the head's sizes, the checksum over the file, the texts), and the file must have been built
 * with `model` (its `fingerprint`).
 */
export async function importIndex(model, source, { onProgress, ...options } = {}) {
  const { blob, name } = await indexBlob(source, onProgress);
  await wasm();
  const g = glue();
  const start = await blobBytes(blob, 0, 16);
  if (new TextDecoder().decode(start.subarray(0, LEGACY_MAGIC.length)) === LEGACY_MAGIC)
    return importLegacy(model, blob, name, options);
  // st5-format's errors name the file ("index file NAME: ..."); as the package's, they start with st5:.
  const file = await guard('importIndex', async () => {
    const length = g.indexHeadLength(start, name);
    // A head longer than the file: its first bytes are enough for the parse to say so.
    const head = g.parseIndexHead(length > blob.size ? start : await blobBytes(blob, 0, length), blob.size, name);
    if (head.model !== model.fingerprint)
      throw invalid(
        `st5: index file ${name}: built with another model (${head.model}), not this one (${model.fingerprint})`,
      );
    const sum = new g.IndexChecksum();
    for (let at = 0; at < head.sections.end; at += CHUNK) {
      sum.update(await blobBytes(blob, at, Math.min(at + CHUNK, head.sections.end)));
      onProgress?.({ stage: 'check', loaded: at, total: head.sections.end });
    }
    sum.verify(await blobBytes(blob, head.sections.end, blob.size), name);
    const { texts, end } = head.sections;
    return { ...head, texts: g.parseIndexTexts(await blobBytes(blob, texts, end), head.count, name) };
  }).catch(asPackageError);
  const s = file.sections;
  const read = async (Type, from, to) => new Type(await blob.slice(from, to).arrayBuffer());
  // The f32 vectors in pieces of whole rows, for the rescoring store (or, unquantized, the index).
  const rows = Math.max(1, Math.floor(CHUNK / (4 * file.dim)));
  const vectors = async function* () {
    for (let at = s.vectors; at < s.texts; at += rows * 4 * file.dim)
      yield read(Float32Array, at, Math.min(at + rows * 4 * file.dim, s.texts));
  };
  const codes =
    file.quantize === 'none'
      ? null
      : { words: await read(Int32Array, s.words, s.scales), scales: await read(Float32Array, s.scales, s.vectors) };
  const index = await restoredIndex(model, { ...options, quantize: file.quantize }, file.texts, vectors, codes);
  onProgress?.({ stage: 'ready', loaded: blob.size, total: blob.size });
  return index;
}

/** A new index for `model` (`createIndex`'s options) holding `texts` with their `vectors` and
 * `codes` as a file stored them; disposed again if restoring them fails. */
async function restoredIndex(model, options, texts, vectors, codes) {
  const index = await createIndex(model, options);
  try {
    await index[RESTORE](texts, vectors, codes);
  } catch (e) {
    index.dispose();
    throw e;
  }
  return index;
}

/** An index file in the package's format before ST5INDEX: a header with the texts and hashes,
 * the f32 vectors, then any code words and scales. */
async function importLegacy(model, blob, name, options) {
  const bytes = new Uint8Array(await blob.arrayBuffer());
  const start = LEGACY_MAGIC.length + 4;
  const len =
    bytes.length >= start
      ? new DataView(bytes.buffer, bytes.byteOffset + LEGACY_MAGIC.length, 4).getUint32(0, true)
      : Infinity;
  if (start + len > bytes.length) throw invalid(`st5: index file ${name}: truncated (its header runs past the end)`);
  let header;
  try {
    header = JSON.parse(new TextDecoder().decode(bytes.subarray(start, start + len)));
  } catch (e) {
    throw invalid(`st5: index file ${name}: its header is corrupt: ${e.message}`);
  }
  const body = start + len;
  const n = Array.isArray(header?.texts) ? header.texts.length : 0;
  const vectorBytes = n * model.dim * 4;
  const quantized = header?.quantize && header.quantize !== 'none';
  // Whatever lies between the vectors and the scales; problem() checks its size.
  const wordBytes = quantized ? Math.max(bytes.length - body - vectorBytes - n * 4, 0) : 0;
  const record = {
    ...header,
    vectors: bytes.slice(body, quantized ? body + vectorBytes : bytes.length).buffer,
    ...(quantized && {
      words: bytes.slice(body + vectorBytes, body + vectorBytes + wordBytes).buffer,
      scales: bytes.slice(body + vectorBytes + wordBytes).buffer,
    }),
  };
  const reason = await problem(record, model, model.legacyFingerprint);
  if (reason) throw invalid(`st5: index file ${name}: ${reason}`);
  console.warn(
    `st5: ${name} is in the package's old index format (ST5IDX1), which a later st5 will not read; ` +
      'export() it again to get an ST5INDEX file, which `st5 index query` opens too',
  );
  const quantize = record.quantize ?? 'none';
  return restoredIndex(model, { ...options, quantize }, record.texts, recordVectors(record), recordCodes(record));
}
