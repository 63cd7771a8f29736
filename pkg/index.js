// st5: Sentence-T5 sentence embeddings in the browser. A thin layer over the wasm core
// (crates/st5-wasm): file fetching and caching, a call queue, and the fallback from WebGPU to
// the CPU. On the CPU, `load` spreads batches over a pool of Workers (pool.js), one per core.
// `loadInWorker` runs the same thing in a Web Worker.

import {
  CallQueue,
  MODEL_FACTS,
  defineFacts,
  combineHashes,
  fileHashes,
  PANIC_FOR_TEST,
  generation,
  sha256,
  glue,
  guard,
  rejectUnlessTexts,
  rows,
  wasm,
} from './runtime.js';
import { chooseDevice, noteWebgpuFailed } from './devices.js';
import { clearCache, fetchModelFiles, memoryFiles } from './files.js';
import { PoolModel, defaultThreads } from './pool.js';
import { RpcClient } from './rpc.js';

export { clearCache };
export { SearchIndex, createIndex, importIndex, openIndex } from './vector-index.js';

const isUrl = (s) => typeof s === 'string' || s instanceof URL;

/** A Hugging Face hub id (`owner/name`), as transformers.js takes them. A directory path says so
 * with './', '/', a trailing '/' or a scheme. */
const HUB_ID = /^[A-Za-z0-9][\w.-]*\/[\w.-]+$/;
const DEFAULT_HUB_URL = 'https://huggingface.co';

/** `source` as a URL: a hub id becomes its files' directory at `revision` on `hubUrl`. */
function resolveSource(source, { revision = 'main', hubUrl = DEFAULT_HUB_URL } = {}) {
  if (typeof source !== 'string' || !HUB_ID.test(source)) return { source, hub: null };
  const base = `${String(hubUrl).replace(/\/+$/, '')}/${source}/resolve/${encodeURIComponent(revision)}/`;
  return { source: base, hub: `${source} (revision ${revision}) on ${hubUrl}` };
}

/**
 * Loads a Sentence-T5 model.
 * @param {string | URL | Map | object | FileList | File[]} source a directory URL holding a
 *   sentence-transformers or Hugging Face T5 layout, or the files themselves
 * @param {import('./index.d.ts').LoadOptions} [options]
 * @returns {Promise<Model>}
 */
export async function load(modelSource, options = {}) {
  const { device = 'auto', onProgress, cache = true, threads, prompt, revision, hubUrl, ...modelOptions } = options;
  const { source, hub } = resolveSource(modelSource, { revision, hubUrl });
  const started = performance.now();
  await wasm();
  const promptBytes = prompt == null ? null : readPrompt(prompt);
  const { files, label } = isUrl(source)
    ? await fetchModelFiles(source, { cache, onProgress, FilePlanner: glue().FilePlanner }).catch((err) => {
        // Name what the caller asked for, not only the URL it became.
        throw hub ? Object.assign(new Error(`st5: ${hub}: ${err.message}`), { code: err.code }) : err;
      })
    : await memoryFiles(source);
  // Web Crypto hashes a copy of each file off the main thread: beside the model's construction
  // for small models, where the time matters; before it for large ones, where the memory does
  // (the copy is gone before wasm takes its own).
  const hashes = fileHashes(files);
  if (weightBytes(files) > HASH_BEFORE_LOAD_BYTES) await hashes;
  const wanted = await chooseDevice(device);
  onProgress?.({ stage: 'init', device: wanted });
  let inner = await loadInner(files, { ...modelOptions, device: wanted }, label);
  // A soft prompt is checked against the weights fingerprint, over the files wasm names.
  let applied = null;
  if (promptBytes) {
    const bytes = await promptBytes;
    applied = { ...bytes, fingerprint: await combineHashes(await hashes, inner.weightFiles) };
    inner = await applyPrompt(inner, applied);
    (await hashes).set('(soft prompt)', await sha256(bytes.bytes));
  }
  // The model's identity covers its prompt: vectors made with another prompt are not reusable.
  const id = combineHashes(await hashes);
  onProgress?.({ stage: 'ready', device: inner.device, ms: performance.now() - started });
  // For a URL the files are read again (from the cache) only if WebGPU fails or the module
  // traps; in-memory sources are the caller's own objects, so holding them costs nothing extra.
  const reload = async () => {
    await wasm();
    return isUrl(source) ? fetchModelFiles(source, { cache, FilePlanner: glue().FilePlanner }) : memoryFiles(source);
  };
  const model = new Model(inner, reload, modelOptions, await id, applied);
  const workers = threads ?? defaultThreads(weightBytes(files));
  if (inner.device !== 'cpu' || !(workers > 1) || typeof Worker === 'undefined') return model;
  // Workers get the fetched files (a copy each) and load them on the CPU, one thread each.
  const workerOptions = { ...modelOptions, device: 'cpu', threads: 1, prompt: applied?.bytes };
  const spawners = Array.from({ length: workers }, () => () => startWorker(files, workerOptions));
  return new PoolModel(model, spawners);
}

