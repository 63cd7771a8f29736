// Vite's configuration for an app that uses st5, as pkg/README.md shows it (bundler.test.mjs
// builds the scratch app with it). A build needs nothing for st5: its workers and `.wasm` files
// are found through `new URL(..., import.meta.url)`.
export default {
  // The dev server's dependency pre-bundling would move st5's modules away from the `.wasm`
  // files and workers they find that way.
  optimizeDeps: { exclude: ['st5'] },
  build: { outDir: 'dist/vite' },
};
