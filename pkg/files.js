// Model files for st5: fetched from a base URL (discovered by the wasm core's `FilePlanner`, cached
// with the Cache API, with byte progress) or taken from memory (a file picker, a drop, a Map). In
// Node a file: URL is read from disk (host.js), with the same progress and the same 404s.

import { fetchUrl } from './host.js';

const CACHE = 'st5-v1';
const WEIGHTS = /\.(safetensors|bin)$/;
// A cached 404, so that a warm load needs no network at all.
const ABSENT = 'x-st5-absent';

/** The base URL as an absolute directory URL (with a trailing slash). */
function directory(baseUrl) {
  const here = globalThis.location?.href;
  const url = new URL(String(baseUrl), here);
  if (!url.pathname.endsWith('/')) url.pathname += '/';
  return url;
}

async function openCache(enabled) {
  if (!enabled || !globalThis.caches) return null;
  try {
    return await caches.open(CACHE);
  } catch {
    return null; // opaque origins and some private modes refuse the Cache API
  }
}

/** Removes every cached st5 download. */
export async function clearCache() {
  if (globalThis.caches) await caches.delete(CACHE);
}

/**
 * Fetches the files a model needs from `baseUrl` (a sentence-transformers or Hugging Face T5
 * directory), asking a `FilePlanner` (the wasm core) which ones, round by round.
 * @returns {Promise<{ files: Map<string, Uint8Array>, label: string }>}
 */
export async function fetchModelFiles(baseUrl, { cache = true, onProgress, FilePlanner }) {
  const base = directory(baseUrl);
  const store = await openCache(cache);
  const fetched = new Map();
  const planner = new FilePlanner(base.href);
  const progress = (e) => onProgress?.({ stage: 'download', ...e });

  const cached = async (url) => {
    const hit = store && (await store.match(url));
    if (!hit) return undefined;
    return hit.headers.get(ABSENT) ? null : new Uint8Array(await hit.arrayBuffer());
  };
  const markAbsent = (url) => store?.put(url, new Response('', { headers: { [ABSENT]: '1' } }));

  // GET with byte progress; null for a 404. `overall` tracks the weight downloads together.
  const get = async (name, overall) => {
    const url = new URL(name, base).href;
    const hit = await cached(url);
    if (hit !== undefined) {
      if (hit) {
        overall?.add(hit.byteLength, hit.byteLength);
        progress({ file: name, loaded: hit.byteLength, total: hit.byteLength, cached: true, ...overall?.state() });
      }
      return hit;
    }
    const res = await fetchUrl(url);
    if (res.status === 404) {
      await markAbsent(url);
      return null;
    }
    if (!res.ok) throw new Error(`st5: ${url}: HTTP ${res.status} ${res.statusText}`);
    // The cache gets its own stream of the response, so the page never holds a second copy for
    // it. Caching is best effort: a full quota must not fail the load.
    const caching = store?.put(url, res.clone()).catch(() => {});
    const total = Number(res.headers.get('content-length')) || 0;
    overall?.add(0, total);
    const bytes = await readBody(res.body, total, (loaded) => {
      overall?.add(loaded.delta, 0);
      progress({
        file: name,
        loaded: loaded.bytes,
        total: Math.max(total, loaded.bytes),
        cached: false,
        ...overall?.state(),
      });
    });
    progress({ file: name, loaded: bytes.byteLength, total: bytes.byteLength, cached: false, ...overall?.state() });
    await caching;
    return bytes;
  };

  // Weights are only asked about for existence during discovery: HEAD, not GET.
  const exists = async (name) => {
    const url = new URL(name, base).href;
    const hit = await cached(url);
    if (hit !== undefined) return hit !== null;
    const res = await fetchUrl(url, { method: 'HEAD' });
    if (res.status === 404) {
      await markAbsent(url);
      return false;
    }
    return true; // a server refusing HEAD is settled by the GET that follows
  };

  try {
    for (;;) {
      const plan = planner.next();
      if (plan.ready) {
        let loaded = 0;
        let total = 0;
        const overall = {
          add: (l, t) => ((loaded += l), (total += t)),
          state: () => ({ overallLoaded: loaded, overallTotal: total }),
        };
        const weights = await Promise.all(plan.ready.map((name) => get(name, overall)));
        plan.ready.forEach((name, i) => {
          if (!weights[i]) throw new Error(`st5: ${new URL(name, base).href}: not found (it existed a moment ago)`);
          fetched.set(name, weights[i]);
        });
        return { files: fetched, label: base.href };
      }
      await Promise.all(
        plan.need.map(async (name) => {
          if (WEIGHTS.test(name)) {
            if (await exists(name)) planner.present(name);
            else planner.absent(name);
          } else {
            const bytes = await get(name);
            if (bytes) {
              fetched.set(name, bytes);
              planner.add(name, bytes);
            } else planner.absent(name);
          }
        }),
      );
    }
  } finally {
    planner.free();
  }
}