/** Weights above this are hashed before the model is built, not beside it. */
const HASH_BEFORE_LOAD_BYTES = 64 * 2 ** 20;

/** Bytes of the weight files: what each extra copy of the model costs, roughly. */
const weightBytes = (files) =>
  [...files].reduce((n, [name, bytes]) => n + (/\.(safetensors|bin)$/.test(name) ? bytes.byteLength : 0), 0);

/** The wasm core's `Model.load`, on the live instance (`wasm()` must have resolved). */
const loadInner = (files, options, label) => guard('load', () => glue().Model.load(files, options, label));

/** A soft prompt's bytes and the name its errors give, from a URL or the bytes themselves. */
async function readPrompt(prompt) {
  if (isUrl(prompt)) {
    const url = String(prompt);
    const response = await fetch(url);
    if (!response.ok) throw new Error(`st5: soft prompt ${url}: HTTP ${response.status}`);
    return { bytes: new Uint8Array(await response.arrayBuffer()), label: url };
  }
  if (prompt instanceof Blob)
    return { bytes: new Uint8Array(await prompt.arrayBuffer()), label: prompt.name ?? 'prompt file' };
  if (prompt instanceof ArrayBuffer || ArrayBuffer.isView(prompt)) {
    const view = ArrayBuffer.isView(prompt)
      ? new Uint8Array(prompt.buffer, prompt.byteOffset, prompt.byteLength)
      : new Uint8Array(prompt);
    return { bytes: view.slice(), label: 'prompt file' };
  }
  throw new TypeError('st5: `prompt` must be a URL, a Blob, an ArrayBuffer or a Uint8Array');
}

/** `inner` with the soft prompt `applied` ({ bytes, label, fingerprint }) set, or as it is. */
async function applyPrompt(inner, applied) {
  if (!applied) return inner;
  try {
    await guard('setPrompt', () => inner.setPrompt(applied.bytes, applied.fingerprint, applied.label));
  } catch (err) {
    try {
      inner.free();
    } catch {
      // after a trap the instance is gone, and the model with it
    }
    throw err;
  }
  return inner;
}

/** True for failures of the GPU itself (lost device, failed read-back), not of the input or of
 * st5: a trap is an `'internal'` error and never falls back. */
const isDeviceFailure = (err) => err?.code === 'device';

/** A loaded model. Calls are queued: any number may be in flight, and each gets its own result. */
export class Model {
  #inner;
  #generation = generation();
  #facts;
  #calls = new CallQueue();
  #reload;
  #options;
  // The soft prompt ({ bytes, label, fingerprint }) every reload of the wasm model applies again.
  #prompt;

  constructor(inner, reload, options, fingerprint, prompt = null) {
    this.#setInner(inner);
    this.#reload = reload;
    this.#options = options;
    this.#prompt = prompt;
    /** SHA-256 over the model's files: what a saved index is keyed by. */
    this.fingerprint = fingerprint;
  }

