// Request and reply between a page and a dedicated worker over postMessage: the one protocol of
// the model's worker (worker-client.js ↔ worker.js) and of the rescoring rows' worker
// (row-store.js ↔ rows-worker.js).
//
// A request is `{ id, op, ...args }`. Its reply is `{ id, value }`, or `{ id, error }` with the
// error's `message`, `code` and `call`, which the caller gets back as an Error with the same
// fields. Messages without an id are notices (a worker's progress or warnings), handed to the
// client's `onNotice`.
//
// In Node the worker is a worker_threads one (host.js's `nodeWorker`), which has `ref` and
// `unref`: it keeps the process alive only while a call is in flight, so that a script ends
// when its work is done even if it never disposes its model. Web Workers have neither.

const TRANSFER = Symbol('transfer');

/** A reply `value` whose `buffers` move to the caller instead of being copied. */
export const transfer = (value, buffers) => ({ [TRANSFER]: buffers, value });

/** The calling side: one worker, its calls in flight, and what its notices go to. */
export class RpcClient {
  #worker;
  #next = 0;
  #pending = new Map();

  /**
   * @param {Worker} worker
   * @param {{ name: string, onNotice?: (data: object) => void }} options `name` prefixes the
   *   error every call in flight gets when the worker fails to start or throws outside a call
   */
  constructor(worker, { name, onNotice }) {
    this.#worker = worker;
    worker.unref?.();
    worker.onmessage = ({ data }) => {
      if (data.id === undefined) return onNotice?.(data);
      const call = this.#pending.get(data.id);
      this.#pending.delete(data.id);
      if (!this.#pending.size) worker.unref?.();
      if (data.error === undefined) return call?.resolve(data.value);
      const { message, code, call: where } = data.error;
      call?.reject(Object.assign(new Error(message), { code, call: where }));
    };
    worker.onerror = (e) => {
      const err = new Error(`${name}: ${e.message || 'failed to start'}`);
      for (const call of this.#pending.values()) call.reject(err);
      this.#pending.clear();
      worker.unref?.();
    };
  }

  /** Runs `op` with `args` in the worker; resolves to its reply's value. */
  call(op, args = {}, buffers = []) {
    const id = this.#next++;
    return new Promise((resolve, reject) => {
      this.#pending.set(id, { resolve, reject });
      this.#worker.ref?.();
      this.#worker.postMessage({ ...args, id, op }, buffers);
    });
  }

  /** Ends the worker at once; calls in flight never settle. */
  terminate() {
    this.#worker.terminate();
  }
}

/** The worker's side of a notice (progress, a warning): a message without an id, which the
 * client hands to its `onNotice`. */
export const notify = (data) => self.postMessage(data);

/**
 * The worker's side: answers each request with `await ops[op](request)`, or with the error it
 * threw. With `inOrder`, a request starts only once the one before it has been answered (for ops
 * that share state without queueing on their own).
 */
export function serve(ops, { inOrder = false } = {}) {
  let queue = Promise.resolve();
  const answer = async (data) => {
    const { id, op } = data;
    try {
      const result = await ops[op](data);
      const moved = result?.[TRANSFER];
      self.postMessage({ id, value: moved ? result.value : result }, moved ?? []);
    } catch (err) {
      self.postMessage({ id, error: { message: err?.message ?? String(err), code: err?.code, call: err?.call } });
    }
  };
  self.onmessage = ({ data }) => {
    if (inOrder) queue = queue.then(() => answer(data));
    else answer(data);
  };
}
