// Types of the st5 npm package (index.js).

/** Where a model comes from: a Hugging Face hub id (`'sentence-transformers/sentence-t5-base'`,
 * resolved at `revision` on `hubUrl`), a directory URL (sentence-transformers or Hugging Face T5
 * layout; a relative one written with './', '/' or a trailing '/', so that it is not read as an
 * id; in Node.js a path, absolute or relative to the working directory, or a file: URL, and a
 * directory that exists wins over a hub id spelled the same), or its files, as a Map/object of
 * relative path → bytes or Blob, or a FileList / File[]. */
export type ModelSource =
  | string
  | URL
  | Map<string, ArrayBuffer | ArrayBufferView | Blob>
  | Record<string, ArrayBuffer | ArrayBufferView | Blob>
  | FileList
  | File[];

export type Device = 'webgpu' | 'cpu';
export type Variant = 'enc-mean' | 'enc-first' | 'encdec-first' | 'max' | 'mean-sqrt-len';

export type ProgressEvent =
  | {
      stage: 'download';
      /** Path relative to the model directory, e.g. `2_Dense/model.safetensors`. */
      file: string;
      loaded: number;
      total: number;
      /** Served from the Cache API. */
      cached: boolean;
      /** Bytes of all weight files together, once the weights are being fetched. */
      overallLoaded?: number;
      overallTotal?: number;
    }
  | { stage: 'init'; device: Device | 'auto' }
  | { stage: 'ready'; device: Device; ms: number };

export interface LoadOptions {
  /** `'auto'` (default): WebGPU on a hardware adapter when a device can be had, else the CPU (also
   * when the only adapter is a software one such as SwiftShader, which is far slower, and once
   * WebGPU has failed on this page). */
  device?: Device | 'auto';
  /** Pooling variant; defaults to the model's Pooling module (enc-mean for a plain T5). */
  variant?: Variant;
  /** Texts per forward pass (default 32); batches are also split to the GPU's buffer limits. */
  batchSize?: number;
  /** Tokens kept per text; defaults to the model's `max_seq_length`. */
  maxSeqLength?: number;
  /** Caps any one device buffer below the adapter's own limit, in bytes. */
  maxBufferBytes?: number;
  /** `'auto'` (default): an int8 model (`st5 quantize --dtype int8`) keeps its weights int8 on the
   * CPU and multiplies in int8 (a quarter of the memory, so more workers; faster where the CPU has
   * an integer dot product); on WebGPU it keeps them int8 in GPU memory (a quarter of it) and its
   * kernels dequantize them in registers, multiplying in f32. `'f32'`: every weight widened to
   * f32 at load, the exact path. */
  compute?: 'auto' | 'f32';
  /** Threads for the CPU path: `threads` Web Workers (in Node.js worker_threads), each with its
   * own copy of the weights, while the page's model runs batches until the first worker has
   * loaded (default: one per core, as far as the workers' copies (`weightBytes` each) fit in 1 GiB; `1`: the page
   * alone). Results are the same for any value. Ignored on WebGPU. */
  threads?: number;
  /** Start the CPU pool's workers at load, in the background (default false: on the first call
   * with more than one batch). For a page that will embed many texts (an index to build): the
   * workers load while it sets up, so that its first bulk call runs on every core. `createIndex`
   * starts them too. */
  startWorkers?: boolean;
  /** Cache downloads with the Cache API (default true; Node.js has none and reads every time). */
  cache?: boolean;
  /** For a hub id: the branch, tag or commit (default `'main'`). */
  revision?: string;
  /** For a hub id: the hub or a mirror serving `{hubUrl}/{id}/resolve/{revision}/{file}`
   * (default `'https://huggingface.co'`). */
  hubUrl?: string | URL;
  /** A soft prompt (a prompt file from `trainer` with `prompt_length`; Lester et al. 2021): vectors
   * put before every text that specialise this model to a domain without changing its weights.
   * A URL or the file's bytes. It must have been trained on this model (by weights fingerprint and
   * pooling), else `load` fails with a `'model'` error naming the file. The model's `fingerprint`
   * covers the prompt, so a saved index is never reused across prompts. */
  prompt?: string | URL | Blob | ArrayBuffer | Uint8Array;
  onProgress?: (event: ProgressEvent) => void;
}

