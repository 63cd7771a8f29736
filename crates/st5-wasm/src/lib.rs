//! `st5-wasm`: the st5-core Sentence-T5 model in the browser through wasm-bindgen. WebGPU runs
//! through burn's wgpu backend, with burn's flex backend as the CPU fallback; model files come
//! from memory (fetched or picked by the JS layer in `pkg/`, which also queues calls and falls
//! back to the CPU). Errors become `JsError` here, once.

use std::cell::RefCell;
use std::rc::Rc;

use js_sys::{Float32Array, Object, Promise, Reflect, Uint8Array};
use serde::{Deserialize, Serialize};
use st5_core::probe::{FilePlan, Probe, plan};
use st5_core::{
    DEFAULT_BATCH_SIZE, Device, DeviceChoice, Embedder, Hit, LoadOptions, MemoryFiles, OpenDevice,
    Quantize, Variant, VectorIndex,
};
use wasm_bindgen::prelude::*;

// Static constructors (cubecl registers its IR dialects through `inventory`) run once, here,
// when the module starts. Without an explicit call, wasm-ld links the module "command-style" and
// wraps *every* export in a call to all constructors: each `embed`, and each string wasm-bindgen
// passes in (one `__wbindgen_malloc` per text). That cost ~1.5 ms per call, 0.8 s of st5-mini's
// 2.3 s for 512 sentences. See inventory's "WebAssembly and constructors" docs:
// https://docs.rs/inventory/0.3.25/inventory/#webassembly-and-constructors
#[cfg(target_arch = "wasm32")]
unsafe extern "C" {
    fn __wasm_call_ctors();
}

/// Runs the static constructors; wasm-bindgen calls this right after instantiation.
#[cfg(target_arch = "wasm32")]
#[wasm_bindgen(start)]
fn start() {
    // SAFETY: called once per instance, before any other export (wasm-bindgen's start hook);
    // wasm-ld then no longer calls the constructors from every export.
    unsafe { __wasm_call_ctors() }
    // A panic aborts, which traps the instance with a bare "unreachable" RuntimeError. The hook
    // keeps the message (and logs it) for pkg/runtime.js, which reports it as an internal error.
    std::panic::set_hook(Box::new(|info| {
        let message = info.to_string();
        console_error(&format!("st5: {message}"));
        LAST_PANIC.with(|p| *p.borrow_mut() = Some(message));
    }));
}

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_namespace = console, js_name = error)]
    fn console_error(message: &str);
}

thread_local! {
    /// The message of the panic that trapped this instance.
    static LAST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// The message of the panic that trapped this instance ("panicked at FILE:LINE:COL:" and the
/// payload), once; `undefined` if there was none. pkg/runtime.js asks after a trap.
#[wasm_bindgen(js_name = takePanic)]
pub fn take_panic() -> Option<String> {
    LAST_PANIC.with(|p| p.borrow_mut().take())
}

/// Panics. For the package's tests of what follows a trap (the error, the recovery); nothing
/// else calls it.
#[wasm_bindgen(js_name = panicForTest)]
pub fn panic_for_test() {
    panic!("panicForTest was called");
}

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
}

thread_local! {
    /// burn's WebGPU runtime is initialised once per page; later models reuse the device and
    /// its buffer limit.
    static WEBGPU: RefCell<Option<(Device, Option<u64>)>> = const { RefCell::new(None) };
}

async fn webgpu() -> Result<(Device, Option<u64>), st5_core::Error> {
    if let Some(d) = WEBGPU.with(|w| w.borrow().clone()) {
        return Ok(d);
    }
    let d = DeviceChoice::Wgpu.device_async().await?;
    WEBGPU.with(|w| *w.borrow_mut() = Some(d.clone()));
    Ok(d)
}

/// The device named by a `device` option (`"auto"` when absent), its buffer limit and name.
async fn pick_device(wanted: Option<&str>) -> Result<(Device, Option<u64>, &'static str), JsValue> {
    let wanted = match wanted.unwrap_or("auto") {
        "auto" => None,
        name => Some(name.parse::<DeviceChoice>().map_err(js_error)?),
    };
    let (device, limit, choice) = match wanted {
        Some(DeviceChoice::Cpu) => (Device::flex(), None, DeviceChoice::Cpu),
        Some(DeviceChoice::Wgpu) => {
            let (d, limit) = webgpu().await.map_err(js_error)?;
            (d, limit, DeviceChoice::Wgpu)
        }
        // `DeviceChoice::WEB`'s order: WebGPU, else the CPU.
        None => match webgpu().await {
            Ok((d, limit)) => (d, limit, DeviceChoice::Wgpu),
            Err(_) => (Device::flex(), None, DeviceChoice::Cpu),
        },
        // A device only a native build has (the trainer's CUDA).
        Some(other) => return Err(invalid(&format!("device `{other}` is not offered here"))),
    };
    Ok((device, limit, choice.web_name()))
}

