//! `Model`: a Sentence-T5 model loaded from files held in memory, embedding on the chosen device.

use std::rc::Rc;

use js_sys::{Float32Array, Object, Promise, Uint8Array};
use serde::Deserialize;
use st5_core::{
    Compute, DEFAULT_BATCH_SIZE, DeviceChoice, Embedder, LoadOptions, MemoryFiles, Variant,
};
use wasm_bindgen::prelude::*;

use crate::device::{lower, pick_device};
use crate::heap;
use crate::js::{invalid, js_error, options_from_js};

/// Options accepted by [`Model::load`], as a plain JS object.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Options {
    /// `"auto"` (WebGPU when an adapter and device can be had, else CPU), `"webgpu"` or `"cpu"`.
    device: Option<String>,
    variant: Option<String>,
    batch_size: Option<usize>,
    max_seq_length: Option<usize>,
    /// Caps device buffers below the adapter's own limit.
    max_buffer_bytes: Option<u64>,
    /// `"auto"` (an int8 model computes in int8 on the CPU) or `"f32"`.
    compute: Option<String>,
}

/// `[name, value]` pairs of an object or a `Map`.
fn entries(value: &JsValue, what: &str) -> Result<js_sys::Array, JsValue> {
    if let Some(map) = value.dyn_ref::<js_sys::Map>() {
        Ok(js_sys::Array::from(&map.entries().into()))
    } else if let Some(obj) = value.dyn_ref::<Object>() {
        Ok(Object::entries(obj))
    } else {
        Err(invalid(&format!(
            "{what} must be an object or Map from file name to Uint8Array/ArrayBuffer"
        )))
    }
}

/// The files of `{ "path": Uint8Array | ArrayBuffer }` (or a `Map` of the same), as views of the
/// caller's bytes: nothing is copied yet.
fn files_from_js(files: &JsValue) -> Result<Vec<(String, Uint8Array)>, JsValue> {
    let mut out = Vec::new();
    for entry in entries(files, "files")?.iter() {
        let pair = js_sys::Array::from(&entry);
        let name = pair.get(0).as_string().ok_or_else(|| invalid("file names must be strings"))?;
        // A Uint8Array is taken as it is: `new Uint8Array(array)` would copy it on the JS heap
        // first (125 ms and a garbage collection for a 110 MB file).
        let bytes = match pair.get(1).dyn_into::<Uint8Array>() {
            Ok(bytes) => bytes,
            Err(value) if value.is_instance_of::<js_sys::ArrayBuffer>() => Uint8Array::new(&value),
            Err(_) => {
                return Err(invalid(&format!(
                    "file `{name}` must be a Uint8Array or ArrayBuffer (read Blobs first)"
                )));
            }
        };
        out.push((name.trim_start_matches("./").to_string(), bytes));
    }
    Ok(out)
}

/// Copies `files` into wasm memory, having reserved what a CPU load of them needs at its peak
/// (`heap`) when `cpu`.
fn files_into_memory(files: Vec<(String, Uint8Array)>, label: &str, cpu: bool) -> MemoryFiles {
    if cpu {
        let bytes = files.iter().map(|(_, b)| b.length() as usize).sum();
        heap::reserve(heap::load_peak(bytes));
    }
    let files = files.into_iter().map(|(name, bytes)| (name, bytes.to_vec().into())).collect();
    MemoryFiles { label: label.into(), files }
}

/// A loaded Sentence-T5 model.
#[wasm_bindgen]
pub struct Model {
    embedder: Rc<Embedder>,
    device: &'static str,
    /// The weight files the model was loaded from (`st5_core::fingerprint::weight_files`).
    weight_files: Vec<String>,
}

#[wasm_bindgen]
impl Model {
    /// Loads a model from in-memory files (sentence-transformers or Hugging Face T5 layout);
    /// `label` prefixes file names in errors (the base URL they came from).
    pub async fn load(
        files: JsValue,
        options: JsValue,
        label: Option<String>,
    ) -> Result<Model, JsValue> {
        let files = files_from_js(&files)?;
        let options: Options = options_from_js(options, "options")?;
        let (device, limit, choice) = pick_device(options.device.as_deref()).await?;
        let files = files_into_memory(
            files,
            label.as_deref().unwrap_or("files:"),
            choice == DeviceChoice::Cpu,
        );
        let load = LoadOptions {
            variant: options
                .variant
                .as_deref()
                .map(str::parse::<Variant>)
                .transpose()
                .map_err(js_error)?,
            tokenizer: None,
            max_seq_length: options.max_seq_length,
            batch_size: options.batch_size.unwrap_or(DEFAULT_BATCH_SIZE),
            max_buffer_bytes: lower(limit, options.max_buffer_bytes),
            compute: options
                .compute
                .as_deref()
                .map(str::parse::<Compute>)
                .transpose()
                .map_err(js_error)?
                .unwrap_or_default(),
        };
        let embedder = Embedder::load_from(&files, &load, &device).map_err(js_error)?;
        let weight_files =
            st5_core::fingerprint::weight_files(&files, embedder.layout()).map_err(js_error)?;
        Ok(Model { embedder: Rc::new(embedder), device: choice.web_name(), weight_files })
    }