export interface SentenceEncoder {
  /** The device in use; becomes `'cpu'` if WebGPU fails (the failed call is re-run there). */
  readonly device: Device;
  /** Embedding width. */
  readonly dim: number;
  /** Tokens kept per text; longer texts are truncated, as in sentence-transformers. */
  readonly maxSeqLength: number;
  readonly variant: Variant;
  /** The model's identity as an index file records it, the same string `st5 index build`
   * writes: the weights fingerprint (SHA-256 over `name:sha256` lines of the weight files), the
   * pooling variant, `maxSeqLength` and any soft prompt's SHA-256. What a saved or imported
   * index must have been built with. */
  readonly fingerprint: string;
  /** What index files of the package's old ST5IDX1 format recorded instead (SHA-256 over every
   * file of the model); only for opening such files. */
  readonly legacyFingerprint: string;
  /** `'int8'` when the model keeps int8 weights and multiplies in int8 (an int8 model on the CPU
   * with `compute: 'auto'`), else `'f32'`. */
  readonly arithmetic: 'int8' | 'f32';
  /** Bytes the loaded weights hold in one copy of the model (each CPU pool worker holds one). */
  readonly weightBytes: number;
  /** Threads embedding now: 1 on WebGPU; on the CPU, the workers loaded so far (1 before any). */
  readonly threads: number;
  /** Threads once every CPU worker has loaded: the pool's size (1 on WebGPU or with `threads: 1`). */
  readonly maxThreads: number;
  /** Starts a CPU pool's workers now instead of on the first call with more than one batch (as
   * `load`'s `startWorkers` option does); resolves with `threads` once each has loaded or
   * failed. Resolves at once with 1 where there is no pool. */
  startWorkers(): Promise<number>;
  /** The WebAssembly memory the model holds, in bytes: the page's module (`0` for a model from
   * `loadInWorker`) and each loaded worker's, each of which holds its own copy of the weights.
   * GPU buffers are not counted. */
  memory(): Promise<{ page: number; workers: number[] }>;
  /** One L2-normalised vector per text, in order. Calls are queued; any number may overlap. */
  embed(texts: string[]): Promise<Float32Array[]>;
  /** The same, as one row-major array of `texts.length * dim` values. */
  embedFlat(texts: string[]): Promise<Float32Array>;
  /** Frees the model (and ends its worker) once queued calls finish. */
  dispose(): Promise<void>;
}

/** A model on this thread (declaration merging gives the class the interface's members). */
export interface Model extends SentenceEncoder {
  /** The batches `embed` would run for `texts` (length-bucketed), as arrays of text indices. */
  planBatches(texts: string[]): number[][];
}
export declare class Model {}

/** Loads a model on this thread. */
export function load(source: ModelSource, options?: LoadOptions): Promise<Model>;

/** Loads a model in a Web Worker (in Node.js a worker_threads one); the page never blocks.
 * `onProgress` runs on this thread. */
export function loadInWorker(source: ModelSource, options?: LoadOptions): Promise<SentenceEncoder>;

/** Deletes every cached st5 download. */
export function clearCache(): Promise<void>;

/**
 * Errors from the wasm core carry a `code`: `'device'` (a lost GPU device or failed read-back:
 * `load`'s model re-runs the call on the CPU by itself), `'limit'` (one tensor would exceed the
 * device's buffer limit), `'model'` (bad files or input), `'internal'` (a bug in st5: the wasm
 * core panicked; `message` holds the panic's message and `call` the call that hit it). An internal
 * error never falls back to the CPU; the model loads itself again on a fresh wasm instance (a
 * fresh worker for `loadInWorker`) at its next call, and a `SearchIndex` made before it must be
 * opened again. `'invalid'`: a bad argument (a schema, a document, a filter); `'storage'`: OPFS
 * missing, full or held by another tab. Input of the wrong type is a `TypeError` without a code.
 */
export type ErrorCode = 'device' | 'limit' | 'model' | 'internal' | 'invalid' | 'storage';
export interface St5Error extends Error {
  code?: ErrorCode;
  /** For `'internal'`: the call that hit the panic (`'embed'`, `'load'`, `'SearchIndex.search'`, ...). */
  call?: string;
}

export interface IndexOptions {
  /** `'auto'` (default: as for `load`), `'webgpu'` or `'cpu'`: where the vectors live. */
  device?: Device | 'auto';
  /** The IndexedDB key `save` and `openIndex` use (default `'default'`). */
  name?: string;
  /** Caps one device buffer of vectors below the adapter's limit, in bytes. */
  maxBufferBytes?: number;
  /** Rows per device buffer (default: as many as fit). */
  shardRows?: number;
  /**
   * How the searchable vectors are stored: `'none'` (f32, exact; default), `'int8'` (1 byte a
   * dimension) or `'binary'` (1 bit). A quantized index searches `k × oversample` candidates on
   * its codes and rescores them exactly with their f32 vectors.
   */
  quantize?: Quantize;
  /** Candidates per result before rescoring (default: 4 for int8, 16 for binary). */
  oversample?: number;
  /**
   * Where a quantized index keeps the f32 vectors it rescores with: `'opfs'` (the Origin Private
   * File System, out of the tab's memory; default where available) or `'memory'` (faster reads;
   * the only one in Node.js).
   */
  rescore?: 'opfs' | 'memory';
}

