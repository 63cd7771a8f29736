/** The device names the package accepts, in order of preference for 'auto'. Checked against the Rust `DeviceChoice` enum by tests/devices.rs. */
export const DEVICES = Object.freeze(['webgpu', 'cpu']);
