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

// What collection-store.js calls, kept off the public surface.
export const REPLAY = Symbol('st5.replay');
export const SNAPSHOT = Symbol('st5.snapshot');

const asPackageError = (e) => {
  if (e.code === 'model' && !e.message.startsWith('st5:')) e.message = `st5: ${e.message}`;
  throw e;
};

/** Refuses a model whose wasm lives in a worker (`loadInWorker`): a collection's passages are cut
 * with the model's tokenizer on this thread. */
export function needsPageModel(model) {
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
  // Told of each change as it is made, in order (collection-store.js saves them); what it
  // returns (a save) is awaited by the call, outside the queue, so searches need not wait.
  #journal;

  constructor(model, docs, journal = null) {
    this.#model = model;
    this.#docs = docs;
    this.#journal = journal;
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
    const { result, saved } = await this.#serial(async () => {
      if (!Array.isArray(docs))
        throw Object.assign(new Error('st5: documents must be an array of objects'), { code: 'invalid' });
      const texts = await this.#prepare(docs, upsert);
      const vectors = texts.length ? await this.#model.embedFlat(texts) : new Float32Array(0);
      await this.#commit(vectors);
      const saved = this.#journal?.({ op: 'put', upsert, docs, vectors });
      return { result: { documents: docs.length, passages: texts.length }, saved };
    });
    await saved;
    return result;
  }

  /** Checks `docs` and cuts them into passages: the texts to embed, for `#commit`. */
  #prepare(docs, upsert) {
    const prepare = (inner) => guard('prepare', () => this.#docs.prepare(inner, docs, upsert));
    return this.#model[WITH_INNER](prepare).catch(asPackageError);
  }

  #commit(vectors) {
    return guard('commit', () => this.#docs.commit(vectors)).catch(asPackageError);
  }

  /** Applies a change saved by collection-store.js, with the vectors it was saved with (nothing
   * is embedded); refused if the passages it cuts are not the ones those vectors are for. */
  async [REPLAY](change) {
    if (change.op === 'remove') return void this.#docs.remove(String(change.id));
    const texts = await this.#prepare(change.docs, change.upsert);
    if (texts.length * this.#model.dim !== change.vectors.length)
      throw Object.assign(
        new Error(
          `${texts.length} passages now, but the change was saved with ${change.vectors.length / this.#model.dim}`,
        ),
        { code: 'format' },
      );
    await this.#commit(change.vectors);
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
    const removed = this.#docs.remove(String(id));
    if (removed) this.#journal?.({ op: 'remove', id: String(id) });
    return removed;
  }

  /** The document `id` as it was stored (the schema's fields), or undefined. */
  get(id) {
    return this.#docs.get(String(id));
  }

  /**
   * Searches: `{ mode: 'vector' | 'keyword' | 'hybrid' (default), k = 10, where, facets, fusion,
   * prefix, vector }` → `{ hits: [{ id, score, vector_score, keyword_score, document, passages:
   * [{ field, start, end, text, score, highlights }] }], matched, facets }`. `vector`: the query's
   * unit vector from this model (`model.embed([query])[0]`), when the page has it already (the
   * same query under another filter or mode): nothing is embedded.
   */
  async search(query, options = {}) {
    await this.#queue;
    const { vector: given, ...rest } = options ?? {};
    let vector;
    if (glue().Documents.needsVector(rest.mode))
      vector = given == null ? await this.#model.embedFlat([query]) : Float32Array.from(given);
    return guard('search', () => this.#docs.search(query, vector, rest)).catch(asPackageError);
  }

  /** The collection as an index file (`quantize`: 'none', 'int8' or 'binary' codes), which
   * `st5 index query` and `importCollection` open. */
  async export({ quantize = 'none' } = {}) {
    await this.#queue;
    return new Blob([await this[SNAPSHOT](quantize)], { type: 'application/octet-stream' });
  }

  /** The index file's bytes of the collection as it is now, changes in flight left out. */
  [SNAPSHOT](quantize = 'none') {
    return guard('export', () => this.#docs.toFile(quantize, this.#model.fingerprint)).catch(asPackageError);
  }

  dispose() {
    this.#docs?.free();
    this.#docs = null;
  }
}

/** Empty documents of `schema` for `model` (a page model), passages overlapping by `overlap`. */
export async function newDocuments(model, schema, overlap) {
  needsPageModel(model);
  await wasm();
  return model[WITH_INNER]((inner) =>
    guard('createCollection', () => new (glue().Documents)(schema, inner, overlap)),
  ).catch(asPackageError);
}

/** Documents from an index file's `bytes` (`name` in errors), built with `model`. */
export async function openDocuments(model, bytes, name) {
  needsPageModel(model);
  await wasm();
  return guard('importCollection', () => glue().Documents.fromFile(bytes, name, model.fingerprint)).catch(
    asPackageError,
  );
}

/** An empty collection of `schema` for `model`: `{ id = 'id', text: [{ name, boost }], fields:
 * [{ name, type: 'string' | 'number' | 'boolean' | 'string[]' }], language = 'english' }`.
 * Options: `overlap`, the tokens a passage repeats from the one before (16). */
export async function createCollection(model, schema, { overlap = 16 } = {}) {
  return new Collection(model, await newDocuments(model, schema, overlap));
}

/** A collection from an index file built with `model` (`st5 index build --docs`, or `export()`):
 * a path or URL (Node), a Blob, or bytes. A lines index becomes documents of one `text` field. */
export async function importCollection(model, source, { name = 'collection' } = {}) {
  needsPageModel(model);
  const { blob, name: named } = await indexBlob(source);
  const bytes = new Uint8Array(await blob.arrayBuffer());
  return new Collection(model, await openDocuments(model, bytes, named === '(in memory)' ? name : named));
}

/** A passage of a hit as pieces to show, `[{ text, marked }]`, the query's words marked
 * (`passage.highlights`, offsets into the field, made relative to the passage). Plain text, for
 * `textContent` and `<mark>` elements: nothing is parsed as HTML. */
export function snippet(passage) {
  const out = [];
  let at = 0;
  const text = passage.text;
  for (const [a, b] of passage.highlights) {
    const from = Math.max(a - passage.start, at);
    const to = Math.min(b - passage.start, text.length);
    if (to <= from) continue;
    if (from > at) out.push({ text: text.slice(at, from), marked: false });
    out.push({ text: text.slice(from, to), marked: true });
    at = to;
  }
  if (at < text.length || !out.length) out.push({ text: text.slice(at), marked: false });
  return out;
}
