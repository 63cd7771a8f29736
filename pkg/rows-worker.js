// The OPFS file of a quantized index's rescoring rows (row-store.js), held by a dedicated worker
// through a FileSystemSyncAccessHandle: appends write in place (the main thread's
// `createWritable` copies the whole file on every open) and a search's candidate rows are read
// synchronously, one message a search instead of one promise a row.
//
// Requests (rpc.js) run one after another: `open` is asynchronous, and every other op needs the
// handle it makes.

import { serve, transfer } from './rpc.js';

let handle = null;

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
      const out = new Uint8Array(ids.length * row);
      ids.forEach((id, i) => {
        if (handle.read(out.subarray(i * row, (i + 1) * row), { at: id * row }) !== row)
          throw new Error(`st5: the rescoring file lacks row ${id}`);
      });
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
