// Loading a model: where its files come from (a directory URL, in Node a path, a Hugging Face hub
// id, or files in memory), its soft prompt, its device, and for the CPU a pool of workers. `load`
// makes a `Model` on this thread (model.js); `loadInWorker` makes one in a worker
// (worker-client.js).

import { chooseDevice } from './devices.js';
import { fetchModelFiles, memoryFiles } from './files.js';
import { absoluteUrl, canStartWorkers, cores, fetchUrl, isDirectory } from './host.js';
import { Model, applyPrompt, loadInner } from './model.js';
import { PoolModel, defaultThreads } from './pool.js';
import { combineHashes, fileHashes, sha256 } from './hashes.js';
import { glue, wasm } from './runtime.js';
import { startWorker } from './worker-client.js';

const isUrl = (s) => typeof s === 'string' || s instanceof URL;

/** A Hugging Face hub id (`owner/name`), as transformers.js takes them. A directory path says so
 * with './', '/', a trailing '/' or a scheme; in Node a directory that exists is a path too. */
const HUB_ID = /^[A-Za-z0-9][\w.-]*\/[\w.-]+$/;
const DEFAULT_HUB_URL = 'https://huggingface.co';

const isHubId = async (s) => typeof s === 'string' && HUB_ID.test(s) && !(await isDirectory(s));

/**
 * Where `source`'s files are: `{ url, hub }`, `url` the absolute directory URL (for a hub id, its
 * files at `revision` on `hubUrl`, which `hub` names for errors); `url` null for files in memory.
 */
async function locate(source, { revision = 'main', hubUrl = DEFAULT_HUB_URL } = {}) {
  if (!isUrl(source)) return { url: null, hub: null };
  if (!(await isHubId(source))) return { url: await absoluteUrl(source), hub: null };
  const base = `${String(hubUrl).replace(/\/+$/, '')}/${source}/resolve/${encodeURIComponent(revision)}/`;
  return { url: await absoluteUrl(base), hub: `${source} (revision ${revision}) on ${hubUrl}` };
}

/**
 * Loads a Sentence-T5 model.
 * @param {string | URL | Map | object | FileList | File[]} source a directory URL (in Node also
 *   a path) holding a sentence-transformers or Hugging Face T5 layout, a hub id, or the files
 * @param {import('./index.d.ts').LoadOptions} [options]
 * @returns {Promise<Model>}
 */
export function load(modelSource, options = {}) {
  return loadKnowing(modelSource, options, null);
}

/** `load`, given the files' SHA-256 by name when the caller has them (a pool's worker gets the
 * page's), so that they are not computed again. */
