//! `Documents`: the search library's document index (`st5_core::search::DocumentIndex`) at the
//! JS boundary: documents under a schema, cut into passages with a model's tokenizer, searched by
//! vector, keyword or both under a filter. The JS layer embeds the passages `prepare` names and
//! the query with its model (the page's or its workers'); offsets count UTF-16 code units, as
//! JavaScript's strings do. Its file is the index file's version 2, which `st5 index` reads.

use std::path::Path;

use serde::Deserialize;
use st5_core::Quantize;
use st5_core::index_file::{self, IndexFile};
use st5_core::model::l2_normalize_rows;
use st5_core::search::documents::{Offsets, Prepared};
use st5_core::search::{DocumentIndex, Schema, SearchOptions};
use wasm_bindgen::prelude::*;

use crate::js::{invalid, js_error, options_from_js};
use crate::model::Model;

/// `search`'s options, as a plain JS object.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SearchArgs {
    mode: Option<String>,
    k: Option<usize>,
    /// A filter object (`{ year: { gte: 2020 } }`) or its text form.
    #[serde(rename = "where")]
    filter: Option<serde_json::Value>,
    #[serde(default)]
    facets: Vec<String>,
    fusion: Option<String>,
    #[serde(default)]
    prefix: bool,
}

fn to_js<T: serde::Serialize>(value: &T) -> Result<JsValue, JsValue> {
    value
        .serialize(&serde_wasm_bindgen::Serializer::json_compatible())
        .map_err(|e| invalid(&e.to_string()))
}

fn from_js<T: serde::de::DeserializeOwned>(value: JsValue, what: &str) -> Result<T, JsValue> {
    serde_wasm_bindgen::from_value(value).map_err(|e| invalid(&format!("{what}: {e}")))
}

/// Documents, their passages and the passages' vectors.
#[wasm_bindgen]
pub struct Documents {
    index: DocumentIndex,
    /// What `prepare` checked, waiting for `commit`.
    pending: Option<Prepared>,
}

#[wasm_bindgen]
impl Documents {
    /// An empty collection of `schema` (`{ id, text: [{ name, boost }], fields: [{ name, type }],
    /// language }`) for `model`'s vectors, passages at most its window long, overlapping by
    /// `overlap` tokens.
    #[wasm_bindgen(constructor)]
    pub fn new(schema: JsValue, model: &Model, overlap: usize) -> Result<Documents, JsValue> {
        let schema: Schema = from_js(schema, "schema")?;
        let index = DocumentIndex::new(schema, model.dim(), model.max_seq_length(), overlap)
            .map_err(js_error)?;
        Ok(Documents { index, pending: None })
    }

    /// Checks `docs` (an array of objects) against the schema (and, unless `upsert`, that their
    /// ids are new) and cuts them into passages: the texts to embed, in order, for `commit`.
    pub fn prepare(
        &mut self,
        model: &Model,
        docs: JsValue,
        upsert: bool,
    ) -> Result<Vec<String>, JsValue> {
        let docs: Vec<serde_json::Value> = from_js(docs, "documents")?;
        let prepared = self.index.prepare(model.tokenizer(), docs, upsert).map_err(js_error)?;
        let texts = prepared.texts.clone();
        self.pending = Some(prepared);
        Ok(texts)
    }

    /// Adds what `prepare` checked, with its passages' vectors, row-major (made unit length as
    /// `st5 index build` makes them, for a model without a Normalize module).
    pub fn commit(&mut self, mut vectors: Vec<f32>) -> Result<(), JsValue> {
        let prepared = self.pending.take().ok_or_else(|| invalid("commit: nothing prepared"))?;
        l2_normalize_rows(&mut vectors, self.index.dim());
        self.index.commit(prepared, vectors).map_err(js_error)?;
        Ok(())
    }

    /// Removes the document `id`; whether it was held.
    pub fn remove(&mut self, id: &str) -> bool {
        let removed = self.index.remove(id);
        self.index.compact_if_worthwhile();
        removed
    }

    /// The document `id`, or `undefined`.
    pub fn get(&self, id: &str) -> Result<JsValue, JsValue> {
        match self.index.get(id) {
            Some(doc) => to_js(&doc),
            None => Ok(JsValue::UNDEFINED),
        }
    }

    /// `{ hits: [{ id, score, vector_score?, keyword_score?, document, passages: [{ field, start,
    /// end, text, score?, highlights }] }], matched, facets }` for `query`, whose unit vector is
    /// `vector` (absent in keyword mode).
    pub fn search(
        &self,
        query: &str,
        vector: Option<Vec<f32>>,
        options: JsValue,
    ) -> Result<JsValue, JsValue> {
        let a: SearchArgs = options_from_js(options, "search options")?;
        let options = SearchOptions::parse(
            self.index.schema(),
            a.mode.as_deref(),
            a.k.unwrap_or(10),
            a.filter.as_ref(),
            a.facets,
            a.fusion.as_deref(),
            a.prefix,
        )
        .map_err(js_error)?;
        let vector = vector.map(|mut v| {
            l2_normalize_rows(&mut v, usize::MAX);
            v
        });
        let results = self.index.search(query, vector.as_deref(), &options).map_err(js_error)?;
        to_js(&self.index.answer(&results, Offsets::Utf16))
    }

    /// Whether a search in `mode` (`vector`, `keyword`, `hybrid`; absent: the default) needs the
    /// query's vector.
    #[wasm_bindgen(js_name = needsVector)]
    pub fn needs_vector(mode: Option<String>) -> Result<bool, JsValue> {
        let mode: st5_core::search::SearchMode =
            mode.as_deref().map(str::parse).transpose().map_err(js_error)?.unwrap_or_default();
        Ok(mode != st5_core::search::SearchMode::Keyword)
    }

    /// Documents held.
    #[wasm_bindgen(getter)]
    pub fn length(&self) -> usize {
        self.index.len()
    }

    /// Passages of the documents held.
    #[wasm_bindgen(getter)]
    pub fn passages(&self) -> usize {
        self.index.live_passages()
    }

    /// The index file (`st5 index build --docs` writes the same), its codes `quantize` (`none`,
    /// `int8`, `binary`), recording `identity` (the model's, `Model.indexIdentity`).
    #[wasm_bindgen(js_name = toFile)]
    pub fn to_file(&self, quantize: &str, identity: &str) -> Result<Vec<u8>, JsValue> {
        let quantize: Quantize = quantize.parse().map_err(js_error)?;
        let (saved, vectors) = self.index.save();
        index_file::documents_bytes(
            Path::new("collection"),
            quantize,
            identity,
            self.index.dim(),
            &saved,
            &vectors,
        )
        .map_err(js_error)
    }

    /// A collection from an index file's bytes (`name` in errors), checked whole; a lines index
    /// becomes documents of one `text` field. `identity` must be the file's model's.
    #[wasm_bindgen(js_name = fromFile)]
    pub fn from_file(bytes: Vec<u8>, name: &str, identity: &str) -> Result<Documents, JsValue> {
        let file = IndexFile::from_bytes(bytes.into(), Path::new(name)).map_err(js_error)?;
        if file.header.model != identity {
            return Err(invalid(&format!(
                "{name} was built with another model or settings ({}; this model: {identity})",
                file.header.model
            )));
        }
        let saved = file.collection().map_err(js_error)?;
        let vectors = file.collection_vectors().map_err(js_error)?;
        let index = DocumentIndex::open(saved, file.header.dim, vectors).map_err(js_error)?;
        Ok(Documents { index, pending: None })
    }
}
