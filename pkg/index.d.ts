// Types of the st5 npm package (index.js).

/** Where a model comes from: a directory URL (sentence-transformers or Hugging Face T5 layout)
 * or its files, as a Map/object of relative path → bytes or Blob, or a FileList / File[]. */
export type ModelSource =
  | string
  | URL
  | Map<string, ArrayBuffer | ArrayBufferView | Blob>
  | Record<string, ArrayBuffer | ArrayBufferView | Blob>
  | FileList
  | File[];

export type Device = 'webgpu' | 'cpu';
export type Variant = 'enc-mean' | 'enc-first' | 'encdec-first';

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
   * when the only adapter is a software one such as SwiftShader, which is far slower). */
  device?: Device | 'auto';
  /** Pooling variant; defaults to the model's Pooling module (enc-mean for a plain T5). */
  variant?: Variant;
  /** Texts per forward pass (default 32); batches are also split to the GPU's buffer limits. */
  batchSize?: number;
  /** Tokens kept per text; defaults to the model's `max_seq_length`. */
  maxSeqLength?: number;
  /** Caps any one device buffer below the adapter's own limit, in bytes. */
  maxBufferBytes?: number;
  /** Threads for the CPU path: `threads` Web Workers, each with its own copy of the weights, while
   * the page's model runs batches until the first worker has loaded (default: one per core, as
   * far as the workers' copies fit in 1 GiB; `1`: the page alone). Results are the same for any
   * value. Ignored on WebGPU. */
  threads?: number;
  /** Cache downloads with the Cache API (default true). */
  cache?: boolean;
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
  /** Threads embedding now: 1 on WebGPU; on the CPU, the workers loaded so far (1 before any). */
  readonly threads: number;
  /** One L2-normalised vector per text, in order. Calls are queued; any number may overlap. */
  embed(texts: string[]): Promise<Float32Array[]>;
  /** The same, as one row-major array of `texts.length * dim` values. */
  embedFlat(texts: string[]): Promise<Float32Array>;
  /** Frees the model (and ends its worker) once queued calls finish. */
  dispose(): Promise<void>;
}

/** A model on this thread (declaration merging gives the class the interface's members). */
export interface Model extends SentenceEncoder {}
export declare class Model {}

/** Loads a model on this thread. */
export function load(source: ModelSource, options?: LoadOptions): Promise<Model>;

/** Loads a model in a Web Worker; the page never blocks. `onProgress` runs on this thread. */
export function loadInWorker(source: ModelSource, options?: LoadOptions): Promise<SentenceEncoder>;

/** Deletes every cached st5 download. */
export function clearCache(): Promise<void>;
