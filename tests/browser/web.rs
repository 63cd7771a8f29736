//! Browser tests (`wasm-pack test --headless --chrome`): the st5-core model in WebAssembly
//! reproduces the Python reference embeddings (max abs error ≤ 1e-5) on burn's flex CPU backend
//! and on WebGPU, through the same `Model` API the npm package wraps; batches are invariant,
//! split to the buffer limit, and empty and over-long texts give defined vectors.
#![cfg(target_arch = "wasm32")]

use js_sys::{Float32Array, Object, Reflect, Uint8Array};
use st5_wasm::Model;
use wasm_bindgen::JsValue;
use wasm_bindgen_futures::JsFuture;
use wasm_bindgen_test::*;

wasm_bindgen_test_configure!(run_in_browser);

macro_rules! fixture {
    ($($rel:literal),*) => {
        [$(($rel, include_bytes!(concat!("../fixtures/st-enc-mean-relu/", $rel)) as &[u8])),*]
    };
}

const FILES: [(&str, &[u8]); 10] = fixture!(
    "modules.json",
    "config.json",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
    "sentence_bert_config.json",
    "1_Pooling/config.json",
    "2_Dense/config.json",
    "2_Dense/model.safetensors",
    "3_Normalize/config.json"
);
const EXPECTED: &str = include_str!("../fixtures/st-enc-mean-relu/expected.json");

fn files() -> JsValue {
    let obj = Object::new();
    for (name, bytes) in FILES {
        Reflect::set(&obj, &name.into(), &Uint8Array::from(bytes).into()).unwrap();
    }
    obj.into()
}

fn options(device: &str) -> JsValue {
    options_with(device, &[("batchSize", 4.0)])
}

fn options_with(device: &str, extra: &[(&str, f64)]) -> JsValue {
    let obj = Object::new();
    Reflect::set(&obj, &"device".into(), &device.into()).unwrap();
    for (k, v) in extra {
        Reflect::set(&obj, &(*k).into(), &(*v).into()).unwrap();
    }
    obj.into()
}

async fn load(device: &str, opts: JsValue) -> Model {
    Model::load(files(), opts, None).await.unwrap_or_else(|e| panic!("load on {device}: {e:?}"))
}

async fn embed(model: &Model, texts: &[String]) -> Vec<Vec<f32>> {
    let flat =
        Float32Array::from(JsFuture::from(model.embed(texts.to_vec())).await.unwrap()).to_vec();
    assert_eq!(flat.len(), texts.len() * model.dim());
    flat.chunks(model.dim()).map(<[f32]>::to_vec).collect()
}

fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

