// SHA-256 as the package uses it: of bytes, of each model file, and of `name:hash` lines (the
// weights fingerprint, as st5_format::fingerprint computes it natively). Imports nothing.

/** The 32 bytes of the SHA-256 of bytes (Web Crypto: secure contexts, which WebGPU needs anyway). */
export async function sha256Bytes(bytes) {
  return new Uint8Array(await crypto.subtle.digest('SHA-256', bytes));
}

/** Hex SHA-256 of bytes. */
export async function sha256(bytes) {
  return Array.from(await sha256Bytes(bytes), (b) => b.toString(16).padStart(2, '0')).join('');
}

/** The SHA-256 (hex) of each file, by name. */
export async function fileHashes(files) {
  const hashes = new Map();
  for (const name of [...files.keys()].sort()) hashes.set(name, await sha256(files.get(name)));
  return hashes;
}

/** SHA-256 of the lines `name:hash` of `names`, in name order. Over the weight files the wasm
 * model reports it is the weights fingerprint, which a soft prompt names and a model's index
 * identity starts with (st5_format::fingerprint computes the same natively); over every file,
 * the identity the old ST5IDX1 index files recorded. */
export function combineHashes(hashes, names = [...hashes.keys()]) {
  const lines = [...names].sort().map((name) => `${name}:${hashes.get(name)}`);
  return sha256(new TextEncoder().encode(lines.join('\n')));
}
