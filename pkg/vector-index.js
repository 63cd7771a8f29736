// Semantic search over a corpus: documents embedded by a model, their vectors kept on the GPU
// (the wasm `Index`: one matrix product per shard plus a top-k selection on the device), saved in
// IndexedDB keyed by the model's fingerprint and the corpus hash, exportable as a file.

import { autoDevice, generation, glue, guard, sha256, wasm } from './runtime.js';

const DB = 'st5-index';
const STORE = 'indexes';
const MAGIC = 'ST5IDX1\n';

const corpusHash = (texts) => sha256(new TextEncoder().encode(texts.join('\u0000')));
const vectorHash = (vectors) => sha256(new Uint8Array(vectors.buffer, vectors.byteOffset, vectors.byteLength));

function idb(op) {
  return new Promise((resolve, reject) => {
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
  /** The indexed documents, in id order. */
  texts = [];
  /** Texts embedded by this object so far (a restored index embeds none). */
  embedded = 0;

  constructor(model, index, name) {
    this.#model = model;
    this.#wasmIndex = index;
    this.#name = name;
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

  /**
   * Embeds and adds the texts not already indexed. `onProgress({ done, total, perSecond })`
   * follows each batch.
   * @returns {Promise<{ added: number, ms: number }>}
   */
  async add(texts, { batchSize = 64, onProgress } = {}) {
    const known = new Set(this.texts);
    const fresh = [...new Set(texts)].filter((t) => !known.has(t));
    const t0 = performance.now();
    for (let i = 0; i < fresh.length; i += batchSize) {
      const batch = fresh.slice(i, i + batchSize);
      const vectors = await this.#model.embedFlat(batch);
      await guard('SearchIndex.add', () => this.#index.add(vectors));
      this.texts.push(...batch);
      this.embedded += batch.length;
      const done = Math.min(i + batchSize, fresh.length);
      onProgress?.({ done, total: fresh.length, perSecond: done / ((performance.now() - t0) / 1000) });
    }
    // Once per call, not per batch: releasing also empties the model's scratch buffers.
    this.#index.releaseMemory();
    return { added: fresh.length, ms: performance.now() - t0 };
  }

  /** Adds precomputed vectors (row-major) for `texts`, without embedding. */
  addVectors(texts, vectors) {
    this.#index.add(vectors);
    this.#index.releaseMemory();
    this.texts.push(...texts);
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

  /** Top-k for row-major query vectors: one hit list per query. */
  async searchVectors(queries, k = 10) {
    const { ids, scores, k: kk } = await guard('SearchIndex.search', () => this.#index.search(queries, k));
    const q = kk ? ids.length / kk : queries.length / this.#index.dim;
    return Array.from({ length: q }, (_, i) =>
      Array.from({ length: kk }, (_, j) => ({
        id: ids[i * kk + j],
        text: this.texts[ids[i * kk + j]],
        score: scores[i * kk + j],
      })),
    );
  }

  /** Every vector, row-major in id order. */
  vectors() {
    return guard('SearchIndex.vectors', () => this.#index.vectors());
  }

  async #record() {
    const vectors = await this.vectors();
    return {
      fingerprint: this.#model.fingerprint,
      corpus: await corpusHash(this.texts),
      dim: this.#index.dim,
      texts: this.texts,
      checksum: await vectorHash(vectors),
      vectors: vectors.buffer,
    };
  }

  /** Saves to IndexedDB under this index's name (replacing what was there). */
  async save() {
    const record = await this.#record();
    await idb((store) => store.put(record, this.#name));
  }

  /** The index as one file (a header and the raw vectors), for `importIndex`. */
  async export() {
    const { vectors, ...header } = await this.#record();
    const head = new TextEncoder().encode(JSON.stringify(header));
    const len = new Uint8Array(new Uint32Array([head.length]).buffer);
    return new Blob([MAGIC, len, head, vectors], { type: 'application/octet-stream' });
  }

  dispose() {
    if (this.#generation === generation()) this.#wasmIndex.dispose();
  }
}

/** An empty index for `model`'s vectors. Options: `device` ('auto': as for `load`), `name` (IndexedDB key). */
export async function createIndex(model, { device = 'auto', name = 'default', maxBufferBytes, shardRows } = {}) {
  await wasm();
  const wanted = device === 'auto' ? await autoDevice() : device;
  const index = await guard('createIndex', () =>
    glue().Index.create(model.dim, { device: wanted, maxBufferBytes, shardRows }),
  );
  return new SearchIndex(model, index, name);
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
  let restored = 0;
  if (!reason) {
    index.addVectors(record.texts, new Float32Array(record.vectors));
    restored = record.texts.length;
  } else if (record) {
    console.warn(`st5: saved index "${name}" ${reason}; rebuilding it`);
  }
  const { added } = await index.add(texts, { onProgress, batchSize });
  if (added || reason) await index.save().catch((e) => console.warn(`st5: could not save the index: ${e.message}`));
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
  const record = { ...header, vectors: bytes.slice(start + len).buffer };
  const reason = await problem(record, model);
  if (reason) throw new Error(`st5: index file ${reason}`);
  const index = await createIndex(model, options);
  index.addVectors(record.texts, new Float32Array(record.vectors));
  return index;
}
