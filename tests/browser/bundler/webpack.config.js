// webpack 5's configuration for an app that uses st5, as pkg/README.md shows it
// (bundler.test.mjs builds the scratch app with it, then writes the page that loads main.js).
import { fileURLToPath } from 'node:url';

export default {
  mode: 'production',
  entry: './main.js',
  output: { path: fileURLToPath(new URL('./dist/webpack/', import.meta.url)), clean: true },
  // st5's .wasm files (12.8 MiB each, 2.9 MB gzipped; a page downloads one) are far past the
  // 244 KiB hint for assets; the hint stays for everything else.
  performance: { assetFilter: (file) => !file.endsWith('.wasm') },
};