  // Read once per wasm model: after a trap the wasm object cannot answer, but the facts stand.
  #setInner(inner) {
    this.#inner = inner;
    this.#generation = generation();
    const { device, dim, maxSeqLength, variant } = inner;
    this.#facts = { device, dim, maxSeqLength, variant };
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
    this.#live();
    if (this.#generation !== generation()) {
      throw Object.assign(new Error('st5: the wasm module trapped; this model reloads on its next embed'), {
        code: 'internal',
      });
    }
    return this.#inner.planBatches(texts);
  }

  #live() {
    if (!this.#inner) throw new Error('st5: this model has been disposed');
    return this.#facts;
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

  /** The wasm model, loaded again on a fresh instance if the one it lived in has trapped. */
  async #current() {
    this.#live();
    if (this.#generation !== generation()) {
      const { files, label } = await this.#reload();
      const inner = await loadInner(files, { ...this.#options, device: this.#facts.device }, label);
      this.#setInner(await applyPrompt(inner, this.#prompt));
    }
    return this.#inner;
  }

  async #embedNow(texts) {
    const inner = await this.#current();
    if (texts.length === 0) return new Float32Array(0);
    try {
      return await guard('embed', () => inner.embed(texts));
    } catch (err) {
      if (inner.device !== 'webgpu' || !isDeviceFailure(err)) throw err;
      console.warn(
        `st5: WebGPU failed during embed (${err?.message ?? err}); re-running on the CPU, which this model now uses.`,
      );
      noteWebgpuFailed();
      const { files, label } = await this.#reload();
      const cpu = await applyPrompt(await loadInner(files, { ...this.#options, device: 'cpu' }, label), this.#prompt);
      try {
        inner.free();
      } catch {
        // a model whose device is gone may not free cleanly; it is unreachable either way
      }
      this.#setInner(cpu);
      return guard('embed', () => cpu.embed(texts));
    }
  }

  /** Makes the wasm core panic, as a bug would (the tests of what follows a trap use it). */
  [PANIC_FOR_TEST]() {
    return this.#calls.embed([], async () => {
      await this.#current();
      return guard('panicForTest', () => glue().panicForTest());
    });
  }

  /** Frees the model's memory once queued calls have finished. */
  async dispose() {
    await this.#calls.idle();
    if (this.#generation === generation()) this.#inner?.dispose();
    this.#inner = null;
  }
}

/**
 * As `load`, but the model runs in a Web Worker, so the page never blocks. The returned object
 * has the same interface; `onProgress` is called on this thread.
 */
export function loadInWorker(model, options = {}) {
  const { onProgress, ...rest } = options;
  const absolute = (s) => (isUrl(s) ? String(new URL(String(s), globalThis.location?.href)) : s);
  // The worker resolves URLs against its own script: pass them absolute. A hub id goes as it is,
  // so that the worker's errors name it.
  const source = typeof model === 'string' && HUB_ID.test(model) ? model : absolute(model);
  const hubUrl = rest.hubUrl === undefined ? undefined : absolute(rest.hubUrl);
  return startWorker(source, { ...rest, prompt: absolute(rest.prompt), hubUrl }, onProgress);
}

/** Starts a worker (worker.js) and loads `source` there; resolves once it is ready. */
async function startWorker(source, options, onProgress) {
  const model = new WorkerModel(source, options, onProgress);
  await model.start();
  return model;
}

/** A model in a Web Worker. After an internal error (a trap in the worker's wasm) the next call
 * starts a fresh worker, which loads the model again; the trapped one is terminated. */
class WorkerModel {
  #rpc = null;
  #state = {};
  #source;
  #options;
  #onProgress;
  // The worker trapped (an 'internal' error): its wasm instance is unusable, so the next call
  // starts a new worker and loads the model again.
  #broken = false;
  #disposed = false;

  constructor(source, options, onProgress) {
    this.#source = source;
    this.#options = options;
    this.#onProgress = onProgress;
  }

  /** Starts the worker and loads the model there. */
  async start() {
    const worker = new Worker(new URL('./worker.js', import.meta.url), { type: 'module' });
    const rpc = new RpcClient(worker, {
      name: 'st5 worker',
      onNotice: (data) => {
        if (data.progress) this.#onProgress?.(data.progress);
        if (data.warn) console.warn(data.warn);
      },
    });
    this.#rpc = rpc;
    this.#broken = false;
    try {
      this.#state = await this.#post('load', { source: this.#source, options: this.#options });
    } catch (err) {
      rpc.terminate();
      this.#broken = true; // the next call tries a fresh worker again
      throw err;
    }
  }

  /** `op` in the current worker; an internal error there marks it broken. */
  #post(op, args, buffers = []) {
    const rpc = this.#rpc;
    return rpc.call(op, args, buffers).catch((err) => {
      if (err.code === 'internal' && rpc === this.#rpc) this.#broken = true;
      throw err;
    });
  }

  async call(op, args, buffers = []) {
    if (this.#disposed) throw new Error('st5: this model has been disposed');
    if (this.#broken) {
      this.#rpc.terminate();
      await this.start();
    }
    return this.#post(op, args, buffers);
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
    return rejectUnlessTexts(texts) ?? this.#embedNow(texts);
  }

  async #embedNow(texts) {
    const { flat, state } = await this.call('embed', { texts });
    this.#state = state;
    return flat;
  }

  /** As `Model`'s, in the worker. */
  [PANIC_FOR_TEST]() {
    return this.call('panicForTest', {});
  }

  async dispose() {
    if (this.#disposed) return;
    this.#disposed = true;
    if (!this.#broken) await this.#post('dispose', {});
    this.#rpc.terminate();
  }
}
