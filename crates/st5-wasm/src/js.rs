//! The crate's conversions at the JS boundary: core errors to JS errors (once, here) and plain JS
//! options objects to Rust.

use js_sys::Reflect;
use serde::de::DeserializeOwned;
use wasm_bindgen::prelude::*;

/// The one conversion of core errors to JS. Device failures (a lost device, a failed read-back
/// or WebGPU initialisation) carry `code: "device"`, which the JS layer answers by re-running
/// the call on the CPU; anything else is the caller's to fix.
pub(crate) fn js_error(e: impl Into<st5_core::Error>) -> JsValue {
    let e = e.into();
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

pub(crate) fn invalid(message: &str) -> JsValue {
    js_error(st5_core::Error::Invalid(message.to_string()))
}

/// An options object (`undefined` or `null`: the defaults); `what` names it in errors.
pub(crate) fn options_from_js<T: DeserializeOwned + Default>(
    options: JsValue,
    what: &str,
) -> Result<T, JsValue> {
    if options.is_undefined() || options.is_null() {
        return Ok(T::default());
    }
    serde_wasm_bindgen::from_value(options).map_err(|e| invalid(&format!("{what}: {e}")))
}
