// The page's side of a model in a Web Worker (worker.js; in Node a worker_threads one): what
// `loadInWorker` returns and what the CPU pool (pool.js) runs its batches on. Calls go over
// rpc.js; the worker reports the model's facts (device, dim, ...) with each reply that can change
// them.

import { inNode, nodeWorker } from './host.js';
import { MODEL_FACTS, PANIC_FOR_TEST, defineFacts, rejectUnlessTexts, rows } from './facts.js';
import { wasmModule } from './runtime.js';
import { RpcClient } from './rpc.js';

/** Starts a worker (worker.js) and loads `source` there with `options` (`load`'s); resolves
 * once it is ready. `onProgress` is called on this thread; `hashes`: the files' SHA-256 by name
 * where the page has them already (a pool's workers), so that the worker does not hash the
 * weights again. */
export async function startWorker(source, options, { onProgress, hashes = null } = {}) {
  const model = new WorkerModel(source, options, { onProgress, hashes });
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
  #hashes;
  // The worker trapped (an 'internal' error): its wasm instance is unusable, so the next call
  // starts a new worker and loads the model again.
  #broken = false;
  #disposed = false;

  constructor(source, options, { onProgress, hashes }) {
    this.#source = source;
    this.#options = options;
    this.#onProgress = onProgress;
    this.#hashes = hashes;
  }

  /** Starts the worker and loads the model there. */
  async start() {
    // The literal `new Worker(new URL('./worker.js', import.meta.url), ...)` is what bundlers
    // look for to bundle the worker; in Node it is a worker_threads one.
    const worker = inNode
      ? await nodeWorker('./worker.js')
      : new Worker(new URL('./worker.js', import.meta.url), { type: 'module' });
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
      const load = { source: this.#source, options: this.#options, hashes: this.#hashes };
      // The page's compiled module where it has one (runtime.js says why); an engine that cannot
      // post a module (DataCloneError) gets the message without it, and compiles its own.
      const module = wasmModule();
      this.#state = await this.#post('load', { ...load, module }).catch((err) => {
        if (module && err?.name === 'DataCloneError') return this.#post('load', load);
        throw err;
      });
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
    defineFacts(this, (m) => m.#state, [...MODEL_FACTS, 'threads', 'maxThreads']);
  }

  /** As the pool's: starts the workers of the model in the worker (if it has a pool). */
  async startWorkers() {
    this.#state = await this.call('startWorkers', {});
    return this.#state.threads;
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

  /** As `Model`'s: the page holds none of the model; the worker's own memory comes first, then
   * that of the workers it started. */
  async memory() {
    const { page, workers } = await this.call('memory', {});
    return { page: 0, workers: [page, ...workers] };
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
