// st5: Sentence-T5 sentence embeddings in the browser, the package's public entry point. A thin
// layer over the wasm core (crates/st5-wasm), one module a job:
// - load.js: `load` and `loadInWorker` (model files from a URL, a hub id or memory; soft prompts;
//   the device; on the CPU a pool of Workers, pool.js, one per core);
// - model.js: `Model`, a model on this thread (call queue, WebGPU → CPU fallback, reload after a
//   trap); worker-client.js: the same in a Web Worker (worker.js), over rpc.js;
// - files.js: fetching and caching model files; devices.js: device names and `'auto'`;
// - search-index.js: semantic search over a corpus (row-store.js: a quantized index's rows);
// - collection.js: documents under a schema, searched by vector, keyword or both;
//   collection-store.js keeps one in OPFS, saved change by change (opfs-worker.js writes).
// index.d.ts declares what this file exports.

export { load, loadInWorker } from './load.js';
export { Model } from './model.js';
export { clearCache } from './files.js';
export { SearchIndex, createIndex, importIndex, openIndex } from './search-index.js';
export { Collection, createCollection, importCollection, snippet } from './collection.js';
export { SavedCollection, deleteCollection, openCollection } from './collection-store.js';