export async function loadKnowing(modelSource, options, knownHashes) {
  const {
    device = 'auto',
    onProgress,
    cache = true,
    threads,
    startWorkers = false,
    prompt,
    revision,
    hubUrl,
    ...modelOptions
  } = options;
  const started = performance.now();
  const { url, hub } = await locate(modelSource, { revision, hubUrl });
  await wasm();
  const promptBytes = prompt == null ? null : readPrompt(prompt);
  const { files, label } = url
    ? await fetchModelFiles(url, { cache, onProgress, FilePlanner: glue().FilePlanner }).catch((err) => {
        // Name what the caller asked for, not only the URL it became.
        throw hub ? Object.assign(new Error(`st5: ${hub}: ${err.message}`), { code: err.code }) : err;
      })
    : await memoryFiles(modelSource);
  // Web Crypto hashes a copy of each file off the main thread: beside the model's construction
  // for small models, where the time matters; before it for large ones, where the memory does
  // (the copy is gone before wasm takes its own).
  const hashes = knownHashes ? Promise.resolve(knownHashes) : fileHashes(files);
  if (weightBytes(files) > HASH_BEFORE_LOAD_BYTES) await hashes;
  const wanted = await chooseDevice(device);
  onProgress?.({ stage: 'init', device: wanted });
  let inner = await loadInner(files, { ...modelOptions, device: wanted }, label);
  const hashByName = await hashes;
  // The weights fingerprint: over the weight files wasm names. A soft prompt is checked against it.
  const weights = await combineHashes(hashByName, inner.weightFiles);
  let applied = null;
  let promptHash;
  if (promptBytes) {
    const bytes = await promptBytes;
    applied = { ...bytes, fingerprint: weights };
    inner = await applyPrompt(inner, applied);
    promptHash = await sha256(bytes.bytes);
    hashByName.set('(soft prompt)', promptHash);
  }
  // The model's identity, as `st5 index build` records it (st5_format::fingerprint::
  // index_identity): weights, pooling, max_seq_length and prompt, so that vectors made with
  // another prompt are not reused and a file built by the CLI opens here.
  const id = inner.indexIdentity(weights, promptHash);
  // The identity files exported before ST5INDEX recorded: every file's hash.
  const legacyId = combineHashes(hashByName);
  onProgress?.({ stage: 'ready', device: inner.device, ms: performance.now() - started });
  // For a URL the files are read again (from the cache) only if WebGPU fails or the module
  // traps; in-memory sources are the caller's own objects, so holding them costs nothing extra.
  const reload = async () => {
    await wasm();
    return url ? fetchModelFiles(url, { cache, FilePlanner: glue().FilePlanner }) : memoryFiles(modelSource);
  };
  const model = new Model(inner, reload, modelOptions, { fingerprint: id, legacyFingerprint: await legacyId }, applied);
  // Each worker holds what the page's model holds: its weights as loaded (int8 codes for an int8
  // model, f32 otherwise), not the files' size.
  const machineCores = await cores();
  const workers = threads ?? defaultThreads(inner.weightBytes, machineCores);
  if (inner.device !== 'cpu' || !(workers > 1) || !canStartWorkers) return model;
  // Workers get the fetched files (a copy each) and load them on the CPU, one thread each.
  const workerOptions = { ...modelOptions, device: 'cpu', threads: 1, prompt: applied?.bytes };
  // The page's hashes go along: a worker would otherwise hash every weight byte again.
  const spawners = Array.from(
    { length: workers },
    () => () => startWorker(files, workerOptions, { hashes: hashByName }),
  );
  const pool = new PoolModel(model, spawners, machineCores);
  // Not awaited: the workers load beside whatever the page does next.
  if (startWorkers) pool.startWorkers();
  return pool;
}

/** Weights above this are hashed before the model is built, not beside it. */
const HASH_BEFORE_LOAD_BYTES = 64 * 2 ** 20;

/** Bytes of the weight files: what each extra copy of the model costs, roughly. */
const weightBytes = (files) =>
  [...files].reduce((n, [name, bytes]) => n + (/\.(safetensors|bin)$/.test(name) ? bytes.byteLength : 0), 0);

/** A soft prompt's bytes and the name its errors give, from a URL or the bytes themselves. */
async function readPrompt(prompt) {
  if (isUrl(prompt)) {
    const url = await absoluteUrl(prompt);
    const response = await fetchUrl(url);
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

/**
 * As `load`, but the model runs in a worker (a Web Worker; in Node a worker_threads one), so the
 * page never blocks. The returned object has the same interface; `onProgress` is called on this
 * thread.
 */
export async function loadInWorker(model, options = {}) {
  const { onProgress, ...rest } = options;
  if (!canStartWorkers) throw new Error('st5: loadInWorker needs Web Workers, which this environment lacks');
  // The worker resolves URLs against its own script: pass them absolute. A hub id goes as it is,
  // so that the worker's errors name it.
  const absolute = (s) => (isUrl(s) ? absoluteUrl(s) : s);
  const source = (await isHubId(model)) ? model : await absolute(model);
  const hubUrl = rest.hubUrl === undefined ? undefined : await absolute(rest.hubUrl);
  return startWorker(source, { ...rest, prompt: await absolute(rest.prompt), hubUrl }, { onProgress });
}
