// A collection kept in the Origin Private File System between visits, saved incrementally: each
// change (an add or upsert with the vectors its passages got, or a removal) is written as a small
// log segment of its own, and the whole collection is written again as an index file (version 2,
// the one `export` writes) only when the log has grown past the last one. Reopening reads the
// newest index file and replays its segments without embedding anything.
//
// In the folder `st5-collections/<name>/`:
// - `manifest.json`: the schema, the overlap and the model's fingerprint;
// - `base-<gen>.st5index`: the collection at the start of generation `gen` (none for gen 0);
// - `log-<gen>-<seq>.st5log`: the changes after it, in order. A segment is `ST5LOG1\n`, a u32 (LE)
//   length, that many bytes of JSON (`{ op: 'put', upsert, docs, dim }` or `{ op: 'remove', id }`),
//   zeros to a multiple of 4, the f32 vectors (LE), then the SHA-256 of all before it.
//
// Crash safety: every file is written whole before anything that depends on it (opfs-worker.js
// flushes before it answers), and a generation's files are deleted only once the next base is on
// disk. A segment cut short, or any after it, is dropped on open (its call had not returned); a
// base cut short leaves the generation before it, which is still whole. So a closed tab or a crash
// during a save leaves the last good collection.

import { Collection, REPLAY, SNAPSHOT, needsPageModel, newDocuments, openDocuments } from './collection.js';
import { sha256Bytes } from './hashes.js';
import { RpcClient } from './rpc.js';

const ROOT = 'st5-collections';
const MAGIC = new TextEncoder().encode('ST5LOG1\n');
const NAME = /^[\w.-]{1,128}$/;
const BASE = /^base-(\d+)\.st5index$/;
const LOG = /^log-(\d+)-(\d+)\.st5log$/;
// Write the base again once the log holds this many bytes (or the base's size, if larger), or
// this many segments.
const COMPACT_BYTES = 1 << 20;
const COMPACT_SEGMENTS = 256;

const failure = (message, code, cause) => Object.assign(new Error(`st5: ${message}`, { cause }), { code });

/** A log segment's bytes for `change`, its last 32 (the checksum) left for `seal`. */
function encodeChange(change, dim) {
  const { vectors, ...rest } = change;
  const json = new TextEncoder().encode(JSON.stringify(change.op === 'put' ? { ...rest, dim } : rest));
  const head = MAGIC.length + 4 + json.length;
  const vecAt = Math.ceil(head / 4) * 4;
  const floats = change.op === 'put' ? vectors.length : 0;
  const bytes = new Uint8Array(vecAt + floats * 4 + 32);
  bytes.set(MAGIC);
  new DataView(bytes.buffer).setUint32(MAGIC.length, json.length, true);
  bytes.set(json, MAGIC.length + 4);
  if (floats) new Float32Array(bytes.buffer, vecAt, floats).set(vectors);
  return bytes;
}

/** Writes the SHA-256 of the rest of `bytes` into their last 32. */
async function seal(bytes) {
  bytes.set(await sha256Bytes(bytes.subarray(0, bytes.length - 32)), bytes.length - 32);
}

/** The change a segment's bytes hold, or null where they are not a whole segment. */
async function decodeChange(bytes) {
  if (bytes.length < MAGIC.length + 4 + 32 || MAGIC.some((b, i) => bytes[i] !== b)) return null;
  const body = bytes.subarray(0, bytes.length - 32);
  const want = await sha256Bytes(body);
  if (want.some((b, i) => b !== bytes[body.length + i])) return null;
  const length = new DataView(bytes.buffer, bytes.byteOffset).getUint32(MAGIC.length, true);
  const vecAt = Math.ceil((MAGIC.length + 4 + length) / 4) * 4;
  if (vecAt > body.length || (body.length - vecAt) % 4) return null;
  const change = JSON.parse(new TextDecoder().decode(bytes.subarray(MAGIC.length + 4, MAGIC.length + 4 + length)));
  if (change.op === 'put') change.vectors = new Float32Array(body.slice(vecAt).buffer);
  return change;
}

