// Writes whole files in the Origin Private File System for collection-store.js, through a
// FileSystemSyncAccessHandle: every engine with OPFS has it in a dedicated worker, where the main
// thread's `createWritable` is missing in some. A file is written in one call and flushed before
// the reply, so a reply means the bytes are on disk; a write cut short (a closed tab) leaves a
// short file, which the reader's checksum refuses.

import { serve } from './rpc.js';

serve(
  {
    async write({ path, name, data }) {
      let dir = await navigator.storage.getDirectory();
      for (const part of path) dir = await dir.getDirectoryHandle(part, { create: true });
      const handle = await (await dir.getFileHandle(name, { create: true })).createSyncAccessHandle();
      try {
        const bytes = new Uint8Array(data);
        handle.truncate(0);
        if (handle.write(bytes, { at: 0 }) !== bytes.length) throw new Error(`st5: short write to ${name}`);
        handle.flush();
      } finally {
        handle.close();
      }
    },
  },
  { inOrder: true },
);
