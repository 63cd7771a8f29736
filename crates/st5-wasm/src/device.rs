//! Device choice for the exported classes: the `device` option (`"auto"`, or a name
//! `DeviceChoice` parses) to a device, its buffer limit and its web name. WebGPU is initialised
//! once per page.

use std::cell::RefCell;

use st5_core::{Device, DeviceChoice, OpenDevice};
use wasm_bindgen::JsValue;

use crate::js::{invalid, js_error};

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

/// The device named by a `device` option (`"auto"` when absent), its buffer limit and which of
/// the two it is (`web_name` names it to JS).
pub(crate) async fn pick_device(
    wanted: Option<&str>,
) -> Result<(Device, Option<u64>, DeviceChoice), JsValue> {
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
    Ok((device, limit, choice))
}

/// The lower of two optional limits.
pub(crate) fn lower(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}