/** The folder of collection `name` (made if `create`), or null. */
async function folder(name, create) {
  if (typeof name !== 'string' || !NAME.test(name))
    throw failure(
      `a collection name is 1-128 letters, digits, '_', '.' or '-' (got ${JSON.stringify(name)})`,
      'invalid',
    );
  if (!globalThis.navigator?.storage?.getDirectory || !globalThis.navigator?.locks)
    throw failure(
      'saved collections need the Origin Private File System (a browser page or worker); use export() and importCollection() elsewhere',
      'storage',
    );
  try {
    const root = await (await navigator.storage.getDirectory()).getDirectoryHandle(ROOT, { create });
    return await root.getDirectoryHandle(name, { create });
  } catch (e) {
    if (e?.name === 'NotFoundError') return null;
    throw failure(`cannot open the storage of collection '${name}': ${e.message}`, 'storage', e);
  }
}

async function readFile(dir, name) {
  return new Uint8Array(await (await (await dir.getFileHandle(name)).getFile()).arrayBuffer());
}

async function readJson(dir, name) {
  try {
    return JSON.parse(new TextDecoder().decode(await readFile(dir, name)));
  } catch (e) {
    if (e?.name === 'NotFoundError') return null;
    throw e;
  }
}

// How long an open waits for another holder of the collection (a page being closed, a
// collection just disposed) to let go.
const LOCK_WAIT_MS = 2000;

/** Holds the exclusive Web Lock `name` until the returned function is called; null if another
 * holder keeps it past LOCK_WAIT_MS. */
function hold(name) {
  return new Promise((granted, refused) => {
    navigator.locks
      .request(name, { signal: AbortSignal.timeout(LOCK_WAIT_MS) }, () => new Promise((release) => granted(release)))
      .catch((e) => (e?.name === 'AbortError' || e?.name === 'TimeoutError' ? granted(null) : refused(e)));
  });
}

/** The files of one collection's folder, and the writes to it, in order. */
class Store {
  #dir;
  #name;
  #rpc;
  #writes = Promise.resolve();
  #release;
  // Off while the saved changes are replayed.
  saving = false;
  gen = 0;
  seq = 0;
  baseBytes = 0;
  logBytes = 0;
  segments = 0;
  // A write failed: the next change writes the whole collection, so the files agree again.
  #stale = false;
  // The generation whose base could not be written.
  #failedGen = null;
  #compactBytes;

  constructor(dir, name, release, compactBytes) {
    this.#dir = dir;
    this.#name = name;
    this.#release = release;
    this.#compactBytes = compactBytes;
    const worker = new Worker(new URL('./opfs-worker.js', import.meta.url), { type: 'module' });
    this.#rpc = new RpcClient(worker, { name: 'st5 storage worker' });
  }

  get dir() {
    return this.#dir;
  }

