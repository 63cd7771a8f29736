// The Web Worker behind `loadInWorker`: one model per worker, driven by messages from index.js.
// Calls arrive in order and the model queues them, so results go back in order too.

import { load } from './index.js';

let model = null;

const state = () => ({
  device: model.device,
  dim: model.dim,
  maxSeqLength: model.maxSeqLength,
  variant: model.variant,
  fingerprint: model.fingerprint,
  threads: model.threads,
});

// The device may change mid-call (the WebGPU → CPU fallback warns through console.warn).
const warn = console.warn.bind(console);
console.warn = (...args) => {
  warn(...args);
  self.postMessage({ warn: args.map(String).join(' ') });
};

self.onmessage = async ({ data }) => {
  const { id, op } = data;
  try {
    if (op === 'load') {
      model = await load(data.source, { ...data.options, onProgress: (progress) => self.postMessage({ progress }) });
      self.postMessage({ id, state: state() });
    } else if (op === 'embed') {
      const flat = await model.embedFlat(data.texts);
      self.postMessage({ id, result: flat, state: state() }, [flat.buffer]);
    } else if (op === 'panicForTest') {
      await model[Symbol.for('st5.panicForTest')]();
    } else if (op === 'dispose') {
      await model?.dispose();
      model = null;
      self.postMessage({ id });
    }
  } catch (err) {
    self.postMessage({ id, error: { message: err?.message ?? String(err), code: err?.code, call: err?.call } });
  }
};