    /// The weight files this model was loaded from, in name order: the files whose hashes make
    /// its weights fingerprint (`st5_core::fingerprint`), which a soft prompt names.
    #[wasm_bindgen(getter, js_name = weightFiles)]
    pub fn weight_files(&self) -> Vec<String> {
        self.weight_files.clone()
    }

    /// Puts a soft prompt (the bytes of a prompt file; `label` names it in errors) before every
    /// text, after checking that it was made for this model: `fingerprint` is this model's
    /// weights fingerprint, computed by the package over [`weightFiles`](Self::weight_files).
    /// Without bytes, removes the prompt.
    #[wasm_bindgen(js_name = setPrompt)]
    pub fn set_prompt(
        &mut self,
        bytes: Option<Vec<u8>>,
        fingerprint: String,
        label: String,
    ) -> Result<(), JsValue> {
        let embedder = Rc::get_mut(&mut self.embedder)
            .ok_or_else(|| invalid("setPrompt: the model is busy; wait for its calls first"))?;
        let path = std::path::PathBuf::from(label);
        let prompt = bytes
            .map(|b| st5_core::prompt::Prompt::from_bytes(&b, &path))
            .transpose()
            .map_err(js_error)?;
        embedder
            .set_prompt(prompt.as_ref().map(|p| (p, path.as_path())), &fingerprint)
            .map_err(js_error)
    }

    /// Embeds `texts`; resolves to a `Float32Array` of `texts.length * dim` values, row-major,
    /// in input order, each row L2-normalised when the model has a Normalize module.
    pub fn embed(&self, texts: Vec<String>) -> Promise {
        let embedder = self.embedder.clone();
        wasm_bindgen_futures::future_to_promise(async move {
            let e = embedder.embed_async(&texts).await.map_err(js_error)?;
            Ok(Float32Array::from(e.data.as_slice()).into())
        })
    }

    /// The model's tokenizer, for cutting documents into passages.
    pub(crate) fn tokenizer(&self) -> &st5_core::tokenizer::T5Tokenizer {
        self.embedder.tokenizer()
    }

    /// Output width.
    #[wasm_bindgen(getter)]
    pub fn dim(&self) -> usize {
        self.embedder.dim()
    }

    /// `"webgpu"` or `"cpu"`.
    #[wasm_bindgen(getter)]
    pub fn device(&self) -> String {
        self.device.to_string()
    }

    /// `"int8"` when the model keeps int8 weights and multiplies in int8 (an int8 model on the
    /// CPU), else `"f32"`.
    #[wasm_bindgen(getter)]
    pub fn arithmetic(&self) -> String {
        if self.embedder.model().computes_in_int8() { "int8" } else { "f32" }.into()
    }

    /// The bytes the loaded weights hold in this instance's memory (f32 parameters and int8
    /// codes): what a worker holding a copy of the model costs beyond activations.
    #[wasm_bindgen(getter, js_name = weightBytes)]
    pub fn weight_bytes(&self) -> f64 {
        self.embedder.model().weight_bytes() as f64
    }

    /// Tokens kept per text; longer texts are truncated, as sentence-transformers does.
    #[wasm_bindgen(getter, js_name = maxSeqLength)]
    pub fn max_seq_length(&self) -> usize {
        self.embedder.tokenizer().max_len()
    }

    /// `"enc-mean"`, `"enc-first"`, `"encdec-first"`, `"max"` or `"mean-sqrt-len"`.
    #[wasm_bindgen(getter)]
    pub fn variant(&self) -> String {
        self.embedder.variant().to_string()
    }

    /// This model's identity as an index file records it (`st5_format::fingerprint::
    /// index_identity`, as `st5 index build` computes it): `weights` is the weights
    /// fingerprint over `weightFiles`, `promptHash` the SHA-256 (hex) of the soft prompt file,
    /// if one is set.
    #[wasm_bindgen(js_name = indexIdentity)]
    pub fn index_identity(&self, weights: &str, prompt_hash: Option<String>) -> String {
        let extras: Vec<_> = prompt_hash.map(|h| ("prompt", h)).into_iter().collect();
        st5_core::fingerprint::index_identity(
            weights,
            self.embedder.variant(),
            self.embedder.layout().max_seq_length,
            &extras,
        )
    }

    /// Batches `embed` would run for `texts` (text indices), after splitting to the device's
    /// buffer limit.
    #[wasm_bindgen(js_name = planBatches)]
    pub fn plan_batches(&self, texts: Vec<String>) -> Result<JsValue, JsValue> {
        let plan = self.embedder.plan(&texts).map_err(js_error)?;
        serde_wasm_bindgen::to_value(&plan).map_err(|e| invalid(&e.to_string()))
    }

    /// Frees the model, as `free()` does, and gives its device memory back.
    pub fn dispose(self) {
        let device = self.embedder.device().clone();
        drop(self);
        st5_core::device::release_pooled_memory(&device);
    }
}
