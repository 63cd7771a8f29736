//! The devices a run can be asked for, by name: one closed set, parsed once at the edge (`st5
//! --device`, the trainer's `device = "..."`, the browser package's `device` option), with the
//! native and web names side by side. Opening the chosen device is st5-core's
//! (`st5_core::device::OpenDevice`); this crate names it without burn, so that the trainer's
//! config parses (and fuzzes) without a tensor library.

use std::fmt;
use std::str::FromStr;

use crate::error::Error;

/// Where to compute. `auto` (the browser package's default: WebGPU when it can be had, else the
/// CPU) is a way of choosing, not a device, so it is not one of these.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
#[serde(try_from = "String", into = "&'static str")]
// The set grows with the `cuda` feature: code outside this crate matches with a fallback arm.
#[non_exhaustive]
pub enum DeviceChoice {
    /// burn's flex backend (pure Rust, multi-threaded gemm).
    #[default]
    Cpu,
    /// burn's wgpu backend on the default adapter: Vulkan, Metal or DX12 natively, WebGPU in the
    /// browser.
    Wgpu,
    /// burn's CUDA backend, for the trainer built with its `cuda` feature.
    #[cfg(feature = "cuda")]
    Cuda,
}

/// Every accepted name and its device: the first name of each is the device's own (`Display`),
/// the others are aliases: `flex` (burn's name for its CPU backend), `gpu`, and `webgpu` (the
/// browser's name for the same backend, see [`DeviceChoice::web_name`]).
const NAMES: &[(&str, DeviceChoice)] = &[
    ("cpu", DeviceChoice::Cpu),
    ("flex", DeviceChoice::Cpu),
    ("wgpu", DeviceChoice::Wgpu),
    ("gpu", DeviceChoice::Wgpu),
    ("webgpu", DeviceChoice::Wgpu),
    #[cfg(feature = "cuda")]
    ("cuda", DeviceChoice::Cuda),
];

impl DeviceChoice {
    /// The devices the browser package offers, in its order of preference for `auto`.
    pub const WEB: [DeviceChoice; 2] = [DeviceChoice::Wgpu, DeviceChoice::Cpu];

    /// The device's own name: `cpu`, `wgpu` (or `cuda`).
    pub fn name(self) -> &'static str {
        NAMES
            .iter()
            .find(|(_, d)| *d == self)
            .map(|(name, _)| *name)
            .expect("every device is named")
    }

    /// The name the browser package uses: `webgpu` for wgpu (which runs on WebGPU there), `cpu`.
    /// The one place the native and web names meet.
    pub fn web_name(self) -> &'static str {
        match self {
            DeviceChoice::Wgpu => "webgpu",
            other => other.name(),
        }
    }
}

impl FromStr for DeviceChoice {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        if let Some((_, device)) = NAMES.iter().find(|(name, _)| *name == s) {
            return Ok(*device);
        }
        if s == "cuda" {
            return Err(Error::Invalid(
                "device `cuda` needs the trainer built with `--features cuda`".into(),
            ));
        }
        let expected = if cfg!(feature = "cuda") { "cpu, wgpu or cuda" } else { "cpu or wgpu" };
        Err(Error::Invalid(format!(
            "unknown device `{s}` (expected {expected}; webgpu in the browser)"
        )))
    }
}

impl fmt::Display for DeviceChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// serde reads any accepted name, aliases included (an unknown one is an error listing the
/// devices), in configs that choose a device (the trainer's).
impl TryFrom<String> for DeviceChoice {
    type Error = Error;
    fn try_from(name: String) -> Result<Self, Error> {
        name.parse()
    }
}

/// serde writes the device's own name.
impl From<DeviceChoice> for &'static str {
    fn from(device: DeviceChoice) -> Self {
        device.name()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_and_print_natively_and_on_the_web() {
        // (name, device, its own name, its web name)
        let cases = [
            ("cpu", DeviceChoice::Cpu, "cpu", "cpu"),
            ("flex", DeviceChoice::Cpu, "cpu", "cpu"),
            ("wgpu", DeviceChoice::Wgpu, "wgpu", "webgpu"),
            ("gpu", DeviceChoice::Wgpu, "wgpu", "webgpu"),
            ("webgpu", DeviceChoice::Wgpu, "wgpu", "webgpu"),
        ];
        for (name, device, native, web) in cases {
            let d: DeviceChoice = name.parse().unwrap();
            assert_eq!((d, d.to_string().as_str(), d.web_name()), (device, native, web), "{name}");
        }
        for d in DeviceChoice::WEB {
            assert_eq!(d.web_name().parse::<DeviceChoice>().unwrap(), d);
        }
        let err = "tpu".parse::<DeviceChoice>().unwrap_err().to_string();
        assert!(err.contains("tpu") && err.contains("wgpu"), "{err}");
        if !cfg!(feature = "cuda") {
            let err = "cuda".parse::<DeviceChoice>().unwrap_err().to_string();
            assert!(err.contains("--features cuda"), "{err}");
        }
    }
}
