// What every model object is, whichever runs it (model.js's `Model`, its Worker proxy in
// worker-client.js, the CPU pool in pool.js): the facts it reports, its embed calls queued one
// after another, and its rows. Imports nothing.

/** The key of each model's test-only method that makes the wasm core panic (a symbol, so it is
 * not part of the declared interface). */
export const PANIC_FOR_TEST = Symbol.for('st5.panicForTest');
/** A page model's method that runs a function with its wasm model (collection.js cuts passages
 * with its tokenizer): a symbol, so that it is no public member. */
export const WITH_INNER = Symbol('st5.withInner');

/** What every model object reports, whichever runs it: model.js's `Model`, its Worker proxy
 * (worker-client.js) and the CPU pool (pool.js). */
export const MODEL_FACTS = [
  'device',
  'dim',
  'maxSeqLength',
  'variant',
  'fingerprint',
  'legacyFingerprint',
  'arithmetic',
  'weightBytes',
];

/**
 * Defines read-only getters `names` on class `cls`, each reading that property of `source(this)`
 * (call it from the class's static block, where `source` may read private fields).
 */
export function defineFacts(cls, source, names = MODEL_FACTS) {
  for (const name of names) {
    Object.defineProperty(cls.prototype, name, {
      get() {
        return source(this)[name];
      },
      configurable: true,
    });
  }
}

/** `embed`'s argument check: a rejected promise unless `texts` is an array of strings. */
export function rejectUnlessTexts(texts) {
  const ok = Array.isArray(texts) && texts.every((t) => typeof t === 'string');
  return ok ? null : Promise.reject(new TypeError('st5: embed() takes an array of strings'));
}

/** One model's `embed` calls, run one after another; each gets its own result or error. */
export class CallQueue {
  #tail = Promise.resolve();

  /** Queues `run(texts)` after every call so far; rejects a non-array-of-strings at once. */
  embed(texts, run) {
    const rejected = rejectUnlessTexts(texts);
    if (rejected) return rejected;
    const call = this.#tail.then(() => run(texts));
    this.#tail = call.catch(() => {});
    return call;
  }

  /** Resolves once every call queued so far has settled. */
  idle() {
    return this.#tail;
  }
}

/** Views of each row of a row-major `[n, dim]` array. */
export function rows(flat, n) {
  const dim = n ? flat.length / n : 0;
  return Array.from({ length: n }, (_, i) => flat.subarray(i * dim, (i + 1) * dim));
}
