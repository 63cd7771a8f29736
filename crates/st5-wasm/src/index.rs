//! `Index`: top-k search over vectors kept on the chosen device, f32 or int8 / binary codes.

use std::cell::RefCell;

use js_sys::{Float32Array, Object, Promise, Reflect};
use serde::Deserialize;
use st5_core::{Hit, Quantize, VectorIndex};
use wasm_bindgen::prelude::*;

use crate::device::{lower, pick_device};
use crate::js::{js_error, options_from_js};

/// Options accepted by [`Index::create`].
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct IndexOptions {
    device: Option<String>,
    max_buffer_bytes: Option<u64>,
    /// Caps the vectors per device buffer (to exercise sharding in tests).
    shard_rows: Option<usize>,
    /// `none` (f32), `int8` or `binary`.
    quantize: Option<Quantize>,
}

/// `{ ids: Uint32Array, scores: Float32Array, k }`: hit lists of `k` each, row-major.
fn hits_object(hits: &[Vec<Hit>], k: usize) -> Result<JsValue, JsValue> {
    let ids: Vec<u32> = hits.iter().flat_map(|h| h.iter().map(|h| h.id)).collect();
    let scores: Vec<f32> = hits.iter().flat_map(|h| h.iter().map(|h| h.score)).collect();
    let out = Object::new();
    Reflect::set(&out, &"ids".into(), &js_sys::Uint32Array::from(ids.as_slice()).into())?;
    Reflect::set(&out, &"scores".into(), &Float32Array::from(scores.as_slice()).into())?;
    Reflect::set(&out, &"k".into(), &(k as u32).into())?;
    Ok(out.into())
}

/// Top-k search over vectors kept on the device, f32 or int8 / binary codes (see
/// `st5_core::search_index`); a quantized index's hits are candidates for [`Index::rescore`].
#[wasm_bindgen]
pub struct Index {
    inner: RefCell<VectorIndex>,
    device: &'static str,
}

#[wasm_bindgen]
impl Index {
    /// An empty index of `dim`-wide vectors on `options.device` (`auto`, `webgpu` or `cpu`).
    pub async fn create(dim: usize, options: JsValue) -> Result<Index, JsValue> {
        let options: IndexOptions = options_from_js(options, "index options")?;
        let (device, limit, choice) = pick_device(options.device.as_deref()).await?;
        let limit = lower(limit, options.max_buffer_bytes);
        let quantize = options.quantize.unwrap_or_default();
        let mut index =
            VectorIndex::with_quantize(dim, &device, limit, quantize).map_err(js_error)?;
        if let Some(rows) = options.shard_rows {
            index = index.with_shard_rows(rows);
        }
        Ok(Index { inner: RefCell::new(index), device: choice.web_name() })
    }

    /// Appends row-major vectors; they take the next ids (a quantized index encodes them).
    pub fn add(&self, vectors: &[f32]) -> Result<(), JsValue> {
        self.inner.borrow_mut().add(vectors).map_err(js_error)
    }

    /// Appends a quantized index's saved codes: `words` (`wordsPerVector` a vector) and one
    /// scale a vector.
    #[wasm_bindgen(js_name = addCodes)]
    pub fn add_codes(&self, words: Vec<i32>, scales: Vec<f32>) -> Result<(), JsValue> {
        let codes = st5_core::vector_codes::Codes { words, scales };
        self.inner.borrow_mut().add_codes(&codes).map_err(js_error)
    }

    /// A quantized index's codes, in id order: resolves to `{ words: Int32Array, scales:
    /// Float32Array }`.
    pub fn codes(&self) -> Promise {
        let index = self.inner.borrow().clone();
        wasm_bindgen_futures::future_to_promise(async move {
            let codes = index.codes_async().await.map_err(js_error)?;
            let out = Object::new();
            Reflect::set(&out, &"words".into(), &js_sys::Int32Array::from(codes.words.as_slice()))?;
            Reflect::set(&out, &"scales".into(), &Float32Array::from(codes.scales.as_slice()))?;
            Ok(out.into())
        })
    }

    /// The `k` best of one query's candidate `ids` by their exact f32 vectors `rows` (row-major,
    /// in the order of `ids`): `{ ids, scores, k }`.
    pub fn rescore(query: &[f32], ids: &[u32], rows: &[f32], k: usize) -> Result<JsValue, JsValue> {
        let hits = st5_core::search_index::rescore(query, ids, rows, k).map_err(js_error)?;
        let kk = hits.len();
        hits_object(&[hits], kk)
    }

    /// Gives back the device memory earlier adds and searches left pooled (see
    /// `VectorIndex::release_pooled_memory`); call it once after a run of adds.
    #[wasm_bindgen(js_name = releaseMemory)]
    pub fn release_memory(&self) {
        self.inner.borrow().release_pooled_memory();
    }

    /// The best `k` ids and scores for each row-major query; resolves to
    /// `{ ids: Uint32Array, scores: Float32Array, k }` with `k = min(k, length)` per query.
    pub fn search(&self, queries: Vec<f32>, k: usize) -> Promise {
        // Shards are reference-counted tensors: the clone shares device memory, and a later
        // `add` cannot change what this search sees.
        let index = self.inner.borrow().clone();
        wasm_bindgen_futures::future_to_promise(async move {
            let hits = index.search_async(&queries, k).await.map_err(js_error)?;
            hits_object(&hits, k.min(index.len()))
        })
    }

    /// Every vector, row-major in id order (read back from the device), for saving.
    pub fn vectors(&self) -> Promise {
        let index = self.inner.borrow().clone();
        wasm_bindgen_futures::future_to_promise(async move {
            let v = index.vectors_async().await.map_err(js_error)?;
            Ok(Float32Array::from(v.as_slice()).into())
        })
    }

    #[wasm_bindgen(getter)]
    pub fn length(&self) -> usize {
        self.inner.borrow().len()
    }
    #[wasm_bindgen(getter)]
    pub fn dim(&self) -> usize {
        self.inner.borrow().dim()
    }
    /// Device buffers the vectors occupy.
    #[wasm_bindgen(getter)]
    pub fn shards(&self) -> usize {
        self.inner.borrow().shards()
    }
    /// Bytes the searchable part holds (device or wasm memory).
    #[wasm_bindgen(getter)]
    pub fn bytes(&self) -> f64 {
        self.inner.borrow().bytes() as f64
    }
    /// `"none"`, `"int8"` or `"binary"`.
    #[wasm_bindgen(getter)]
    pub fn quantize(&self) -> String {
        self.inner.borrow().quantize().to_string()
    }
    /// 32-bit code words a vector takes (0 for an f32 index).
    #[wasm_bindgen(getter, js_name = wordsPerVector)]
    pub fn words_per_vector(&self) -> usize {
        let index = self.inner.borrow();
        index.quantize().packing().map_or(0, |p| p.words(index.dim()))
    }
    /// Candidates searched per result before rescoring, by default, for this quantization.
    #[wasm_bindgen(getter, js_name = defaultOversample)]
    pub fn default_oversample(&self) -> usize {
        self.inner.borrow().quantize().default_oversample()
    }
    /// Frees the index, as `free()` does, and gives its device memory back.
    pub fn dispose(self) {
        let device = self.inner.borrow().device().clone();
        drop(self);
        st5_core::device::release_pooled_memory(&device);
    }
    /// `"webgpu"` or `"cpu"`.
    #[wasm_bindgen(getter)]
    pub fn device(&self) -> String {
        self.device.to_string()
    }
}
