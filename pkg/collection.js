// Documents, not lines: a collection under a schema (an id, text fields searched with boosts,
// stored fields filtered), its long texts cut into passages with the model's tokenizer, ranked
// by vector, keyword (BM25) or both fused, under a `where` filter, with facets and highlighted
// passages. The search is st5-format's document index (`search::DocumentIndex`) through the
// wasm `Documents`; this file embeds what it names with the model (the page's, or its workers').
// Offsets count UTF-16 code units, as `String.prototype.slice` does. `export()` writes the index
// file's version 2, which `st5 index query` reads, and `importCollection` reads the CLI's.

import { WITH_INNER } from './facts.js';
import { glue, guard, wasm } from './runtime.js';
import { indexBlob } from './search-index.js';

const asPackageError = (e) => {
  if (e.code === 'model' && !e.message.startsWith('st5:')) e.message = `st5: ${e.message}`;
  throw e;
};

/** Refuses a model whose wasm lives in a worker (`loadInWorker`): a collection's passages are cut
 * with the model's tokenizer on this thread. */
function needsPageModel(model) {
  if (typeof model?.[WITH_INNER] !== 'function')
    throw Object.assign(new Error('st5: collections need a model loaded with load() (not loadInWorker)'), {
      code: 'invalid',
    });
}

/** A searchable collection of documents. */
export class Collection {
  #model;
  #docs;
  // Calls that change the collection run one at a time: prepare, embed, commit.
  #queue = Promise.resolve();

  constructor(model, docs) {
    this.#model = model;
    this.#docs = docs;
  }

  /** Documents held. */
  get size() {
    return this.#docs.length;
  }

  /** Passages of the documents held (what was embedded). */
  get passages() {
    return this.#docs.passages;
  }

  #serial(run) {
    const next = this.#queue.then(run);
    this.#queue = next.catch(() => {});
    return next;
  }

  async #put(docs, upsert) {
    return this.#serial(async () => {
      if (!Array.isArray(docs))
        throw Object.assign(new Error('st5: documents must be an array of objects'), { code: 'invalid' });
      const prepare = (inner) => guard('prepare', () => this.#docs.prepare(inner, docs, upsert));
      const texts = await this.#model[WITH_INNER](prepare).catch(asPackageError);
      const vectors = texts.length ? await this.#model.embedFlat(texts) : new Float32Array(0);
      await guard('commit', () => this.#docs.commit(vectors)).catch(asPackageError);
      return { documents: docs.length, passages: texts.length };
    });
  }

  /** Adds documents, all or none: one that breaks the schema, or an id already held, is refused
   * by name and nothing is added. */
  add(docs) {
    return this.#put(docs, false);
  }

  /** Adds documents or replaces those of the same id, all or none. */
  upsert(docs) {
    return this.#put(docs, true);
  }

  /** Removes the document `id`; whether it was held. */
  remove(id) {
    return this.#docs.remove(String(id));
  }

  /** The document `id` as it was stored (the schema's fields), or undefined. */
  get(id) {
    return this.#docs.get(String(id));
  }

  /**
   * Searches: `{ mode: 'vector' | 'keyword' | 'hybrid' (default), k = 10, where, facets, fusion,
   * prefix }` → `{ hits: [{ id, score, vector_score, keyword_score, document, passages: [{ field,
   * start, end, text, score, highlights }] }], matched, facets }`.
   */
  async search(query, options = {}) {
    await this.#queue;
    const vector = glue().Documents.needsVector(options.mode) ? await this.#model.embedFlat([query]) : undefined;
    return guard('search', () => this.#docs.search(query, vector, options)).catch(asPackageError);
  }

  /** The collection as an index file (`quantize`: 'none', 'int8' or 'binary' codes), which
   * `st5 index query` and `importCollection` open. */
  async export({ quantize = 'none' } = {}) {
    await this.#queue;
    const bytes = await guard('export', () => this.#docs.toFile(quantize, this.#model.fingerprint)).catch(
      asPackageError,
    );
    return new Blob([bytes], { type: 'application/octet-stream' });
  }

  dispose() {
    this.#docs?.free();
    this.#docs = null;
  }
}

/** An empty collection of `schema` for `model`: `{ id = 'id', text: [{ name, boost }], fields:
 * [{ name, type: 'string' | 'number' | 'boolean' | 'string[]' }], language = 'english' }`.
 * Options: `overlap`, the tokens a passage repeats from the one before (16). */
export async function createCollection(model, schema, { overlap = 16 } = {}) {
  needsPageModel(model);
  await wasm();
  const docs = await model[WITH_INNER]((inner) =>
    guard('createCollection', () => new (glue().Documents)(schema, inner, overlap)),
  ).catch(asPackageError);
  return new Collection(model, docs);
}

/** A collection from an index file built with `model` (`st5 index build --docs`, or `export()`):
 * a path or URL (Node), a Blob, or bytes. A lines index becomes documents of one `text` field. */
export async function importCollection(model, source, { name = 'collection' } = {}) {
  needsPageModel(model);
  await wasm();
  const { blob, name: named } = await indexBlob(source);
  const bytes = new Uint8Array(await blob.arrayBuffer());
  const docs = await guard('importCollection', () =>
    glue().Documents.fromFile(bytes, named === '(in memory)' ? name : named, model.fingerprint),
  ).catch(asPackageError);
  return new Collection(model, docs);
}
