//! The wasm crate's tests in the browser (`scripts/wasm-test.sh`: headless Chromium through
//! ChromeDriver): the st5-wasm exports the npm package wraps, called from Rust with no JS layer in
//! between. `FilePlanner` discovers a model's files from in-memory fixture bytes, round by round as
//! pkg/files.js does over HTTP; `Model.load` of exactly the planned files reproduces the Python
//! reference (tests/reference/make_fixtures.py) within 1e-5 on the CPU (burn's flex backend) and
//! on WebGPU (SwiftShader here); bad files are a JS error naming the file.
#![cfg(target_arch = "wasm32")]

use std::collections::BTreeMap;

use js_sys::{Float32Array, Object, Reflect, Uint8Array};
use st5_wasm::{FilePlanner, Model};
use wasm_bindgen::JsValue;
use wasm_bindgen_futures::JsFuture;
use wasm_bindgen_test::*;

wasm_bindgen_test_configure!(run_in_browser);

/// The reference fixture's files, by the relative path the planner names them with.
macro_rules! fixture {
    ($($rel:literal),* $(,)?) => {
        [$(($rel, include_bytes!(concat!("../fixtures/st-enc-mean-relu/", $rel)) as &[u8])),*]
    };
}

const FILES: [(&str, &[u8]); 11] = fixture!(
    "modules.json",
    "config.json",
    "config_sentence_transformers.json",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
    "sentence_bert_config.json",
    "1_Pooling/config.json",
    "2_Dense/config.json",
    "2_Dense/model.safetensors",
    "3_Normalize/config.json",
);
const EXPECTED: &str = include_str!("../fixtures/st-enc-mean-relu/expected.json");
/// The CPU path and WebGPU against the Python reference (the npm package's tests use the same).
const TOL: f32 = 1e-5;

unsafe extern "C" {
    fn __wasm_call_ctors();
}

/// Runs the module's static constructors once, as st5-wasm's start hook (panic.rs) does in the
/// package: wasm-bindgen-test runs no `#[wasm_bindgen(start)]` hook, and without them cubecl has
/// not registered its IR types, so the first WebGPU kernel panics ("Expected type cube.f32 to
/// implement dyn SizedType"), which traps the instance and leaves the runner waiting.
fn run_constructors() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    // SAFETY: once per instance, before any model is built; nothing else calls them in a test.
    ONCE.call_once(|| unsafe { __wasm_call_ctors() });
}

/// Plans the fixture's files as the package does over HTTP: answers each round's `need` from
/// the fixture (weights only as present, unknown paths as absent) until the planner is ready,
/// and returns every file it asked for or named as a weight to download.
fn planned_files() -> BTreeMap<&'static str, &'static [u8]> {
    let all: BTreeMap<_, _> = FILES.into_iter().collect();
    let mut planner = FilePlanner::new("mem:/".into());
    let mut chosen = BTreeMap::new();
    for _round in 0..16 {
        let plan = planner.next().expect("plan");
        let list = |key: &str| -> Option<Vec<String>> {
            let v = Reflect::get(&plan, &key.into()).ok().filter(|v| !v.is_undefined())?;
            Some(serde_wasm_bindgen::from_value(v).expect("a list of names"))
        };
        if let Some(weights) = list("ready") {
            for name in weights {
                let (k, v) = all.get_key_value(name.as_str()).expect("a planned weight exists");
                chosen.insert(*k, *v);
            }
            return chosen;
        }
        for name in list("need").expect("need or ready") {
            match all.get_key_value(name.as_str()) {
                Some((k, _)) if k.ends_with(".safetensors") => planner.present(name),
                Some((k, v)) => {
                    chosen.insert(*k, *v);
                    planner.add(name, v.to_vec());
                }
                None => planner.absent(name),
            }
        }
    }
    panic!("the planner did not finish in 16 rounds");
}

fn js_files(files: &BTreeMap<&str, &[u8]>) -> JsValue {
    let obj = Object::new();
    for (name, bytes) in files {
        Reflect::set(&obj, &(*name).into(), &Uint8Array::from(*bytes).into()).unwrap();
    }
    obj.into()
}

fn options(device: &str) -> JsValue {
    let obj = Object::new();
    Reflect::set(&obj, &"device".into(), &device.into()).unwrap();
    Reflect::set(&obj, &"batchSize".into(), &4.0.into()).unwrap();
    obj.into()
}

#[wasm_bindgen::prelude::wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_namespace = console)]
    fn log(message: &str);
}

/// Loads the planned files on `device`, embeds the reference sentences and returns the largest
/// difference from the reference embeddings.
async fn max_error(device: &str) -> f32 {
    run_constructors();
    let expected: serde_json::Value = serde_json::from_str(EXPECTED).unwrap();
    let texts: Vec<String> = serde_json::from_value(expected["sentences"].clone()).unwrap();
    let want: Vec<Vec<f32>> =
        serde_json::from_value(expected["embeddings"]["enc-mean"].clone()).unwrap();
    let model = Model::load(js_files(&planned_files()), options(device), None)
        .await
        .unwrap_or_else(|e| panic!("load on {device}: {e:?}"));
    assert_eq!(model.device(), device);
    let got =
        Float32Array::from(JsFuture::from(model.embed(texts.clone())).await.unwrap()).to_vec();
    assert_eq!(got.len(), texts.len() * model.dim());
    let err = got
        .chunks(model.dim())
        .zip(&want)
        .flat_map(|(g, w)| g.iter().zip(w).map(|(a, b)| (a - b).abs()))
        .fold(0.0, f32::max);
    log(&format!("{device}: max abs error {err:e} over {} sentences", texts.len()));
    err
}

#[wasm_bindgen_test]
fn planner_names_the_layout_and_both_weight_files() {
    let names: Vec<&str> = planned_files().into_keys().collect();
    log(&format!("planned: {names:?}"));
    for must in ["modules.json", "model.safetensors", "2_Dense/model.safetensors", "tokenizer.json"]
    {
        assert!(names.contains(&must), "{must} not planned: {names:?}");
    }
}

#[wasm_bindgen_test]
async fn planned_files_match_the_reference_on_cpu() {
    let err = max_error("cpu").await;
    assert!(err <= TOL, "cpu: max abs error {err:e}");
}

#[wasm_bindgen_test]
async fn planned_files_match_the_reference_on_webgpu() {
    let err = max_error("webgpu").await;
    assert!(err <= TOL, "webgpu: max abs error {err:e}");
}

#[wasm_bindgen_test]
async fn bad_files_are_a_js_error_naming_the_file() {
    run_constructors();
    let obj = Object::new();
    Reflect::set(&obj, &"modules.json".into(), &Uint8Array::from(&b"[not json"[..]).into())
        .unwrap();
    let Err(err) = Model::load(obj.into(), options("cpu"), Some("http://host/m/".into())).await
    else {
        panic!("loaded a modules.json that is not JSON");
    };
    let message = Reflect::get(&err, &"message".into()).unwrap().as_string().unwrap();
    assert!(message.contains("http://host/m/modules.json"), "{message}");
}
