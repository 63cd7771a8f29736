//! The browser package's device names (`pkg/devices.js`, `DEVICES`) are `DeviceChoice`'s web
//! names, in its order of preference for `auto` (`DeviceChoice::WEB`): the JS side cannot drift
//! from the one Rust enum.

use st5_core::DeviceChoice;
use st5_tests::root;

/// The string literals of `DEVICES` in `pkg/devices.js`: the array literal after
/// `export const DEVICES = Object.freeze(`.
fn js_devices() -> Vec<String> {
    let path = root().join("pkg/devices.js");
    let text = std::fs::read_to_string(&path).unwrap();
    const DECLARATION: &str = "export const DEVICES = Object.freeze(";
    let (_, rest) = text
        .split_once(DECLARATION)
        .unwrap_or_else(|| panic!("{}: no `{DECLARATION}`", path.display()));
    let array = rest
        .strip_prefix('[')
        .and_then(|r| r.split_once(']'))
        .unwrap_or_else(|| panic!("{}: DEVICES is not an array literal", path.display()))
        .0;
    array
        .split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .map(|item| {
            let quoted = |q: char| item.strip_prefix(q).and_then(|i| i.strip_suffix(q));
            quoted('\'')
                .or_else(|| quoted('"'))
                .unwrap_or_else(|| panic!("{}: `{item}` is not a string", path.display()))
                .to_string()
        })
        .collect()
}

#[test]
fn the_package_offers_device_choices_web_names_in_order() {
    let want: Vec<&str> = DeviceChoice::WEB.iter().map(|d| d.web_name()).collect();
    assert_eq!(js_devices(), want);
    // Each name the package passes to the wasm module parses back to its device.
    for d in DeviceChoice::WEB {
        assert_eq!(d.web_name().parse::<DeviceChoice>().unwrap(), d);
    }
}
