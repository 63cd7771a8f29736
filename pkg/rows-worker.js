// The OPFS file of a quantized index's rescoring rows (row-store.js), held by a dedicated worker
// through a FileSystemSyncAccessHandle: appends write in place (the main thread's
// `createWritable` copies the whole file on every open) and a search's candidate rows are read
// synchronously, one message a search instead of one promise a row.
//
// Requests (rpc.js) run one after another: `open` is asynchronous, and every other op needs the
// handle it makes.

import { serve, transfer } from './rpc.js';

let handle = null;
// A run of rows read at once: gaps of at most GAP rows inside it, at most SPAN rows in all.
const GAP = 64;
const SPAN = 4096;

serve(
  {
    async open({ dir, name }) {
      const root = await navigator.storage.getDirectory();
      const folder = await root.getDirectoryHandle(dir, { create: true });
      const file = await folder.getFileHandle(name, { create: true });
      handle = await file.createSyncAccessHandle();
    },
    append({ at, data }) {
      const bytes = new Uint8Array(data);
      if (handle.write(bytes, { at }) !== bytes.length) throw new Error('st5: short write to the rescoring file');
    },
    rows({ ids, row }) {
      // In id order, one read per run of nearby rows: each read of a sync access handle is a call
      // into the browser (~0.3 ms in headless Chromium), while reading a gap of up to GAP unwanted
      // rows costs microseconds. A batch of queries shares most of its candidates' runs.
      const out = new Uint8Array(ids.length * row);
      const order = Array.from(ids.keys()).sort((a, b) => ids[a] - ids[b]);
      for (let i = 0, j; i < order.length; i = j) {
        const first = ids[order[i]];
        for (j = i + 1; j < order.length; j++) {
          const id = ids[order[j]];
          if (id - ids[order[j - 1]] > GAP || id - first >= SPAN) break;
        }
        const last = ids[order[j - 1]];
        const span = new Uint8Array((last - first + 1) * row);
        const got = handle.read(span, { at: first * row });
        if (got !== span.length) throw new Error(`st5: the rescoring file lacks row ${first + Math.floor(got / row)}`);
        for (let t = i; t < j; t++) {
          const at = (ids[order[t]] - first) * row;
          out.set(span.subarray(at, at + row), order[t] * row);
        }
      }
      return transfer(out.buffer, [out.buffer]);
    },
    all() {
      const out = new Uint8Array(handle.getSize());
      handle.read(out, { at: 0 });
      return transfer(out.buffer, [out.buffer]);
    },
    close() {
      handle?.close();
      handle = null;
    },
  },
  { inOrder: true },
);
