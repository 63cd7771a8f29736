// Semantic search over a corpus: documents embedded by a model, their vectors kept on the GPU
// (the wasm `Index`: one matrix product per shard plus a top-k selection on the device), saved in
// IndexedDB keyed by the model's fingerprint and the corpus hash, exportable as a file.
// A quantized index (`quantize: 'int8' | 'binary'`) searches codes of 1 byte or 1 bit a
// dimension, then rescores `k × oversample` candidates exactly with their f32 vectors, which a
// row store keeps outside the searchable part (row-store.js: OPFS by default, or memory).
// Node has neither IndexedDB nor OPFS: there an index lives in memory, and `export` and
// `importIndex` keep it.

import { chooseDevice } from './devices.js';
import { generation, glue, guard, sha256, wasm } from './runtime.js';
import { createRowStore, opfsAvailable } from './row-store.js';

const DB = 'st5-index';
const STORE = 'indexes';
const MAGIC = 'ST5IDX1\n';

const corpusHash = (texts) => sha256(new TextEncoder().encode(texts.join('\u0000')));
const bytesOf = (a) => new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
const vectorHash = (vectors) => sha256(bytesOf(vectors));
/** The checksum of a quantized index's codes: its words, then its scales. */
const codesHash = async (words, scales) => sha256(new Uint8Array(await new Blob([words, scales]).arrayBuffer()));
const QUANTIZE = ['none', 'int8', 'binary'];
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
      this.texts.push(...texts);
    });
    this.#index.releaseMemory();
    await this.#rows?.append(vectors);
  }

  /** Restores saved codes and their f32 vectors (a quantized index's record). */
  async #addCodes(texts, words, scales, vectors) {
    this.#index.addCodes(words, scales);
    this.#index.releaseMemory();
    this.texts.push(...texts);
    await this.#rows.append(vectors);
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
    for (let i = 0; i < q; i++) {
      let { ids, scores, k: kk } = found;
      let at = i * kk;
      if (this.#rows) {
        const candidates = ids.slice(at, at + kk);
        const rows = await this.#rows.rows(candidates);
        ({ ids, scores, k: kk } = glue().Index.rescore(queries.subarray(i * dim, (i + 1) * dim), candidates, rows, k));
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
   * The index as one file for `importIndex`: a header, the raw f32 vectors, and for a quantized
   * index its code words and scales.
   */
  async export() {
    const { vectors, words, scales, ...header } = await this.#record();
    const head = new TextEncoder().encode(JSON.stringify(header));
    const len = new Uint8Array(new Uint32Array([head.length]).buffer);
    const parts = [MAGIC, len, head, vectors, ...(words ? [words, scales] : [])];
    return new Blob(parts, { type: 'application/octet-stream' });
  }

  dispose() {
    this.#rows?.dispose();
    if (this.#generation === generation()) this.#wasmIndex.dispose();
  }

  /** Restores a checked record (see `problem`) into this empty index. */
  async [RESTORE](record) {
    const vectors = new Float32Array(record.vectors);
    if (this.#rows)
      await this.#addCodes(record.texts, new Int32Array(record.words), new Float32Array(record.scales), vectors);
    else await this.addVectors(record.texts, vectors);
  }
}

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

/** Checks a stored or imported record against `model`; returns why it is unusable, if it is. */
async function problem(record, model) {
  if (!record || typeof record !== 'object') return 'no saved index';
  if (record.fingerprint !== model.fingerprint) return 'saved for another model';
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
    await index[RESTORE](record);
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

/** Loads an index file written by `SearchIndex.export`, checking it against `model`. */
export async function importIndex(model, blob, options = {}) {
  const bytes = new Uint8Array(await blob.arrayBuffer());
  const magic = new TextDecoder().decode(bytes.subarray(0, MAGIC.length));
  if (magic !== MAGIC) throw new Error('st5: not an st5 index file');
  const start = MAGIC.length + 4;
  const len =
    bytes.length >= start
      ? new DataView(bytes.buffer, bytes.byteOffset + MAGIC.length, 4).getUint32(0, true)
      : Infinity;
  if (start + len > bytes.length) throw new Error('st5: index file is truncated (its header runs past the end)');
  let header;
  try {
    header = JSON.parse(new TextDecoder().decode(bytes.subarray(start, start + len)));
  } catch (e) {
    throw new Error(`st5: index file header is corrupt: ${e.message}`);
  }
  // The body: f32 vectors, then (quantized) the code words and the scales.
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
  const reason = await problem(record, model);
  if (reason) throw new Error(`st5: index file ${reason}`);
  const index = await createIndex(model, { ...options, quantize: record.quantize ?? 'none' });
  await index[RESTORE](record);
  return index;
}
