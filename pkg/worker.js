// The Web Worker behind `loadInWorker` and the CPU pool: one model per worker, driven over rpc.js
// by worker-client.js. Calls arrive in order and the model queues them, so results go back in
// order too.

import { loadKnowing } from './load.js';
import { MODEL_FACTS, PANIC_FOR_TEST } from './facts.js';
import { useModule } from './runtime.js';
import { notify, serve, transfer } from './rpc.js';

let model = null;

/** The facts the page's `WorkerModel` reports, as the model has them now. */
const state = () => Object.fromEntries([...MODEL_FACTS, 'threads', 'maxThreads'].map((name) => [name, model[name]]));

// The device may change mid-call (the WebGPU → CPU fallback warns through console.warn).
const warn = console.warn.bind(console);
console.warn = (...args) => {
  warn(...args);
  notify({ warn: args.map(String).join(' ') });
};

serve({
  async load({ source, options, hashes, module }) {
    useModule(module);
    const onProgress = (progress) => notify({ progress });
    model = await loadKnowing(source, { ...options, onProgress }, hashes);
    return state();
  },
  async embed({ texts }) {
    const flat = await model.embedFlat(texts);
    return transfer({ flat, state: state() }, [flat.buffer]);
  },
  async startWorkers() {
    await model.startWorkers();
    return state();
  },
  memory() {
    return model.memory();
  },
  panicForTest() {
    return model[PANIC_FOR_TEST]();
  },
  async dispose() {
    await model?.dispose();
    model = null;
  },
});
