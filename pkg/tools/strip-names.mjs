// Drops the `name` custom section (function names for stack traces, ~7 MB here) from a .wasm
// file in place. Rust's `strip = true` would also drop the `target_features` section that
// wasm-bindgen reads, so the names are removed after wasm-bindgen instead.
//   node pkg/tools/strip-names.mjs FILE.wasm

import { readFileSync, writeFileSync } from 'node:fs';

const file = process.argv[2];
const bytes = readFileSync(file);
if (bytes.readUInt32LE(0) !== 0x6d736100) throw new Error(`${file}: not a WebAssembly module`);

function leb(at) {
  let value = 0;
  let shift = 0;
  for (;;) {
    const b = bytes[at++];
    value += (b & 0x7f) * 2 ** shift;
    shift += 7;
    if (b < 0x80) return [value, at];
  }
}

const kept = [bytes.subarray(0, 8)];
let removed = 0;
for (let at = 8; at < bytes.length;) {
  const start = at;
  const id = bytes[at++];
  const [size, body] = leb(at);
  const end = body + size;
  if (end > bytes.length) throw new Error(`${file}: truncated section at byte ${start}`);
  let name = null;
  if (id === 0) {
    const [len, str] = leb(body);
    name = bytes.subarray(str, str + len).toString('utf8');
  }
  if (name === 'name') removed += end - start;
  else kept.push(bytes.subarray(start, end));
  at = end;
}
writeFileSync(file, Buffer.concat(kept));
console.log(`${file}: removed the name section (${(removed / 1e6).toFixed(2)} MB)`);
