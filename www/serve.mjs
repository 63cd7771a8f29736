// Serves the demo page on localhost: www/ at /, the npm package (pkg/, built by pkg/build.sh) at
// /pkg/, and the built-in default model at /models/default/. Prints the URL.
//   node www/serve.mjs [--port 8080]      (www/serve.sh builds the package first)

import { createReadStream, existsSync, readFileSync, statSync } from 'node:fs';
import { createServer } from 'node:http';
import { dirname, extname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/** The default model, the one `st5` has built in: the folder under models/ that models/DEFAULT names. */
export const DEFAULT_MODEL = join(ROOT, 'models', readFileSync(join(ROOT, 'models/DEFAULT'), 'utf8').trim());

const TYPES = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript',
  '.mjs': 'text/javascript',
  '.wasm': 'application/wasm',
  '.json': 'application/json',
  '.css': 'text/css',
  '.txt': 'text/plain; charset=utf-8',
  '.md': 'text/markdown; charset=utf-8',
  '.png': 'image/png',
};

/**
 * Serves `routes` (URL prefix → folder, longest prefix first) on 127.0.0.1; `overlay` maps a URL
 * path to a file served in its place. Every request is counted by path in `hits`.
 */
export async function serve(routes, { port = 0, overlay = {} } = {}) {
  const hits = new Map();
  const prefixes = Object.keys(routes).sort((a, b) => b.length - a.length);
  const server = createServer((req, res) => {
    const path = decodeURIComponent(new URL(req.url, 'http://x').pathname);
    hits.set(path, (hits.get(path) ?? 0) + 1);
    const prefix = prefixes.find((p) => path.startsWith(p));
    let file = overlay[path] ?? (prefix !== undefined ? join(routes[prefix], path.slice(prefix.length)) : null);
    if (file && existsSync(file) && statSync(file).isDirectory()) file = join(file, 'index.html');
    // `join` normalises `..`; anything that escapes its folder is refused.
    const inside = file && prefix !== undefined && (overlay[path] || file.startsWith(routes[prefix]));
    if (!inside || !existsSync(file)) {
      res.writeHead(404).end();
      return;
    }
    const size = statSync(file).size;
    res.writeHead(200, {
      'content-type': TYPES[extname(file)] ?? 'application/octet-stream',
      'content-length': size,
      'cache-control': 'no-cache',
      // Cross-origin isolation: SharedArrayBuffer and so multi-threaded wasm (onnxruntime-web's
      // threads in tests/browser/bench-peer.mjs). Every resource here is same-origin.
      'cross-origin-opener-policy': 'same-origin',
      'cross-origin-embedder-policy': 'require-corp',
    });
    if (req.method === 'HEAD') res.end();
    else createReadStream(file).pipe(res);
  });
  await new Promise((ok) => server.listen(port, '127.0.0.1', ok));
  const url = `http://127.0.0.1:${server.address().port}`;
  return { url, hits, close: () => new Promise((ok) => server.close(ok)) };
}

/** The demo's routes. */
export const DEMO_ROUTES = { '/': join(ROOT, 'www'), '/pkg/': join(ROOT, 'pkg'), '/models/default/': DEFAULT_MODEL };

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  if (!existsSync(join(ROOT, 'pkg/wasm/st5_wasm_bg.wasm'))) {
    console.error('pkg/wasm is not built: run `bash www/serve.sh` (or `bash pkg/build.sh` first)');
    process.exit(1);
  }
  const i = process.argv.indexOf('--port');
  const { url } = await serve(DEMO_ROUTES, { port: i > 0 ? Number(process.argv[i + 1]) : 8080 });
  console.log(`st5 demo: ${url}/   (model: ${DEFAULT_MODEL.slice(ROOT.length + 1)}; Ctrl-C to stop)`);
}
