// Where a quantized index keeps its f32 vectors for exact rescoring: only the candidates of a
// search are read (k × oversample rows), so they need not be in the tab's memory.
//
// - 'opfs': a file in the Origin Private File System, written and read by a dedicated worker
//   (rows-worker.js) through a sync access handle; a search reads its candidates there in one
//   message. The tab holds none of them. Each file is named per index object and held by a
//   Web Lock while that object lives, so that files left by closed tabs are found (their lock is
//   free) and removed the next time an index is created, and a live tab's file never is.
// - 'memory': a Float32Array in the tab (4 bytes a dimension): fastest, for small corpora and
//   browsers without OPFS.

import { RpcClient } from './rpc.js';

const DIR = 'st5-rows';

/** Whether this browser gives pages an Origin Private File System with Web Locks. */
export async function opfsAvailable() {
  try {
    if (!navigator.storage?.getDirectory || !navigator.locks) return false;
    await navigator.storage.getDirectory();
    return true;
  } catch {
    return false;
  }
}

/** Appends row-major f32 vectors, reads rows by id. */
class MemoryRows {
  kind = 'memory';
  #data = new Float32Array(0);
  #length = 0;
  constructor(dim) {
    this.dim = dim;
  }
  get bytes() {
    return this.#length * 4;
  }
  async append(vectors) {
    if (this.#length + vectors.length > this.#data.length) {
      const grown = new Float32Array(Math.max(this.#length + vectors.length, this.#data.length * 2));
      grown.set(this.#data.subarray(0, this.#length));
      this.#data = grown;
    }
    this.#data.set(vectors, this.#length);
    this.#length += vectors.length;
  }
  async rows(ids) {
    const out = new Float32Array(ids.length * this.dim);
    ids.forEach((id, i) => out.set(this.#data.subarray(id * this.dim, (id + 1) * this.dim), i * this.dim));
    return out;
  }
  async all() {
    return this.#data.slice(0, this.#length);
  }
  dispose() {
    this.#data = new Float32Array(0);
  }
}

class OpfsRows {
  kind = 'opfs';
  #rpc;
  #name;
  #release;
  #bytes = 0;

  static async create(dim) {
    const root = await navigator.storage.getDirectory();
    const dir = await root.getDirectoryHandle(DIR, { create: true });
    await sweep(dir);
    const store = new OpfsRows();
    store.dim = dim;
    store.#name = `${Date.now().toString(36)}-${crypto.randomUUID()}.f32`;
    store.#release = await hold(`${DIR}/${store.#name}`);
    // The file is read and written by rows-worker.js, which holds it with a sync access handle.
    const worker = new Worker(new URL('./rows-worker.js', import.meta.url), { type: 'module' });
    store.#rpc = new RpcClient(worker, { name: 'st5 rescoring worker' });
    try {
      await store.#rpc.call('open', { dir: DIR, name: store.#name });
    } catch (e) {
      store.dispose();
      throw e;
    }
    return store;
  }

  get bytes() {
    return this.#bytes;
  }

  append(vectors) {
    const at = this.#bytes;
    this.#bytes += vectors.byteLength;
    const copy = vectors.slice(); // the caller keeps its array; the copy is moved, not cloned
    return this.#rpc.call('append', { at, data: copy.buffer }, [copy.buffer]);
  }

  async rows(ids) {
    return new Float32Array(await this.#rpc.call('rows', { ids: Uint32Array.from(ids), row: this.dim * 4 }));
  }

  async all() {
    return new Float32Array(await this.#rpc.call('all'));
  }

  dispose() {
    // After the calls before it: close the handle, stop the worker, then remove the file.
    this.#rpc
      .call('close')
      .catch(() => {})
      .then(async () => {
        this.#rpc.terminate();
        const dir = await (await navigator.storage.getDirectory()).getDirectoryHandle(DIR);
        await dir.removeEntry(this.#name);
      })
      .catch(() => {})
      .finally(this.#release);
  }
}

/** Holds an exclusive Web Lock on `name` until the returned function is called. */
function hold(name) {
  return new Promise((granted) => {
    navigator.locks.request(name, () => new Promise((release) => granted(release)));
  });
}

/** Removes the files of index objects that no longer live (their lock is free). */
async function sweep(dir) {
  for await (const [name] of dir.entries()) {
    await navigator.locks.request(`${DIR}/${name}`, { ifAvailable: true }, async (lock) => {
      if (lock) await dir.removeEntry(name).catch(() => {});
    });
  }
}

/** A row store of `kind` ('opfs' or 'memory') for `dim`-wide vectors. */
export async function createRowStore(kind, dim) {
  if (kind === 'memory') return new MemoryRows(dim);
  if (!(await opfsAvailable()))
    throw new Error("st5: rescore 'opfs' needs the Origin Private File System, absent here");
  return OpfsRows.create(dim);
}
