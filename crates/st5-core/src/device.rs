//! Opening the device a run chose: burn's flex CPU backend or its wgpu backend (Vulkan, Metal,
//! DX12; lavapipe in CI). Model code never names a backend: it takes the [`Device`] opened here.
//! The choice itself, by name, is st5-format's [`DeviceChoice`].

use burn::tensor::Device;
pub use st5_format::device_choice::DeviceChoice;

use crate::error::{Error, Result};

/// The largest tensor a device holds: a tensor is bound as one storage buffer, so both limits
/// apply to it.
macro_rules! buffer_limit {
    ($limits:expr) => {{
        let limits = $limits;
        limits.max_storage_buffer_binding_size.min(limits.max_buffer_size)
    }};
}

/// Opens a [`DeviceChoice`]: the CPU or wgpu (this crate opens no other device; the trainer
/// opens CUDA itself).
pub trait OpenDevice {
    /// The device. wgpu is initialised once per process (burn's runtime cannot be
    /// re-initialised) and a failure (no adapter or driver) is a typed error, not a panic on the
    /// first tensor.
    #[cfg(not(target_arch = "wasm32"))]
    fn device(self) -> Result<Device>;

    /// The device with the largest buffer it allows in bytes (`None` for the CPU), as
    /// [`device_async`](Self::device_async) gives it in a browser: what an index needs to keep
    /// each shard within one binding.
    #[cfg(not(target_arch = "wasm32"))]
    fn device_with_limit(self) -> Result<(Device, Option<u64>)>;

    /// The device, initialised asynchronously: what a browser needs (WebGPU adapters are only
    /// handed out through promises), with the largest buffer it allows in bytes (`None` for the
    /// CPU). burn requests the adapter's own limits, not WebGPU's defaults, so a model whose
    /// embedding table outgrows 128 MiB still fits where the GPU allows it. Call once per page;
    /// clone the device to reuse it.
    fn device_async(self) -> impl Future<Output = Result<(Device, Option<u64>)>>;
}

/// The error for a device this crate does not open.
fn not_opened_here(choice: DeviceChoice) -> Error {
    Error::Device { device: choice.to_string(), message: "st5-core opens cpu and wgpu".into() }
}

impl OpenDevice for DeviceChoice {
    #[cfg(not(target_arch = "wasm32"))]
    fn device(self) -> Result<Device> {
        self.device_with_limit().map(|(device, _)| device)
    }

    #[cfg(not(target_arch = "wasm32"))]
    fn device_with_limit(self) -> Result<(Device, Option<u64>)> {
        match self {
            DeviceChoice::Cpu => Ok((Device::flex(), None)),
            DeviceChoice::Wgpu => {
                type Init = std::result::Result<(Device, u64), String>;
                static WGPU: std::sync::OnceLock<Init> = std::sync::OnceLock::new();
                let (device, limit) = WGPU
                    .get_or_init(|| {
                        let (device, setup) =
                            Device::wgpu_options().init_with_setup().map_err(|e| e.to_string())?;
                        Ok((device, buffer_limit!(setup.device.limits())))
                    })
                    .clone()
                    .map_err(|message| Error::Device { device: "wgpu".into(), message })?;
                Ok((device, Some(limit)))
            }
            other => Err(not_opened_here(other)),
        }
    }

    async fn device_async(self) -> Result<(Device, Option<u64>)> {
        match self {
            DeviceChoice::Cpu => Ok((Device::flex(), None)),
            DeviceChoice::Wgpu => {
                let (device, setup) = Device::wgpu_options()
                    .init_with_setup_async()
                    .await
                    .map_err(|e| Error::Device { device: "wgpu".into(), message: e.to_string() })?;
                Ok((device, Some(buffer_limit!(setup.device.limits()))))
            }
            other => Err(not_opened_here(other)),
        }
    }
}

/// True for a wgpu (GPU) device, false for flex.
pub fn is_gpu(device: &Device) -> bool {
    device.clone().inner().identity().is_some()
}

/// On a GPU device, frees the buffers cubecl's pools keep for reuse once their tensors are gone:
/// the weights of a dropped model, an index's outgrown shards. Pools never shrink by themselves,
/// so a long session that loads, drops or grows things would keep every size it ever used. (On
/// the web, wgpu frees a released buffer when its JS object is collected.) A no-op on the CPU.
pub fn release_pooled_memory(device: &Device) {
    if is_gpu(device) {
        device.memory_cleanup();
    }
}

/// For tests: reports that `reason` (an opt-out such as `ST5_SKIP_WGPU=1`) left out part or all
/// of the running test, as a line of its own, `skipped: TEST: REASON`, which `scripts/test.sh`
/// counts. Written to stderr directly, past the test harness's capture of `eprintln!`, so that a
/// check left out is seen rather than passed silently.
#[doc(hidden)]
pub fn report_skipped(reason: &str) {
    use std::io::Write;
    let current = std::thread::current();
    let test = current.name().unwrap_or("a test");
    let _ = write!(std::io::stderr(), "\nskipped: {test}: {reason}\n");
}

/// For tests: the wgpu device, or `None` (reported by [`report_skipped`]) when `ST5_SKIP_WGPU=1`.
/// Without that opt-out a missing adapter fails the test: CI installs lavapipe so that the wgpu
/// checks always run.
#[doc(hidden)]
#[cfg(not(target_arch = "wasm32"))]
pub fn wgpu_for_tests() -> Option<Device> {
    if std::env::var("ST5_SKIP_WGPU").is_ok_and(|v| v == "1") {
        report_skipped("wgpu (ST5_SKIP_WGPU=1)");
        return None;
    }
    Some(DeviceChoice::Wgpu.device().unwrap_or_else(|e| {
        panic!("{e}; install a Vulkan driver (mesa-vulkan-drivers) or set ST5_SKIP_WGPU=1")
    }))
}
