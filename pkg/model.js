// `Model`: a model loaded on this thread, over the wasm core's model. It queues calls, falls back
// from WebGPU to the CPU when the GPU fails, and loads itself again on a fresh wasm instance after
// a trap. load.js makes one.

import { noteWebgpuFailed } from './devices.js';
import { CallQueue, PANIC_FOR_TEST, WITH_INNER, rows } from './facts.js';
import { generation, glue, guard, wasmMemoryBytes } from './runtime.js';

/** The wasm core's `Model.load`, on the live instance (`wasm()` must have resolved). */
export const loadInner = (files, options, label) => guard('load', () => glue().Model.load(files, options, label));

/** `inner` with the soft prompt `applied` ({ bytes, label, fingerprint }) set, or as it is. */
export async function applyPrompt(inner, applied) {
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

  constructor(inner, reload, options, { fingerprint, legacyFingerprint }, prompt = null) {
    this.#setInner(inner);
    this.#reload = reload;
    this.#options = options;
    this.#prompt = prompt;
    /** What an index file records as its model (see index.d.ts). */
    this.fingerprint = fingerprint;
    /** What an index file of the old ST5IDX1 format recorded: every file's hash. */
    this.legacyFingerprint = legacyFingerprint;
  }

  // Read once per wasm model: after a trap the wasm object cannot answer, but the facts stand.
  #setInner(inner) {
    this.#inner = inner;
    this.#generation = generation();
    const { device, dim, maxSeqLength, variant, arithmetic, weightBytes } = inner;
    this.#facts = { device, dim, maxSeqLength, variant, arithmetic, weightBytes };
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
  /** `'enc-mean'`, `'enc-first'`, `'encdec-first'`, `'max'` or `'mean-sqrt-len'`. */
  get variant() {
    return this.#live().variant;
  }
  /** `'int8'` when an int8 model keeps its weights int8 and multiplies in int8 (on the CPU), else
   * `'f32'`. */
  get arithmetic() {
    return this.#live().arithmetic;
  }
  /** Bytes the weights hold in this model's wasm memory (what each pool worker's copy costs). */
  get weightBytes() {
    return this.#live().weightBytes;
  }
  /** Threads embedding for this model: 1 here; a CPU pool (pool.js) reports its members. */
  get threads() {
    return 1;
  }
  /** As `threads`: a model on this thread has no pool to grow. */
  get maxThreads() {
    return 1;
  }
  /** A CPU pool's (pool.js) call: here there are no workers to start. */
  async startWorkers() {
    this.#live();
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

  /** Runs `use` with the wasm model (reloaded after a trap): for the wasm classes that take it. */
  async [WITH_INNER](use) {
    return use(await this.#current());
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

  /** The WebAssembly memory this realm's module holds (weights on the CPU, activations, the
   * tokenizer; GPU buffers are not counted), in bytes: `{ page, workers: [] }`. */
  async memory() {
    return { page: wasmMemoryBytes(), workers: [] };
  }

  /** Frees the model's memory once queued calls have finished. */
  async dispose() {
    await this.#calls.idle();
    if (this.#generation === generation()) this.#inner?.dispose();
    this.#inner = null;
  }
}