/// The lower of two optional limits.
fn lower(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The one conversion of core errors to JS. Device failures (a lost device, a failed read-back
/// or WebGPU initialisation) carry `code: "device"`, which the JS layer answers by re-running
/// the call on the CPU; anything else is the caller's to fix.
fn js_error(e: st5_core::Error) -> JsValue {
    let code = match e {
        st5_core::Error::Device { .. } | st5_core::Error::Readback(_) => "device",
        st5_core::Error::Limit { .. } => "limit",
        _ => "model",
    };
    let err = JsValue::from(JsError::new(&e.to_string()));
    // Setting a property on a fresh Error object cannot fail.
    let _ = Reflect::set(&err, &"code".into(), &code.into());
    err
}

fn invalid(message: &str) -> JsValue {
    js_error(st5_core::Error::Invalid(message.to_string()))
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

/// Reads `{ "path": Uint8Array | ArrayBuffer }` (or a `Map` of the same) into memory.
fn files_from_js(files: &JsValue, label: &str) -> Result<MemoryFiles, JsValue> {
    let mut out = MemoryFiles { label: label.into(), ..Default::default() };
    for entry in entries(files, "files")?.iter() {
        let pair = js_sys::Array::from(&entry);
        let name = pair.get(0).as_string().ok_or_else(|| invalid("file names must be strings"))?;
        let value = pair.get(1);
        if !(value.is_instance_of::<Uint8Array>() || value.is_instance_of::<js_sys::ArrayBuffer>())
        {
            return Err(invalid(&format!(
                "file `{name}` must be a Uint8Array or ArrayBuffer (read Blobs first)"
            )));
        }
        out.files.insert(
            name.trim_start_matches("./").to_string(),
            Uint8Array::new(&value).to_vec().into(),
        );
    }
    Ok(out)
}

#[derive(Serialize)]
#[serde(rename_all = "lowercase")]
enum PlanOut {
    Need(Vec<String>),
    Ready(Vec<String>),
}

/// Discovers a remote model's files (see `st5_core::probe`), keeping what it has learnt between
/// rounds, so each fetched file is copied into wasm once. Tell it each file fetched (`add`),
/// known to exist (`present`: weights, checked with HEAD) or absent (a 404), then ask `next`.
#[wasm_bindgen]
pub struct FilePlanner {
    probe: Probe,
}

#[wasm_bindgen]
impl FilePlanner {
    /// `label` (the base URL) prefixes paths in errors.
    #[wasm_bindgen(constructor)]
    pub fn new(label: String) -> FilePlanner {
        FilePlanner { probe: Probe::new(label) }
    }

    /// A file fetched, with its bytes.
    pub fn add(&mut self, name: String, bytes: Vec<u8>) {
        self.probe.fetched.insert(name, bytes.into());
    }

    /// A file known to exist whose bytes planning does not need (a weight file).
    pub fn present(&mut self, name: String) {
        self.probe.present.insert(name);
    }

    /// A file that does not exist (a 404).
    pub fn absent(&mut self, name: String) {
        self.probe.absent.insert(name);
    }

    /// `{ need: [...] }`: fetch these (GET; HEAD for `.safetensors`/`.bin`), report them and
    /// ask again; or `{ ready: [...] }`: download these weight files, then `Model.load`.
    pub fn next(&self) -> Result<JsValue, JsValue> {
        let out = match plan(&self.probe).map_err(js_error)? {
            FilePlan::Need(v) => PlanOut::Need(v),
            FilePlan::Ready(v) => PlanOut::Ready(v),
        };
        serde_wasm_bindgen::to_value(&out).map_err(|e| invalid(&e.to_string()))
    }
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
        let files = files_from_js(&files, label.as_deref().unwrap_or("files:"))?;
        let options: Options = if options.is_undefined() || options.is_null() {
            Options::default()
        } else {
            serde_wasm_bindgen::from_value(options)
                .map_err(|e| invalid(&format!("options: {e}")))?
        };
        let (device, limit, name) = pick_device(options.device.as_deref()).await?;
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
        };
        let embedder = Embedder::load_from(&files, &load, &device).map_err(js_error)?;
        let weight_files =
            st5_core::fingerprint::weight_files(&files, embedder.layout()).map_err(js_error)?;
        Ok(Model { embedder: Rc::new(embedder), device: name, weight_files })
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

    /// Tokens kept per text; longer texts are truncated, as sentence-transformers does.
    #[wasm_bindgen(getter, js_name = maxSeqLength)]
    pub fn max_seq_length(&self) -> usize {
        self.embedder.tokenizer().max_len()
    }

    /// `"enc-mean"`, `"enc-first"` or `"encdec-first"`.
    #[wasm_bindgen(getter)]
    pub fn variant(&self) -> String {
        self.embedder.variant().to_string()
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
/// `st5_core::index`); a quantized index's hits are candidates for [`Index::rescore`].
#[wasm_bindgen]
pub struct Index {
    inner: RefCell<VectorIndex>,
    device: &'static str,
}

#[wasm_bindgen]
impl Index {
    /// An empty index of `dim`-wide vectors on `options.device` (`auto`, `webgpu` or `cpu`).
    pub async fn create(dim: usize, options: JsValue) -> Result<Index, JsValue> {
        let options: IndexOptions = if options.is_undefined() || options.is_null() {
            IndexOptions::default()
        } else {
            serde_wasm_bindgen::from_value(options)
                .map_err(|e| invalid(&format!("index options: {e}")))?
        };
        let (device, limit, name) = pick_device(options.device.as_deref()).await?;
        let limit = lower(limit, options.max_buffer_bytes);
        let quantize = options.quantize.unwrap_or_default();
        let mut index =
            VectorIndex::with_quantize(dim, &device, limit, quantize).map_err(js_error)?;
        if let Some(rows) = options.shard_rows {
            index = index.with_shard_rows(rows);
        }
        Ok(Index { inner: RefCell::new(index), device: name })
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
        let hits = st5_core::index::rescore(query, ids, rows, k).map_err(js_error)?;
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