fn sentences() -> Vec<String> {
    let expected: serde_json::Value = serde_json::from_str(EXPECTED).unwrap();
    expected["sentences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

async fn check(device: &str) -> f32 {
    let expected: serde_json::Value = serde_json::from_str(EXPECTED).unwrap();
    let sentences: Vec<String> = expected["sentences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect();
    let want: Vec<Vec<f64>> = expected["embeddings"]["enc-mean"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect())
        .collect();
    let model = load(device, options(device)).await;
    assert_eq!(model.device(), device);
    let dim = model.dim();
    let got =
        Float32Array::from(JsFuture::from(model.embed(sentences.clone())).await.unwrap()).to_vec();
    assert_eq!(got.len(), sentences.len() * dim);
    let err = want
        .iter()
        .enumerate()
        .flat_map(|(i, row)| row.iter().enumerate().map(move |(j, w)| (i, j, *w)))
        .map(|(i, j, w)| (got[i * dim + j] - w as f32).abs())
        .fold(0.0f32, f32::max);
    web_sys_log(&format!("browser parity on {device}: max abs error {err:e}"));
    assert!(err <= 1e-5, "{device}: max abs error {err:e}");
    err
}

fn web_sys_log(msg: &str) {
    js_sys::eval(&format!("console.log({:?})", msg)).ok();
}

#[wasm_bindgen_test]
async fn parity_on_cpu() {
    check("cpu").await;
}

#[wasm_bindgen_test]
async fn parity_on_webgpu() {
    check("webgpu").await;
}

#[wasm_bindgen_test]
async fn bad_files_are_a_js_error() {
    let obj = Object::new();
    Reflect::set(&obj, &"modules.json".into(), &Uint8Array::from(&b"[not json"[..]).into())
        .unwrap();
    let err = match Model::load(obj.into(), options("cpu"), Some("http://host/m/".into())).await {
        Ok(_) => panic!("loaded garbage"),
        Err(e) => e,
    };
    let msg = Reflect::get(&err, &"message".into()).unwrap().as_string().unwrap();
    assert!(msg.contains("http://host/m/modules.json"), "{msg}");
}

/// Each sentence alone equals the same sentence padded in a batch beside longer ones.
async fn check_batch_invariance(device: &str) {
    let model = load(device, options_with(device, &[("batchSize", 64.0)])).await;
    let texts = sentences();
    let batched = embed(&model, &texts).await;
    for (i, text) in texts.iter().enumerate() {
        let alone = embed(&model, std::slice::from_ref(text)).await;
        let err = max_diff(&alone[0], &batched[i]);
        assert!(err <= 1e-5, "{device}, sentence {i}: alone vs batched differ by {err:e}");
    }
}

#[wasm_bindgen_test]
async fn batch_invariance_on_cpu() {
    check_batch_invariance("cpu").await;
}

#[wasm_bindgen_test]
async fn batch_invariance_on_webgpu() {
    check_batch_invariance("webgpu").await;
}

/// The empty text gives a defined unit vector, and a text past the model's maximum length
/// (16 tokens in this fixture) equals its truncation, as in sentence-transformers.
#[wasm_bindgen_test]
async fn empty_and_over_long_texts() {
    for device in ["cpu", "webgpu"] {
        let model = load(device, options(device)).await;
        assert_eq!(model.max_seq_length(), 16);
        let words: Vec<String> = (0..40).map(|i| format!("w{i}")).collect();
        let long = words.join(" ");
        // Each `wN` is several T5 tokens, so 10 words already exceed 16 tokens.
        let prefix = words[..10].join(" ");
        let out = embed(&model, &["".to_string(), long.clone(), prefix]).await;
        let norm = out[0].iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!(
            out[0].iter().all(|x| x.is_finite()) && (norm - 1.0).abs() < 1e-4,
            "{device}: empty text gave {:?}",
            out[0]
        );
        let err = max_diff(&out[1], &out[2]);
        assert!(err <= 1e-5, "{device}: over-long text differs from its truncation by {err:e}");
    }
}

/// A small buffer cap splits the batch on WebGPU without changing any embedding.
#[wasm_bindgen_test]
async fn buffer_cap_splits_batches_on_webgpu() {
    // Long texts (max length raised to 512) so that attention scores, 16·n² bytes for n tokens
    // here, outgrow the cap while the 1 MiB embedding table still fits.
    let mut texts: Vec<String> =
        [150, 140, 130, 120, 110, 100].iter().map(|&n| "word ".repeat(n)).collect();
    texts.extend(sentences());
    let opts = |cap: Option<f64>| {
        let mut extra = vec![("batchSize", 64.0), ("maxSeqLength", 512.0)];
        extra.extend(cap.map(|c| ("maxBufferBytes", c)));
        options_with("webgpu", &extra)
    };
    let free = load("webgpu", opts(None)).await;
    let capped = load("webgpu", opts(Some(1_100_000.0))).await;
    let plan: Vec<Vec<usize>> =
        serde_wasm_bindgen::from_value(capped.plan_batches(texts.clone()).unwrap()).unwrap();
    let plan_free: Vec<Vec<usize>> =
        serde_wasm_bindgen::from_value(free.plan_batches(texts.clone()).unwrap()).unwrap();
    assert_eq!(plan_free.len(), 1, "{plan_free:?}");
    assert!(plan.len() > 2, "the cap should split the batch: {plan:?}");
    let want = embed(&free, &texts).await;
    let got = embed(&capped, &texts).await;
    let err = (0..texts.len()).map(|i| max_diff(&got[i], &want[i])).fold(0.0, f32::max);
    assert!(err <= 1e-5, "capped vs free: {err:e}; plan {plan:?}");
}
