// What differs between the browser and Node.js, decided here alone: whether this is Node, what a
// relative source means (a URL beside the page, or a path beside the working directory), how a
// file: URL is read (Node's fetch refuses them), how many cores there are, and how a worker
// starts (worker_threads in Node, behind the part of the Web Worker interface rpc.js uses).
// Node's built-in modules are imported dynamically from a variable specifier, with the
// bundlers' ignore comments, so that a browser bundler never sees them; in the browser none of
// these imports runs.

/** True in Node.js (and in Deno and Bun, which present themselves as Node and have its modules). */
export const inNode = typeof globalThis.process?.versions?.node === 'string';

const builtin = (name) => import(/* @vite-ignore */ /* webpackIgnore: true */ `node:${name}`);

// A URL scheme has two letters or more: `C:\models` is a Windows path, not a URL.
const SCHEME = /^[a-z][a-z\d+.-]+:/i;

/**
 * `source` (a string or URL) as an absolute URL string. In the browser a relative one resolves
 * against the page (in a worker, its script). In Node a string without a scheme is a path on
 * disk, absolute or relative to the working directory, and becomes its file: URL.
 */
export async function absoluteUrl(source) {
  const s = String(source);
  if (!inNode || SCHEME.test(s)) return new URL(s, globalThis.location?.href).href;
  const [{ pathToFileURL }, { resolve }] = await Promise.all([builtin('url'), builtin('path')]);
  return pathToFileURL(resolve(s)).href;
}

/** In Node, whether `path` (absolute or relative to the working directory) is a directory: a
 * directory that exists wins over a hub id spelled the same. Always false in the browser. */
export async function isDirectory(path) {
  if (!inNode) return false;
  const { stat } = await builtin('fs/promises');
  return stat(path).then(
    (s) => s.isDirectory(),
    () => false,
  );
}

/**
 * `fetch(url, init)`, except that in Node a file: URL is read from disk, answered as a server
 * would: 200 with the file's bytes (streamed, `fileBody`) and Content-Length, or 404 where
 * there is no file.
 */
export async function fetchUrl(url, init) {
  if (!inNode || !String(url).startsWith('file:')) return fetch(url, init);
  const [{ open }, { fileURLToPath }] = await Promise.all([builtin('fs/promises'), builtin('url')]);
  const handle = await open(fileURLToPath(url)).catch((err) => {
    if (err.code === 'ENOENT' || err.code === 'ENOTDIR' || err.code === 'EISDIR') return null;
    throw err;
  });
  const info = await handle?.stat();
  if (!info?.isFile()) {
    await handle?.close();
    return new Response(null, { status: 404, statusText: 'Not Found' });
  }
  const headers = { 'content-length': String(info.size) };
  if (init?.method !== 'HEAD') return new Response(fileBody(handle), { status: 200, headers });
  await handle.close();
  return new Response(null, { status: 200, headers });
}

/** Bytes a read asks for at most: progress events come this often. */
const FILE_READ_BYTES = 16 * 2 ** 20;

/**
 * A byte stream of an open file (closed at its end): a BYOB reader's buffer is filled straight
 * from disk, up to `FILE_READ_BYTES` a read. Not `fs.openAsBlob`'s stream: it reads 64 KiB at a
 * time, and each BYOB read transfers the reader's whole buffer, so a 110 MB model took 6.7 s to
 * read (most of it the garbage collector's), against 0.16 s this way.
 */
function fileBody(handle) {
  return new ReadableStream({
    type: 'bytes',
    autoAllocateChunkSize: 2 ** 20, // for a default reader (the Response's own methods)
    async pull(controller) {
      const request = controller.byobRequest;
      const { view } = request;
      const { bytesRead } = await handle.read(view, 0, Math.min(view.byteLength, FILE_READ_BYTES), null);
      if (bytesRead === 0) {
        await handle.close();
        controller.close();
      }
      request.respond(bytesRead);
    },
    cancel: () => handle.close(),
  });
}

/** What wasm-bindgen's init takes for the module at `url`: the URL in the browser (compiled as
 * it streams in), its bytes when it is a file in Node. */
export async function wasmSource(url) {
  if (!inNode || url.protocol !== 'file:') return url;
  const { readFile } = await builtin('fs/promises');
  return readFile(url);
}

/** Logical cores: `navigator.hardwareConcurrency`, or in Node `os.availableParallelism()` (Node 20
 * has no `navigator`). */
export async function cores() {
  if (inNode) return (await builtin('os')).availableParallelism();
  return globalThis.navigator?.hardwareConcurrency ?? 1;
}

/** Whether this thread can start workers (the CPU pool, `loadInWorker`). */
export const canStartWorkers = inNode || typeof Worker !== 'undefined';

// The worker_threads side of nodeWorker: the globals a Web Worker module uses (`self`,
// `postMessage`, `onmessage`), then the module. Messages that arrive while it is still loading
// wait for it, in order.
const NODE_WORKER_BOOT = `
const { parentPort, workerData } = require('node:worker_threads');
let waiting = [];
globalThis.self = globalThis;
globalThis.postMessage = (data, transfer) => parentPort.postMessage(data, transfer);
parentPort.on('message', (data) => (waiting ? waiting.push(data) : globalThis.onmessage?.({ data })));
import(workerData).then(() => {
  const queued = waiting;
  waiting = null;
  for (const data of queued) globalThis.onmessage?.({ data });
});
`;

/**
 * In Node, a worker_threads Worker running the package's module `path` (`'./worker.js'`), dressed
 * as a Web Worker for rpc.js: `onmessage`, `onerror`, `postMessage`, `terminate`, plus `ref` and
 * `unref` (rpc.js holds the process open only while a call is in flight, so that a script that
 * never disposes its model still exits). The URL is built here from a variable, not with a
 * literal `new URL('./worker.js', import.meta.url)`, which browser bundlers would copy as an
 * asset that no browser uses.
 */
export async function nodeWorker(path) {
  const { Worker } = await builtin('worker_threads');
  // Not `new URL(path, import.meta.url)` inline either: webpack reads that form as a request for
  // every file `path` might name.
  const here = import.meta.url;
  const worker = new Worker(NODE_WORKER_BOOT, { eval: true, workerData: new URL(path, here).href });
  let ended = false;
  const port = {
    onmessage: null,
    onerror: null,
    postMessage: (data, transfer) => worker.postMessage(data, transfer),
    terminate: () => {
      ended = true;
      worker.terminate();
    },
    ref: () => worker.ref(),
    unref: () => worker.unref(),
  };
  const fail = (message) => {
    if (ended) return;
    ended = true;
    port.onerror?.({ message });
  };
  worker.on('message', (data) => port.onmessage?.({ data }));
  worker.on('error', (err) => fail(err?.message ?? String(err)));
  worker.on('exit', (code) => fail(`exited with code ${code}`));
  return port;
}
