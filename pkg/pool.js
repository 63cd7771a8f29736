// The CPU path on every core: a pool of Web Workers, each holding a copy of the model on the
// wasm CPU backend, with the page's own model bridging the start. A call's texts are cut into the
// batches the model itself would run (`planBatches`: on the CPU each batch is packed, nothing
// padded, so each text's vector is the same as on one thread), and each worker takes the next batch as soon as it is free. Each batch is the
// same forward pass on the same wasm code as on one thread, so results are bit-identical to
// `threads: 1`. In Node the workers are worker_threads ones (host.js), driven the same way.
//
// Workers start on the first call that has more than one batch, or sooner when the page says that
// more than queries are coming: `startWorkers()` (which `load`'s `startWorkers` option and
// `createIndex` call). A page that embeds one query at a time never pays for them, and loading
// them does not compete with the page's start-up unless it asks. The page computes only while no
// worker has loaded yet and a core is left over from the loading ones, so no call waits for the
// workers where the machine has room. Where every core has a worker loading, the page's batch
// would slow their loading and, as wasm cannot be interrupted, still hold a core once they are
// ready: a first call of 512 sentences on a base-size model, 2 cores, in Node, ran at 33.6/s with
// the page computing and 39.7/s without (42.0/s once loaded). It does not compute beside loaded
// workers either: wasm on the page blocks its event loop, so workers' results (and their next
// batches) would wait for the page's batch to finish. Measured on 2 cores with st5-mini: page +
// worker took no more sentences/s than the page alone.
//
// Why Workers and not a threaded (SharedArrayBuffer) module: a pool needs no COOP/COEP headers,
// runs in every browser with Workers, shares the one SIMD module with the WebGPU path (a threaded
// module needs a nightly `-Z build-std` build without WebGPU, another ~12 min per CI build), and
// batches are coarse (tens of ms each), so message passing costs little. The price is memory:
// each worker holds its own copy of the weights, which `defaultThreads` caps.

import { CallQueue, PANIC_FOR_TEST, WITH_INNER, defineFacts, rows } from './facts.js';

// The workers' copies of the weights by default, in bytes (the page's own copy not counted).
const WORKER_WEIGHT_BUDGET = 1 << 30;

/**
 * Workers for `threads: undefined`: one per core (`cores`, host.js), as far as their copies of
 * `weightBytes` fit in `WORKER_WEIGHT_BUDGET` (at least one).
 */
export function defaultThreads(weightBytes, cores) {
  const byMemory = Math.floor(WORKER_WEIGHT_BUDGET / Math.max(weightBytes, 1));
  return Math.max(1, Math.min(cores, byMemory));
}

/** Resolves after pending messages (worker replies) have run: a macrotask, unlike `await`. */
const yieldToEvents = () =>
  new Promise((resolve) => {
    const { port1, port2 } = new MessageChannel();
    port1.onmessage = () => {
      port1.close();
      resolve();
    };
    port2.postMessage(null);
  });

/** True for a worker that broke (failed to start, crashed), as opposed to an error in the input. */
const workerBroke = (err) => err?.code === undefined && !(err instanceof TypeError);

/** The page's CPU model and its workers behind the interface of one model. */
export class PoolModel {
  #page;
  #cores;
  // Not yet started: emptied by the first call with more than one batch.
  #spawners;
  #workers = [];
  #calls = new CallQueue();
  #disposed = false;
  // Set during a call: hands batches to workers that have just become ready.
  #wake = null;

  /**
   * @param page the page's CPU model (model.js `Model`), which runs batches until a worker is ready
   * @param spawners functions that each start a worker and resolve to its model once loaded,
   *   called on the first call with more than one batch; a worker joins at once, even mid-call
   * @param cores the machine's cores (host.js `cores`): the page computes while workers load
   *   only where they leave one free
   */
  constructor(page, spawners, cores) {
    this.#page = page;
    this.#spawners = spawners;
    this.#cores = cores;
  }

  // Settles once every started worker has loaded or failed.
  #started = null;

  /** Starts the workers (once); the promise settles once each has loaded or failed. */
  #start() {
    const spawners = this.#spawners;
    this.#spawners = [];
    const loads = spawners.map((spawn) => {
      const member = { model: null, busy: false };
      this.#workers.push(member);
      return spawn().then(
        (model) => {
          if (this.#disposed || !this.#workers.includes(member)) return model.dispose();
          member.model = model;
          this.#wake?.();
        },
        (err) => {
          console.warn(`st5: a CPU worker failed to start (${err?.message ?? err}); the pool runs without it.`);
          this.#workers = this.#workers.filter((m) => m !== member);
          this.#wake?.(); // the page may take the batches it left to the loading workers
        },
      );
    });
    this.#started ??= Promise.all(loads);
    return this.#started;
  }

