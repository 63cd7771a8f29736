// st5: Sentence-T5 sentence embeddings in the browser. A thin layer over the wasm core
// (crates/st5-wasm): file fetching and caching, a call queue, and the fallback from WebGPU to
// the CPU. On the CPU, `load` spreads batches over a pool of Workers (pool.js), one per core.
// `loadInWorker` runs the same thing in a Web Worker.

import {
  CallQueue,
  MODEL_FACTS,
  Model as WasmModel,
  autoDevice,
  defineFacts,
  FilePlanner,
  fingerprint,
  rejectUnlessTexts,
  rows,
  wasm,
} from './runtime.js';
import { clearCache, fetchModelFiles, memoryFiles } from './files.js';
import { PoolModel, defaultThreads } from './pool.js';

export { clearCache };
export { SearchIndex, createIndex, importIndex, openIndex } from './vector-index.js';

// Once WebGPU has failed on this page, `device: 'auto'` goes straight to the CPU.
let webgpuFailed = false;

const isUrl = (s) => typeof s === 'string' || s instanceof URL;

/**
 * Loads a Sentence-T5 model.
 * @param {string | URL | Map | object | FileList | File[]} source a directory URL holding a
 *   sentence-transformers or Hugging Face T5 layout, or the files themselves
 * @param {import('./index.d.ts').LoadOptions} [options]
 * @returns {Promise<Model>}
 */
export async function load(source, options = {}) {
  const { device = 'auto', onProgress, cache = true, threads, ...modelOptions } = options;
  const started = performance.now();
  await wasm();
  const getFiles = isUrl(source)
    ? () => fetchModelFiles(source, { cache, onProgress, FilePlanner })
    : () => memoryFiles(source);
  const { files, label } = await getFiles();
  // Web Crypto hashes a copy of each file off the main thread: beside the model's construction
  // for small models, where the time matters; before it for large ones, where the memory does
  // (the copy is gone before wasm takes its own).
  const id = fingerprint(files);
  if (weightBytes(files) > HASH_BEFORE_LOAD_BYTES) await id;
  const wanted = device !== 'auto' ? device : webgpuFailed ? 'cpu' : await autoDevice();
  onProgress?.({ stage: 'init', device: wanted });
  const inner = await WasmModel.load(files, { ...modelOptions, device: wanted }, label);
  onProgress?.({ stage: 'ready', device: inner.device, ms: performance.now() - started });
  // For a URL the files are read again (from the cache) only if WebGPU fails; in-memory
  // sources are the caller's own objects, so holding them costs nothing extra.
  const reload = isUrl(source) ? () => fetchModelFiles(source, { cache, FilePlanner }) : () => memoryFiles(source);
  const model = new Model(inner, reload, modelOptions, await id);
  const workers = threads ?? defaultThreads(weightBytes(files));
  if (inner.device !== 'cpu' || !(workers > 1) || typeof Worker === 'undefined') return model;
  // Workers get the fetched files (a copy each) and load them on the CPU, one thread each.
  const workerOptions = { ...modelOptions, device: 'cpu', threads: 1 };
  const spawners = Array.from({ length: workers }, () => () => startWorker(files, workerOptions));
  return new PoolModel(model, spawners);
}

/** Weights above this are hashed before the model is built, not beside it. */
const HASH_BEFORE_LOAD_BYTES = 64 * 2 ** 20;

/** Bytes of the weight files: what each extra copy of the model costs, roughly. */
const weightBytes = (files) =>
  [...files].reduce((n, [name, bytes]) => n + (/\.(safetensors|bin)$/.test(name) ? bytes.byteLength : 0), 0);

/** True for failures of the GPU itself (lost device, failed read-back), not of the input. */
const isDeviceFailure = (err) => err?.code === 'device' || err instanceof WebAssembly.RuntimeError;

/** A loaded model. Calls are queued: any number may be in flight, and each gets its own result. */
export class Model {
  #inner;
  #calls = new CallQueue();
  #reload;
  #options;

  constructor(inner, reload, options, fingerprint) {
    this.#inner = inner;
    this.#reload = reload;
    this.#options = options;
    /** SHA-256 over the model's files: what a saved index is keyed by. */
    this.fingerprint = fingerprint;
  }

  /** `'webgpu'` or `'cpu'`; becomes `'cpu'` after a WebGPU failure. */
  get device() {
    return this.#live().device;
  }
  /** Embedding width. */
  get dim() {
    return this.#live().dim;
  }
  /** Tokens kept per text; longer texts are truncated. */
  get maxSeqLength() {
    return this.#live().maxSeqLength;
  }
  /** `'enc-mean'`, `'enc-first'` or `'encdec-first'`. */
  get variant() {
    return this.#live().variant;
  }
  /** Threads embedding for this model: 1 here; a CPU pool (pool.js) reports its members. */
  get threads() {
    return 1;
  }

