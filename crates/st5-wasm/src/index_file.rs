//! The index file (`st5_format::index_file`, the `ST5INDEX` format `st5 index build` writes) at
//! the JS boundary, in pieces: the page reads a file from its `Blob` a section at a time and
//! writes one as `Blob` parts, so that a million vectors never sit in wasm memory twice. Every
//! check is st5-format's: the head's sizes against the file's length, the checksum (fed in
//! chunks), the texts, and finite vectors before writing.

use std::path::Path;

use js_sys::{Object, Reflect};
use st5_core::Quantize;
use st5_core::index_file::{self, Checksum, IndexHeader, IndexLayout};
use wasm_bindgen::prelude::*;

use crate::js::{invalid, js_error};

/// How many bytes at the start of the file `name` hold its head, from its first 16.
#[wasm_bindgen(js_name = indexHeadLength)]
pub fn index_head_length(start: &[u8], name: &str) -> Result<f64, JsValue> {
    Ok(index_file::head_length(start, Path::new(name)).map_err(js_error)? as f64)
}

/// The head of the file `name`, `fileLength` bytes long: `{ dim, count, quantize, model,
/// sections: { words, scales, vectors, texts, end } }` (byte offsets; the checksum's 32 bytes
/// follow `end`).
#[wasm_bindgen(js_name = parseIndexHead)]
pub fn parse_index_head(head: &[u8], file_length: f64, name: &str) -> Result<JsValue, JsValue> {
    let IndexLayout { header, sections } =
        IndexLayout::parse(head, file_length as u64, Path::new(name)).map_err(js_error)?;
    let out = Object::new();
    let set = |o: &Object, k: &str, v: JsValue| Reflect::set(o, &k.into(), &v).map(drop);
    set(&out, "dim", (header.dim as f64).into())?;
    set(&out, "count", (header.count as f64).into())?;
    set(&out, "quantize", header.quantize.to_string().into())?;
    set(&out, "model", header.model.into())?;
    let s = Object::new();
    for (k, v) in [
        ("words", sections.words),
        ("scales", sections.scales),
        ("vectors", sections.vectors),
        ("texts", sections.texts),
        ("end", sections.end),
    ] {
        set(&s, k, (v as f64).into())?;
    }
    set(&out, "sections", s.into())?;
    Ok(out.into())
}

/// The documents of the texts section's bytes: exactly `count` strings.
#[wasm_bindgen(js_name = parseIndexTexts)]
pub fn parse_index_texts(bytes: &[u8], count: usize, name: &str) -> Result<Vec<String>, JsValue> {
    index_file::parse_texts(bytes, count, Path::new(name)).map_err(js_error)
}

/// The head of a file of `count` documents (`quantize`: `none`, `int8` or `binary`) whose texts
/// section is `textsBytes` long: what comes before the codes.
#[wasm_bindgen(js_name = indexHead)]
pub fn index_head(
    quantize: &str,
    model: &str,
    dim: usize,
    count: usize,
    texts_bytes: f64,
) -> Result<Vec<u8>, JsValue> {
    let quantize: Quantize = quantize.parse().map_err(js_error)?;
    Ok(IndexHeader::new(quantize, model, dim, count, texts_bytes as u64).head_bytes())
}

/// The texts section of `texts`.
#[wasm_bindgen(js_name = indexTextsJson)]
pub fn index_texts_json(texts: Vec<String>) -> Vec<u8> {
    index_file::texts_json(&texts)
}

/// Refuses vectors that are not rows of width `dim` or hold a NaN or infinity, before they are
/// written (rows are numbered from `firstRow`).
#[wasm_bindgen(js_name = checkIndexVectors)]
pub fn check_index_vectors(dim: usize, first_row: usize, vectors: &[f32]) -> Result<(), JsValue> {
    index_file::check_vectors(dim, first_row, vectors).map_err(|m| invalid(&m))
}

/// The checksum that ends an index file, fed in chunks.
#[wasm_bindgen]
#[derive(Default)]
pub struct IndexChecksum(Checksum);

#[wasm_bindgen]
impl IndexChecksum {
    #[wasm_bindgen(constructor)]
    pub fn new() -> Self {
        Self::default()
    }

    pub fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    /// The 32 bytes that end a file written from what was fed.
    pub fn finish(self) -> Vec<u8> {
        self.0.finish().to_vec()
    }

    /// Checks what was fed against the file `name`'s last 32 bytes.
    pub fn verify(self, stored: &[u8], name: &str) -> Result<(), JsValue> {
        self.0.verify(stored, Path::new(name)).map_err(js_error)
    }
}