  /** Writes `bytes` (or what they resolve to) as `file` after the writes before it, a log
   * segment `sealed` first. */
  #write(file, bytes, sealed = false) {
    const m = BASE.exec(file) ?? LOG.exec(file);
    const gen = m ? Number(m[1]) : null;
    const task = this.#writes.then(async () => {
      // A segment stands on its generation's base: none is written once that base failed.
      if (gen !== null && gen === this.#failedGen) throw new Error('an earlier save of this generation failed');
      const b = await bytes;
      if (sealed) await seal(b);
      const data = b.buffer.byteLength === b.length ? b.buffer : b.slice().buffer;
      return this.#rpc.call('write', { path: [ROOT, this.#name], name: file, data }, [data]);
    });
    this.#writes = task.catch(() => {});
    return task.catch((e) => {
      this.#stale = true;
      if (BASE.test(file)) this.#failedGen = gen;
      throw failure(`could not save collection '${this.#name}' (${file}): ${e.message}`, 'storage', e);
    });
  }

  /** Runs `task` after the writes before it, as one of them. */
  #after(task) {
    const next = this.#writes.then(task);
    this.#writes = next.catch(() => {});
    return next;
  }

  writeManifest(manifest) {
    return this.#write('manifest.json', new TextEncoder().encode(JSON.stringify(manifest)));
  }

  /** Saves one change, made just now to `collection` (whose state already includes it). */
  record(collection, change, dim) {
    const grown = this.logBytes >= Math.max(this.#compactBytes, this.baseBytes) || this.segments >= COMPACT_SEGMENTS;
    if (this.#stale || grown) return this.compact(collection);
    const bytes = encodeChange(change, dim);
    const file = `log-${this.gen}-${this.seq++}.st5log`;
    this.logBytes += bytes.length;
    this.segments++;
    return this.#write(file, bytes, true);
  }

  /** Writes the collection as it is now as the next generation's base, then deletes the older
   * generations' files. */
  compact(collection) {
    const gen = this.gen + 1;
    const bytes = collection[SNAPSHOT](); // the state now, taken before any later change
    this.gen = gen;
    this.seq = 0;
    this.logBytes = 0;
    this.segments = 0;
    this.#stale = false;
    bytes.then((b) => (this.baseBytes = b.length)).catch(() => {});
    // In the queue at once, so that no later change's segment is written before this base.
    const written = this.#write(`base-${gen}.st5index`, bytes);
    this.#after(() => written.then(() => this.sweep(gen)));
    return written;
  }

  /** Deletes the files of generations other than `gen` (those before it, and any after it
   * that a compaction cut short left), and `extra` (torn files of `gen`). */
  async sweep(gen, extra = []) {
    const doomed = [...extra];
    for await (const [file] of this.#dir.entries()) {
      const m = BASE.exec(file) ?? LOG.exec(file);
      if (m && Number(m[1]) !== gen) doomed.push(file);
    }
    for (const file of doomed) await this.#dir.removeEntry(file).catch(() => {});
  }

  /** Resolves once every write asked for so far is on disk. */
  flush() {
    return this.#writes;
  }

  /** Resolves once the writes asked for are done and the collection's lock is let go. */
  close() {
    return this.#writes.finally(() => (this.#rpc.terminate(), this.#release()));
  }
}

/** A collection saved in OPFS as it changes: `openCollection`. */
export class SavedCollection extends Collection {
  #store;
  /** Documents found in storage when it was opened. */
  restored = 0;

  constructor(model, docs, store) {
    super(model, docs, (change) => store.saving && store.record(this, change, model.dim));
    this.#store = store;
  }

  get name() {
    return this.#store.dir.name;
  }

  /** What the collection takes in storage: its base file, the log after it, its generation. */
  get storage() {
    const s = this.#store;
    return { baseBytes: s.baseBytes, logBytes: s.logBytes, segments: s.segments, generation: s.gen };
  }

  /** Resolves once every change made so far is saved. */
  saved() {
    return this.#store.flush();
  }

  /** Writes the whole collection again (the log is folded into a new base). */
  async compact() {
    await this.saved();
    return this.#store.compact(this);
  }

  /** Frees the collection; resolves once its saves are done and another page may open it. */
  dispose() {
    const closed = this.#store.close();
    super.dispose();
    return closed;
  }
}

/**
 * Opens collection `name` saved in this origin's OPFS, or creates it with `schema` (as for
 * `createCollection`); every change is saved before its call resolves. `schema` may be left out
 * to open one that exists. Refused: another schema or model than the saved one's (`code:
 * 'model'`), a name held open by another tab (`code: 'storage'`), OPFS missing (Node).
 */
export async function openCollection(model, name, schema, { overlap = 16, compactBytes = COMPACT_BYTES } = {}) {
  needsPageModel(model);
  const dir = await folder(name, true);
  const release = await hold(`${ROOT}/${name}`);
  if (!release) throw failure(`collection '${name}' is open in another tab or worker of this origin`, 'storage');
  const store = new Store(dir, name, release, compactBytes);
  try {
    return await restore(model, name, schema, overlap, store);
  } catch (e) {
    await store.close();
    throw e;
  }
}

async function restore(model, name, schema, overlap, store) {
  const dir = store.dir;
  let manifest = await readJson(dir, 'manifest.json').catch((e) => {
    throw failure(`collection '${name}': manifest.json is unreadable (${e.message})`, 'model', e);
  });
  if (manifest) {
    if (manifest.model !== model.fingerprint)
      throw failure(
        `collection '${name}' was saved with another model (${manifest.model}; this one: ${model.fingerprint}); deleteCollection('${name}') to start again`,
        'model',
      );
    if (schema !== undefined && JSON.stringify(schema) !== JSON.stringify(manifest.schema))
      throw failure(
        `collection '${name}' was saved with another schema (${JSON.stringify(manifest.schema)}); deleteCollection('${name}') to start again`,
        'model',
      );
  } else {
    if (schema === undefined)
      throw failure(`no collection '${name}' is saved here, and no schema was given to create it`, 'invalid');
    manifest = { version: 1, schema, overlap, model: model.fingerprint };
    await store.writeManifest(manifest);
  }

  // The newest base that opens; an older one is used only if a newer was cut short.
  const names = [];
  for await (const [file] of dir.entries()) names.push(file);
  const bases = names
    .map((f) => BASE.exec(f))
    .filter(Boolean)
    .map((m) => ({ file: m[0], gen: Number(m[1]) }))
    .sort((a, b) => b.gen - a.gen);
  let collection = null;
  const broken = [];
  for (const { file, gen } of bases) {
    const bytes = await readFile(dir, file);
    try {
      const docs = await openDocuments(model, bytes, file);
      collection = new SavedCollection(model, docs, store);
      Object.assign(store, { gen, baseBytes: bytes.length });
      break;
    } catch (e) {
      if (bases[bases.length - 1].file === file)
        throw failure(`collection '${name}': ${file} is damaged and no older copy is left (${e.message})`, 'model', e);
      console.warn(`st5: collection '${name}': ${file} is damaged (${e.message}); opening the copy before it`);
      broken.push(file);
    }
  }
  collection ??= new SavedCollection(model, await newDocuments(model, manifest.schema, manifest.overlap), store);

  // Its segments, in order, up to the first that is not whole (a write cut short).
  const logs = names
    .map((f) => LOG.exec(f))
    .filter((m) => m && Number(m[1]) === store.gen)
    .map((m) => ({ file: m[0], seq: Number(m[2]) }))
    .sort((a, b) => a.seq - b.seq);
  for (let i = 0; i < logs.length; i++) {
    const bytes = await readFile(dir, logs[i].file);
    const change = await decodeChange(bytes);
    if (!change || logs[i].seq !== i) {
      broken.push(...logs.slice(i).map((l) => l.file));
      break;
    }
    try {
      await collection[REPLAY](change);
    } catch (e) {
      throw failure(`collection '${name}': ${logs[i].file} does not apply (${e.message})`, 'model', e);
    }
    Object.assign(store, { seq: i + 1, segments: i + 1, logBytes: store.logBytes + bytes.length });
  }
  await store.sweep(store.gen, broken);
  collection.restored = collection.size;
  store.saving = true;
  return collection;
}

/** Deletes saved collection `name` (it must not be open); whether it existed. */
export async function deleteCollection(name) {
  const dir = await folder(name, false);
  if (!dir) return false;
  const release = await hold(`${ROOT}/${name}`);
  if (!release) throw failure(`collection '${name}' is open in another tab or worker of this origin`, 'storage');
  try {
    const root = await (await navigator.storage.getDirectory()).getDirectoryHandle(ROOT);
    await root.removeEntry(name, { recursive: true });
    return true;
  } finally {
    release();
  }
}