/**
 * Reads a response body into one buffer. With a Content-Length (the uncompressed size, when the
 * server sends no Content-Encoding), a BYOB reader writes the bytes straight into a buffer of
 * that size: the file is held once, with no chunks left for the garbage collector. Otherwise,
 * or when the body turns out longer, chunks are gathered and joined at the end.
 */
async function readBody(body, expected, onChunk) {
  let buffer = null;
  let loaded = 0;
  let byob = null;
  if (expected > 0) {
    try {
      byob = body.getReader({ mode: 'byob' });
    } catch {
      byob = null; // not a byte stream in this browser: the default reader below
    }
  }
  if (byob) {
    buffer = new ArrayBuffer(expected);
    for (;;) {
      // Each read transfers the buffer it fills and hands back a view of it.
      const room = loaded < expected ? expected - loaded : 0;
      if (room === 0) break;
      const { done, value } = await byob.read(new Uint8Array(buffer, loaded, room));
      if (value) buffer = value.buffer;
      if (done) break;
      loaded += value.byteLength;
      onChunk({ bytes: loaded, delta: value.byteLength });
    }
    const { done, value } = loaded === expected ? await byob.read(new Uint8Array(1)) : { done: true };
    if (done) {
      byob.releaseLock();
      return new Uint8Array(buffer, 0, loaded);
    }
    // Longer than announced: keep what came, then gather the rest.
    byob.releaseLock();
    const head = [new Uint8Array(buffer, 0, loaded), value];
    loaded += value.byteLength;
    onChunk({ bytes: loaded, delta: value.byteLength });
    return gather(body.getReader(), head, loaded, onChunk);
  }
  return gather(body.getReader(), [], 0, onChunk);
}

/** Reads the rest of a stream as chunks after `chunks` (`loaded` bytes) and joins them. */
async function gather(reader, chunks, loaded, onChunk) {
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    chunks.push(value);
    loaded += value.byteLength;
    onChunk({ bytes: loaded, delta: value.byteLength });
  }
  const joined = new Uint8Array(loaded);
  let at = 0;
  for (const c of chunks) {
    joined.set(c, at);
    at += c.byteLength;
  }
  return joined;
}

/**
 * Files held in memory: a Map or object from relative path to ArrayBuffer / typed array / Blob,
 * or a FileList / File[] from `<input type=file webkitdirectory>` or a drop (the top folder of
 * `webkitRelativePath` is dropped, so `model/config.json` becomes `config.json`).
 * @returns {Promise<{ files: Map<string, Uint8Array>, label: string }>}
 */
export async function memoryFiles(source) {
  let entries;
  if (source instanceof Map) entries = [...source.entries()];
  else if (typeof FileList !== 'undefined' && source instanceof FileList) entries = filesToEntries([...source]);
  else if (Array.isArray(source)) entries = filesToEntries(source);
  else if (source && typeof source === 'object') entries = Object.entries(source);
  else throw new TypeError('st5: load() takes a base URL, or model files as a Map, an object, a FileList or File[]');
  const files = new Map();
  for (const [name, value] of entries) files.set(name.replace(/^\.\//, ''), await bytesOf(name, value));
  return { files, label: 'files:' };
}

function filesToEntries(list) {
  const rel = list.map((f) => f.webkitRelativePath || f.name);
  // Strip a common top folder, as a directory picker reports `model/config.json`.
  const top = rel.every((r) => r.includes('/')) && new Set(rel.map((r) => r.split('/')[0])).size === 1;
  return list.map((f, i) => [top ? rel[i].slice(rel[i].indexOf('/') + 1) : rel[i], f]);
}

async function bytesOf(name, value) {
  if (value instanceof Uint8Array) return value;
  if (value instanceof ArrayBuffer) return new Uint8Array(value);
  if (ArrayBuffer.isView(value)) return new Uint8Array(value.buffer, value.byteOffset, value.byteLength);
  if (typeof Blob !== 'undefined' && value instanceof Blob) return new Uint8Array(await value.arrayBuffer());
  throw new TypeError(`st5: file ${name} must be an ArrayBuffer, a typed array or a Blob`);
}