export type Quantize = 'none' | 'int8' | 'binary';

export interface AddOptions {
  /** Texts per thread in each `embed` call (default 64): a call embeds `batchSize × maxThreads`
   * texts, so that every worker of a CPU pool has batches; `onProgress` follows each call. */
  batchSize?: number;
  onProgress?: (progress: { done: number; total: number; perSecond: number }) => void;
}

export interface Hit {
  /** The document's position in `texts`. */
  id: number;
  text: string;
  /** Cosine similarity (dot product of unit vectors). */
  score: number;
}

/** A searchable corpus on the device; ids are positions in `texts`. Exact top-k (a quantized
 * index: top-k of its rescored candidates). */
export declare class SearchIndex {
  /** The indexed documents, in id order. */
  readonly texts: string[];
  /** Texts embedded by this object so far (a restored index embeds none). */
  embedded: number;
  /** Documents indexed. */
  readonly size: number;
  /** Where the vectors live. */
  readonly device: Device;
  /** Device buffers the vectors occupy (more than one past the binding limit). */
  readonly shards: number;
  /** How the searchable vectors are stored. */
  readonly quantize: Quantize;
  /** Bytes of the searchable part (device or wasm memory). */
  readonly bytes: number;
  /** Where a quantized index's f32 vectors for rescoring live; null for `quantize: 'none'`. */
  readonly rescore: 'opfs' | 'memory' | null;
  /** Embeds and adds the texts not already indexed. */
  add(texts: string[], options?: AddOptions): Promise<{ added: number; ms: number }>;
  /**
   * Adds precomputed row-major vectors for `texts`, without embedding; searchable at once. The
   * promise settles when a quantized index's rescoring copy is written.
   */
  addVectors(texts: string[], vectors: Float32Array): Promise<void>;
  /** The `k` (default 10) documents closest to `query`, best first, ties to the lower id. */
  search(query: string, k?: number): Promise<{ hits: Hit[]; embedMs: number; searchMs: number }>;
  /** Top-k for row-major query vectors: one hit list per query. */
  searchVectors(queries: Float32Array, k?: number): Promise<Hit[][]>;
  /** Every f32 vector, row-major in id order. */
  vectors(): Promise<Float32Array>;
  /** Saves to IndexedDB under the index's name, replacing what was there (Node.js has no
   * IndexedDB: this rejects there; keep the index with `export`). */
  save(): Promise<void>;
  /** The index as one ST5INDEX file, the format `st5 index build` writes: a header, a quantized
   * index's codes, the f32 vectors, the texts and a SHA-256. `importIndex` and `st5 index query`
   * open it. */
  export(): Promise<Blob>;
  /** Frees the device memory (and a quantized index's rescoring file). */
  dispose(): void;
}

/** An empty index for `model`'s vectors. */
export function createIndex(model: SentenceEncoder, options?: IndexOptions): Promise<SearchIndex>;

/**
 * The index of `texts` for `model`: restored from IndexedDB when a saved one matches (no
 * embedding), extended when the saved corpus is a prefix of `texts`, else built; stale or
 * corrupt entries are rebuilt. `reason` says why a saved index was not used as it was. Without
 * IndexedDB (Node.js) it builds the index in memory every time and saves nothing.
 */
export function openIndex(
  model: SentenceEncoder,
  texts: string[],
  options?: IndexOptions & AddOptions,
): Promise<{ index: SearchIndex; restored: number; reason: string | null }>;

/** Progress of `importIndex`: bytes downloaded (a URL), then checked (the checksum). */
export interface ImportProgress {
  stage: 'download' | 'check' | 'ready';
  loaded: number;
  /** Bytes in all; null while downloading without a Content-Length. */
  total: number | null;
}

/**
 * Opens an index file (ST5INDEX) that `st5 index build` wrote or `SearchIndex.export` made, from
 * a Blob or File, its bytes, or a URL (in Node also a path). The whole file is checked first
 * (sizes, SHA-256, texts) and must have been built with `model` (its `fingerprint`); errors carry
 * `code: 'model'` and name the file. Files in the package's old ST5IDX1 format still open, with
 * a console note to export them again. The file is read a piece at a time: a quantized index of
 * a million vectors opens without holding the file in memory twice.
 */
export function importIndex(
  model: SentenceEncoder,
  source: Blob | ArrayBuffer | Uint8Array | string | URL,
  options?: IndexOptions & { onProgress?: (event: ImportProgress) => void },
): Promise<SearchIndex>;

/** A collection's schema: the id key, the text fields searched (with boosts), the stored fields
 * filtered, and the language of the text (its stemmer and stop words). */
export interface Schema {
  id?: string;
  text: { name: string; boost?: number }[];
  fields?: { name: string; type: 'string' | 'number' | 'boolean' | 'string[]' }[];
  language?: string;
  /** How long texts are cut: 'window' (default: passages fill the model's window, ending at a
   * sentence or line break) or 'paragraphs' (a blank line always ends a passage). */
  passages?: 'window' | 'paragraphs';
}

