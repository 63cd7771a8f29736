// The wasm module, instantiated once per page or worker, shared by the model and the index, and
// instantiated again after a trap (a Rust panic aborts the instance; see `guard`).

import { wasmSource } from './host.js';
import * as firstGlue from './wasm/st5_wasm.js';

// The smallest module that uses relaxed SIMD (`f32x4.relaxed_madd` on three zero vectors): it
// validates exactly where the engine supports relaxed SIMD.
const zeros = () => [0xfd, 0x0c, ...new Array(16).fill(0)];
const probeBody = [0, ...zeros(), ...zeros(), ...zeros(), 0xfd, 0x85, 0x02, 0x0b];
const RELAXED_PROBE = new Uint8Array([
  ...[0x00, 0x61, 0x73, 0x6d, 1, 0, 0, 0], // magic, version
  ...[1, 5, 1, 0x60, 0, 1, 0x7b], // types: () -> v128
  ...[3, 2, 1, 0], // one function of type 0
  ...[10, probeBody.length + 2, 1, probeBody.length, ...probeBody], // its code
]);

/**
 * Which module this page or worker runs: `'relaxed'` (gemm's kernels on relaxed SIMD's fused
 * multiply-add) where the engine validates relaxed SIMD, else `'simd128'`. Both give results
 * within 1e-5 of the reference. `globalThis.__st5WasmFlavor`, set before the first load, forces
 * one (the browser tests use it to cover both).
 */
export function wasmFlavor() {
  const forced = globalThis.__st5WasmFlavor;
  if (forced === 'relaxed' || forced === 'simd128') return forced;
  try {
    return WebAssembly.validate(RELAXED_PROBE) ? 'relaxed' : 'simd128';
  } catch {
    return 'simd128';
  }
}

let ready;
let current = null;
let exports = null;
let instances = 0;
let traps = 0;
// The compiled module: compiled once per page, and handed to the pool's workers (`useModule`),
// which then neither fetch nor compile it, and share its machine code instead of holding a copy
// each. In Node, 2 base-size workers were ready in 1.5 s instead of 2.5 s, and 2 st5-small
// workers left the process ~50 MiB smaller (docs/browser.md).
let compiled = null;

/** The compiled module once `wasm()` has resolved (else null), for a worker to `useModule`. */
export const wasmModule = () => compiled;

/** Makes `wasm()` instantiate `module` (the page's, posted to this worker) rather than compile
 * its own. Call before the first `wasm()`. */
export function useModule(module) {
  if (module instanceof WebAssembly.Module) compiled ??= module;
}

/** Compiles the module at `url`: as it streams in where the server labels it `application/wasm`,
 * else from its bytes (as wasm-bindgen's glue falls back); in Node from the file's bytes. */
async function compile(url) {
  const source = await wasmSource(url);
  if (!(source instanceof URL)) return WebAssembly.compile(source);
  const response = await fetch(source);
  if (!response.ok) throw new Error(`st5: ${source}: HTTP ${response.status} ${response.statusText}`);
  if (typeof WebAssembly.compileStreaming === 'function' && response.headers.get('content-type') === 'application/wasm')
    return WebAssembly.compileStreaming(response);
  return WebAssembly.compile(await response.arrayBuffer());
}
/**
 * Resolves to the wasm-bindgen glue of the live instance (its classes: `Model`, `Index`,
 * `FilePlanner`), instantiating the module on the first call and again after a trap.
 */
export function wasm() {
  ready ??= (async () => {
    // Two literal URLs, not one template: a bundler emits both files (a page downloads one), where
    // for a template webpack emits every file under wasm/ it might name, the .d.ts files too.
    const url =
      wasmFlavor() === 'relaxed'
        ? new URL('./wasm/st5_wasm_relaxed_bg.wasm', import.meta.url)
        : new URL('./wasm/st5_wasm_bg.wasm', import.meta.url);
    // wasm-bindgen's glue holds one instance per module record, so a fresh instance needs a fresh
    // record of the same file: the URL with a query. Bundlers leave this import alone.
    const glue = instances++
      ? await import(
          /* @vite-ignore */ /* webpackIgnore: true */ `${new URL('./wasm/st5_wasm.js', import.meta.url)}?instance=${instances}`
        )
      : firstGlue;
    compiled ??= await compile(url);
    exports = await glue.default({ module_or_path: compiled });
    current = glue;
    return glue;
  })();
  return ready;
}

/** The glue of the live instance; `wasm()` must have resolved. */
export function glue() {
  if (!current) throw new Error('st5: the wasm module is not instantiated (await wasm() first)');
  return current;
}

/** Bytes of the live instance's wasm memory (for the memory tests and benchmarks). */
export const wasmMemoryBytes = () => exports?.memory.buffer.byteLength ?? 0;

/** Changes when an instance traps: wasm objects made before the change died with it. */
export const generation = () => traps;

/**
 * Runs `run()`, a call into wasm named `call`. A trap (a Rust panic, which aborts the instance)
 * becomes an Error with `code: 'internal'`, the panic's message and `call`; the instance is then
 * dropped, and the next `wasm()` instantiates a fresh one. Other errors pass through.
 */
export async function guard(call, run) {
  const live = current;
  try {
    return await run();
  } catch (err) {
    if (!(err instanceof WebAssembly.RuntimeError)) throw err;
    let panic;
    try {
      panic = live?.takePanic();
    } catch {
      // the instance may be too broken to answer; the trap's own message stands
    }
    if (live === current) {
      current = null;
      ready = undefined;
      traps++;
    }
    const message = `st5: internal error in ${call}: ${panic ?? err.message}`;
    return Promise.reject(Object.assign(new Error(message, { cause: err }), { code: 'internal', call }));
  }
}
