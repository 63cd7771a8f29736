//! `st5-wasm`: the st5-core Sentence-T5 model in the browser through wasm-bindgen. WebGPU runs
//! through burn's wgpu backend, with burn's flex backend as the CPU fallback; model files come
//! from memory (fetched or picked by the JS layer in `pkg/`). Errors become `JsError` here, once.

use std::cell::RefCell;
use std::rc::Rc;

use js_sys::{Float32Array, Object, Promise, Uint8Array};
use serde::Deserialize;
use st5_core::{Backend, Device, Embedder, LoadOptions, MemoryFiles, Variant};
use wasm_bindgen::prelude::*;

/// Options accepted by [`Model::load`], as a plain JS object.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Options {
    /// `"auto"` (WebGPU when an adapter and device can be had, else CPU), `"webgpu"` or `"cpu"`.
    device: Option<String>,
    variant: Option<String>,
    batch_size: Option<usize>,
    max_seq_length: Option<usize>,
}

thread_local! {
    /// burn's WebGPU runtime is initialised once per page; later models reuse the device.
    static WEBGPU: RefCell<Option<Device>> = const { RefCell::new(None) };
}

async fn webgpu() -> Result<Device, st5_core::Error> {
    if let Some(d) = WEBGPU.with(|w| w.borrow().clone()) {
        return Ok(d);
    }
    let d = Backend::Wgpu.device_async().await?;
    WEBGPU.with(|w| *w.borrow_mut() = Some(d.clone()));
    Ok(d)
}

fn js(e: impl std::fmt::Display) -> JsError {
    JsError::new(&e.to_string())
}

/// Reads `{ "path": Uint8Array | ArrayBuffer }` (or a `Map` of the same) into memory.
fn files_from_js(files: &JsValue) -> Result<MemoryFiles, JsError> {
    let entries = if let Some(map) = files.dyn_ref::<js_sys::Map>() {
        js_sys::Array::from(&map.entries().into())
    } else if let Some(obj) = files.dyn_ref::<Object>() {
        Object::entries(obj)
    } else {
        return Err(JsError::new("files must be an object or Map from file name to Uint8Array/ArrayBuffer"));
    };
    let mut out = MemoryFiles { label: "files".into(), ..Default::default() };
    for entry in entries.iter() {
        let pair = js_sys::Array::from(&entry);
        let name = pair.get(0).as_string().ok_or_else(|| JsError::new("file names must be strings"))?;
        let value = pair.get(1);
        if !(value.is_instance_of::<Uint8Array>() || value.is_instance_of::<js_sys::ArrayBuffer>()) {
            return Err(JsError::new(&format!("file `{name}` must be a Uint8Array or ArrayBuffer")));
        }
        out.files.insert(name.trim_start_matches("./").to_string(), Uint8Array::new(&value).to_vec());
    }
    Ok(out)
}

/// A loaded Sentence-T5 model.
#[wasm_bindgen]
pub struct Model {
    embedder: Rc<Embedder>,
    device: &'static str,
}

#[wasm_bindgen]
impl Model {
    /// Loads a model from in-memory files (sentence-transformers or Hugging Face T5 layout).
    pub async fn load(files: JsValue, options: JsValue) -> Result<Model, JsError> {
        let files = files_from_js(&files)?;
        let options: Options = if options.is_undefined() || options.is_null() {
            Options::default()
        } else {
            serde_wasm_bindgen::from_value(options).map_err(js)?
        };
        let load = LoadOptions {
            variant: options.variant.as_deref().map(str::parse::<Variant>).transpose().map_err(js)?,
            tokenizer: None,
            max_seq_length: options.max_seq_length,
            batch_size: options.batch_size.unwrap_or(32),
        };
        let (device, name) = match options.device.as_deref().unwrap_or("auto") {
            "cpu" => (Device::flex(), "cpu"),
            "webgpu" => (webgpu().await.map_err(js)?, "webgpu"),
            "auto" => match webgpu().await {
                Ok(d) => (d, "webgpu"),
                Err(_) => (Device::flex(), "cpu"),
            },
            other => return Err(JsError::new(&format!("unknown device `{other}` (expected auto, webgpu or cpu)"))),
        };
        let embedder = Embedder::load_from(&files, &load, &device).map_err(js)?;
        Ok(Model { embedder: Rc::new(embedder), device: name })
    }

    /// Embeds `texts`; resolves to a `Float32Array` of `texts.length * dim` values, row-major,
    /// in input order.
    pub fn embed(&self, texts: Vec<String>) -> Promise {
        let embedder = self.embedder.clone();
        wasm_bindgen_futures::future_to_promise(async move {
            let e = embedder.embed_async(&texts).await.map_err(|e| JsValue::from(js(e)))?;
            Ok(Float32Array::from(e.data.as_slice()).into())
        })
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
}
