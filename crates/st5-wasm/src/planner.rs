//! `FilePlanner`: which files of a remote model to fetch, round by round (see
//! `st5_core::probe`).

use serde::Serialize;
use st5_core::probe::{FilePlan, Probe, plan};
use wasm_bindgen::prelude::*;

use crate::js::{invalid, js_error};

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