  /**
   * Starts the workers now rather than on the first call with more than one batch, for a page
   * that knows bulk embedding is coming (an index to build). Resolves with `threads` once every
   * worker has loaded (or failed to); calls made meanwhile run as usual.
   */
  async startWorkers() {
    if (this.#disposed) throw new Error('st5: this model has been disposed');
    await this.#start();
    return this.threads;
  }

  // device, dim, maxSeqLength, variant, fingerprint: the page's model's.
  static {
    defineFacts(this, (m) => m.#page);
  }

  /** Threads running batches now: the workers that have loaded, or 1 (the page) before any has
   * (workers start on the first call with more than one batch). */
  get threads() {
    return Math.max(1, this.#ready().length);
  }

  /** Threads once every worker has loaded: the pool's size (less any that failed). */
  get maxThreads() {
    return Math.max(1, this.#workers.length + this.#spawners.length);
  }

  /** Runs `use` with the page's wasm model (its tokenizer cuts documents into passages). */
  [WITH_INNER](use) {
    return this.#page[WITH_INNER](use);
  }

  /** The batches `embed` would run for `texts`, as arrays of text indices (the page's plan). */
  planBatches(texts) {
    return this.#page.planBatches(texts);
  }

  #ready() {
    return this.#workers.filter((m) => m.model);
  }

  /** True while the page should run batches itself: no worker has loaded, and the loading ones
   * leave a core free (see the top of this file). */
  #pageComputes() {
    return !this.#ready().length && this.#workers.length < this.#cores;
  }

  async embed(texts) {
    return rows(await this.embedFlat(texts), texts.length);
  }

  embedFlat(texts) {
    return this.#calls.embed(texts, (t) => this.#embedNow(t));
  }

  async #embedNow(texts) {
    if (this.#disposed) throw new Error('st5: this model has been disposed');
    const dim = this.dim;
    const out = new Float32Array(texts.length * dim);
    const batches = this.#page.planBatches(texts);
    if (batches.length > 1) this.#start();
    let pending = batches.length;
    let failure = null;
    // Wakes the page's loop below: a batch came back from a broken worker, or the call ended.
    let nudge = () => {};
    const settled = () => pending === 0 || failure;

    const place = (batch, flat) => {
      batch.forEach((row, j) => out.set(flat.subarray(j * dim, (j + 1) * dim), row * dim));
      pending--;
      nudge();
    };
    const fail = (err) => {
      failure ??= err;
      nudge();
    };

    const runWorker = async (member) => {
      member.busy = true;
      while (batches.length && member.model && !failure) {
        const batch = batches.shift();
        try {
          place(batch, await member.model.embedFlat(batch.map((i) => texts[i])));
        } catch (err) {
          if (!workerBroke(err)) {
            fail(err);
            break;
          }
          // A broken worker leaves the pool; its batch goes back to the others (or the page).
          console.warn(`st5: a CPU worker failed (${err?.message ?? err}); the pool runs without it.`);
          batches.unshift(batch);
          this.#workers = this.#workers.filter((m) => m !== member);
          member.model = null;
          nudge();
        }
      }
      member.busy = false;
    };
    const startIdle = () => {
      for (const m of this.#ready()) if (!m.busy) runWorker(m);
      nudge();
    };
    this.#wake = startIdle;
    startIdle();
    // The page runs batches only while `#pageComputes`; otherwise it waits for the call to end, a
    // worker to load or fail, or a batch that a broken worker handed back.
    while (!settled()) {
      if (batches.length && this.#pageComputes()) {
        const batch = batches.shift();
        try {
          place(batch, await this.#page.embedFlat(batch.map((i) => texts[i])));
        } catch (err) {
          fail(err);
        }
        await yieldToEvents(); // lets a worker that has just loaded join
      } else {
        await new Promise((resolve) => (nudge = resolve));
      }
    }
    this.#wake = null;
    if (failure) throw failure;
    return out;
  }

  /** As `Model`'s: a panic in the page's own model. */
  [PANIC_FOR_TEST]() {
    return this.#page[PANIC_FOR_TEST]();
  }

  /** The page's WebAssembly memory and each loaded worker's, in bytes: every worker holds its
   * own copy of the weights. */
  async memory() {
    const [page, ...workers] = await Promise.all(
      [this.#page, ...this.#ready().map((m) => m.model)].map((m) => m.memory()),
    );
    return { page: page.page, workers: workers.flatMap((w) => w.workers) };
  }

  /** Frees the page's model and ends every worker once queued calls have finished. */
  async dispose() {
    await this.#calls.idle();
    this.#disposed = true;
    const workers = this.#workers;
    this.#workers = [];
    await Promise.all([this.#page.dispose(), ...workers.map((m) => m.model?.dispose())]);
  }
}
