//! Browser tests (`wasm-pack test --headless --chrome`): the st5-core model in WebAssembly
//! reproduces the Python reference embeddings (max abs error ≤ 1e-5) on burn's flex CPU backend
//! and on WebGPU, through the same `Model` API the npm package wraps.
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
    "modules.json", "config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
    "sentence_bert_config.json", "1_Pooling/config.json", "2_Dense/config.json", "2_Dense/model.safetensors",
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
    let obj = Object::new();
    Reflect::set(&obj, &"device".into(), &device.into()).unwrap();
    Reflect::set(&obj, &"batchSize".into(), &4.into()).unwrap();
    obj.into()
}

async fn check(device: &str) -> f32 {
    let expected: serde_json::Value = serde_json::from_str(EXPECTED).unwrap();
    let sentences: Vec<String> = expected["sentences"].as_array().unwrap().iter().map(|s| s.as_str().unwrap().to_string()).collect();
    let want: Vec<Vec<f64>> = expected["embeddings"]["enc-mean"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect())
        .collect();
    let model = Model::load(files(), options(device)).await.unwrap_or_else(|e| panic!("load on {device}: {:?}", JsValue::from(e)));
    assert_eq!(model.device(), device);
    let dim = model.dim();
    let got = Float32Array::from(JsFuture::from(model.embed(sentences.clone())).await.unwrap()).to_vec();
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
    Reflect::set(&obj, &"modules.json".into(), &Uint8Array::from(&b"[not json"[..]).into()).unwrap();
    let err = match Model::load(obj.into(), options("cpu")).await {
        Ok(_) => panic!("loaded garbage"),
        Err(e) => JsValue::from(e),
    };
    let msg = Reflect::get(&err, &"message".into()).unwrap().as_string().unwrap();
    assert!(msg.contains("modules.json"), "{msg}");
}
