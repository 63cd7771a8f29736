// The devices a model or a search index can run on: their names, what `device: 'auto'` picks, and
// the page's memory of a WebGPU failure. The model loader (load.js), the model's fallback to the
// CPU (model.js) and the search index (search-index.js) all ask here, so that they agree.

/** The device names the package accepts, in order of preference for 'auto'. Checked against the Rust `DeviceChoice` enum by tests/devices.rs. */
export const DEVICES = Object.freeze(['webgpu', 'cpu']);

// Once WebGPU has failed on this page (or in this worker), `device: 'auto'` goes straight to the
// CPU: a device that was lost once is likely to be lost again.
let webgpuFailed = false;

/** Records that WebGPU failed here: later `'auto'` choices take the CPU. */
export function noteWebgpuFailed() {
  webgpuFailed = true;
}

/**
 * What `device: 'auto'` resolves to: `'cpu'` when there is no WebGPU adapter or only a software
 * (fallback) one such as SwiftShader, where the wasm CPU path embeds ~50x faster
 * (`node tests/browser/bench.mjs`: 69.8 vs 1.28 sentences/s for st5-mini); otherwise `'auto'`,
 * which the wasm core turns into WebGPU, or the CPU when no device can be created.
 */
export async function autoDevice() {
  const adapter = await globalThis.navigator?.gpu?.requestAdapter().catch(() => null);
  if (!adapter) return 'cpu';
  return (adapter.info?.isFallbackAdapter ?? adapter.isFallbackAdapter) ? 'cpu' : 'auto';
}

/** The device option to hand the wasm core for `device`: a named device as it is; `'auto'` the
 * CPU after a WebGPU failure on this page, else `autoDevice()`'s choice. */
export async function chooseDevice(device) {
  if (device !== 'auto') return device;
  return webgpuFailed ? 'cpu' : autoDevice();
}