/** A filter on stored fields, as Orama writes it (`{ year: { gte: 2020 }, tags: { in: ['a'] },
 * or: [...], not: {...} }`), or its text form (`'year >= 2020 and tags in (a)'`). */
export type Where = string | Record<string, unknown>;

export interface CollectionSearchOptions {
  mode?: 'vector' | 'keyword' | 'hybrid';
  k?: number;
  where?: Where;
  /** Stored fields whose values to count over the matching documents. */
  facets?: string[];
  /** How hybrid fuses: 'zscore:ALPHA' (the default, zscore:0.65), 'convex:ALPHA', 'rrf', 'rrf:K', 'rrf:K:WEIGHT'. */
  fusion?: string;
  /** The query's last word also matches the words it begins (search as you type). */
  prefix?: boolean;
  /** The query's unit vector from this collection's model, when the page has it already
   * (`(await model.embed([query]))[0]`): nothing is embedded. Checked for width and length. */
  vector?: Float32Array | number[];
}

/** A passage of a hit; offsets are UTF-16 code units into the document's field. */
export interface PassageHit {
  field: string;
  start: number;
  end: number;
  text: string;
  score?: number;
  highlights: [number, number][];
}

export interface CollectionHit {
  id: string;
  score: number;
  vector_score?: number;
  keyword_score?: number;
  document: Record<string, unknown>;
  passages: PassageHit[];
}

export interface CollectionResults {
  hits: CollectionHit[];
  /** Documents that passed the filter. */
  matched: number;
  facets: Record<string, [string, number][]>;
}

/** Documents under a schema, searched by vector, keyword (BM25) or both, with filters, facets
 * and passages (docs/search.md). */
export class Collection {
  readonly size: number;
  readonly passages: number;
  /** Adds documents, all or none: one that breaks the schema, or an id already held, is refused. */
  add(docs: Record<string, unknown>[]): Promise<{ documents: number; passages: number }>;
  /** Adds documents or replaces those of the same id, all or none. */
  upsert(docs: Record<string, unknown>[]): Promise<{ documents: number; passages: number }>;
  remove(id: string): boolean;
  get(id: string): Record<string, unknown> | undefined;
  search(query: string, options?: CollectionSearchOptions): Promise<CollectionResults>;
  /** The index file (version 2) that `st5 index query` and `importCollection` open. */
  export(options?: { quantize?: 'none' | 'int8' | 'binary' }): Promise<Blob>;
  dispose(): void;
}

/** An empty collection for `model`'s vectors; long texts are cut into passages of its window,
 * each repeating `overlap` tokens (16) of the one before. Not for `loadInWorker` models. */
export function createCollection(
  model: SentenceEncoder,
  schema: Schema,
  options?: { overlap?: number },
): Promise<Collection>;

/** A collection from an index file built with `model` (`st5 index build --docs`, or `export`). */
export function importCollection(
  model: SentenceEncoder,
  source: Blob | ArrayBuffer | Uint8Array | string | URL,
  options?: { name?: string },
): Promise<Collection>;

/** A passage as pieces to show, the query's words `marked` (put them in `<mark>` elements):
 * plain text, never parsed as HTML. Their texts joined are `passage.text`. */
export function snippet(passage: PassageHit): { text: string; marked: boolean }[];

/** A collection kept in this origin's OPFS (`openCollection`): each change is saved, as a small
 * log segment, before its call resolves; the log is folded into a new index file when it has
 * grown past the last one. */
export class SavedCollection extends Collection {
  readonly name: string;
  /** Documents found in storage when it was opened (restored without embedding). */
  readonly restored: number;
  /** Bytes of the last index file and of the log after it; segments; compactions so far. */
  readonly storage: { baseBytes: number; logBytes: number; segments: number; generation: number };
  /** Resolves once every change made so far is on disk (`remove` saves in the background). */
  saved(): Promise<void>;
  /** Writes the whole collection again now, dropping the log. */
  compact(): Promise<void>;
  /** Frees it; resolves once its saves are done and another page may open it. */
  dispose(): Promise<void>;
}

/** Opens collection `name` saved in OPFS, or creates it with `schema`. A save cut short (a closed
 * tab, a crash) leaves the last good collection. Refused: another model or schema than the saved
 * one's (`code: 'model'`), a name open in another tab (`'storage'`), no OPFS (Node: `'storage'`). */
export function openCollection(
  model: SentenceEncoder,
  name: string,
  schema?: Schema,
  options?: { overlap?: number; compactBytes?: number },
): Promise<SavedCollection>;

/** Deletes saved collection `name`; whether there was one. */
export function deleteCollection(name: string): Promise<boolean>;
