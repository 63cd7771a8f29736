//! `st5-wasm`: the st5-core Sentence-T5 model in the browser through wasm-bindgen. WebGPU runs
//! through burn's wgpu backend, with burn's flex backend as the CPU fallback; model files come
//! from memory (fetched or picked by the JS layer in `pkg/`, which also queues calls and falls
//! back to the CPU). Errors become `JsError` here, once.
//!
//! One module per exported class: `planner` (`FilePlanner`), `model` (`Model`), `index`
//! (`Index`), `documents` (`Documents`) and `index_file` (the index file's reader and writer pieces); beside them `panic`
//! (the start hook, `takePanic`, `panicForTest`), `device` (the `device` option to a device) and
//! `js` (errors and options at the JS boundary).

mod device;
mod documents;
mod heap;
mod index;
mod index_file;
mod js;
mod model;
mod panic;
mod planner;

pub use documents::Documents;
pub use index::Index;
pub use index_file::IndexChecksum;
pub use model::Model;
pub use panic::{panic_for_test, take_panic};
pub use planner::FilePlanner;