  /** The batches `embed` would run for `texts`, as arrays of text indices. */
  planBatches(texts) {
    return this.#live().planBatches(texts);
  }

  #live() {
    if (!this.#inner) throw new Error('st5: this model has been disposed');
    return this.#inner;
  }

  /**
   * Embeds `texts`: one L2-normalised Float32Array per text, in order.
   * @param {string[]} texts
   * @returns {Promise<Float32Array[]>}
   */
  async embed(texts) {
    const flat = await this.embedFlat(texts);
    return rows(flat, texts.length);
  }

  /**
   * As `embed`, as one row-major Float32Array of `texts.length * dim` values.
   * @param {string[]} texts
   * @returns {Promise<Float32Array>}
   */
  embedFlat(texts) {
    return this.#calls.embed(texts, (t) => this.#embedNow(t));
  }

  async #embedNow(texts) {
    const inner = this.#live();
    if (texts.length === 0) return new Float32Array(0);
    let flat;
    try {
      flat = await inner.embed(texts);
    } catch (err) {
      if (inner.device !== 'webgpu' || !isDeviceFailure(err)) throw err;
      console.warn(
        `st5: WebGPU failed during embed (${err?.message ?? err}); re-running on the CPU, which this model now uses.`,
      );
      webgpuFailed = true;
      const { files, label } = await this.#reload();
      const cpu = await WasmModel.load(files, { ...this.#options, device: 'cpu' }, label);
      try {
        inner.free();
      } catch {
        // a model whose device is gone may not free cleanly; it is unreachable either way
      }
      this.#inner = cpu;
      flat = await cpu.embed(texts);
    }
    return flat;
  }

  /** Frees the model's memory once queued calls have finished. */
  async dispose() {
    await this.#calls.idle();
    this.#inner?.free();
    this.#inner = null;
  }
}

/**
 * As `load`, but the model runs in a Web Worker, so the page never blocks. The returned object
 * has the same interface; `onProgress` is called on this thread.
 */
export function loadInWorker(source, options = {}) {
  const { onProgress, ...rest } = options;
  const absolute = isUrl(source) ? String(new URL(String(source), globalThis.location?.href)) : source;
  return startWorker(absolute, rest, onProgress);
}

/** Starts a worker (worker.js) and loads `source` there; resolves once it is ready. */
async function startWorker(source, options, onProgress) {
  const worker = new Worker(new URL('./worker.js', import.meta.url), { type: 'module' });
  const model = new WorkerModel(worker, onProgress);
  try {
    await model.call('load', { source, options });
  } catch (err) {
    worker.terminate();
    throw err;
  }
  return model;
}

class WorkerModel {
  #worker;
  #next = 0;
  #pending = new Map();
  #state = {};

  constructor(worker, onProgress) {
    this.#worker = worker;
    worker.onmessage = ({ data }) => {
      if (data.progress) return onProgress?.(data.progress);
      if (data.warn) return console.warn(data.warn);
      const p = this.#pending.get(data.id);
      this.#pending.delete(data.id);
      if (data.state) this.#state = data.state;
      if (data.error) p?.reject(Object.assign(new Error(data.error.message), { code: data.error.code }));
      else p?.resolve(data.result);
    };
    worker.onerror = (e) => {
      const err = new Error(`st5 worker: ${e.message || 'failed to start'}`);
      for (const p of this.#pending.values()) p.reject(err);
      this.#pending.clear();
    };
  }

  call(op, args, transfer = []) {
    if (!this.#worker) return Promise.reject(new Error('st5: this model has been disposed'));
    const id = this.#next++;
    return new Promise((resolve, reject) => {
      this.#pending.set(id, { resolve, reject });
      this.#worker.postMessage({ id, op, ...args }, transfer);
    });
  }

  // device, dim, maxSeqLength, variant, fingerprint, threads: as the worker last reported them.
  static {
    defineFacts(this, (m) => m.#state, [...MODEL_FACTS, 'threads']);
  }

  /** @returns {Promise<Float32Array[]>} */
  async embed(texts) {
    return rows(await this.embedFlat(texts), texts.length);
  }

  /** @returns {Promise<Float32Array>} */
  embedFlat(texts) {
    return rejectUnlessTexts(texts) ?? this.call('embed', { texts });
  }

  async dispose() {
    if (!this.#worker) return;
    await this.call('dispose', {});
    this.#worker.terminate();
    this.#worker = null;
  }
}
