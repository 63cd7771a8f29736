//! Panic plumbing: the module's start hook (static constructors once, then a panic hook that
//! keeps the message), and the exports pkg/runtime.js asks after a trap (`takePanic`) or uses to
//! test one (`panicForTest`).

use std::cell::RefCell;

use wasm_bindgen::prelude::*;

// Static constructors (cubecl registers its IR dialects through `inventory`) run once, here,
// when the module starts. Without an explicit call, wasm-ld links the module "command-style" and
// wraps *every* export in a call to all constructors: each `embed`, and each string wasm-bindgen
// passes in (one `__wbindgen_malloc` per text). That cost ~1.5 ms per call, 0.8 s of st5-mini's
// 2.3 s for 512 sentences. See inventory's "WebAssembly and constructors" docs:
// https://docs.rs/inventory/0.3.25/inventory/#webassembly-and-constructors
#[cfg(target_arch = "wasm32")]
unsafe extern "C" {
    fn __wasm_call_ctors();
}

/// Runs the static constructors; wasm-bindgen calls this right after instantiation.
#[cfg(target_arch = "wasm32")]
#[wasm_bindgen(start)]
fn start() {
    // SAFETY: called once per instance, before any other export (wasm-bindgen's start hook);
    // wasm-ld then no longer calls the constructors from every export.
    unsafe { __wasm_call_ctors() }
    // A panic aborts, which traps the instance with a bare "unreachable" RuntimeError. The hook
    // keeps the message (and logs it) for pkg/runtime.js, which reports it as an internal error.
    std::panic::set_hook(Box::new(|info| {
        let message = info.to_string();
        console_error(&format!("st5: {message}"));
        LAST_PANIC.with(|p| *p.borrow_mut() = Some(message));
    }));
}

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_namespace = console, js_name = error)]
    fn console_error(message: &str);
}

thread_local! {
    /// The message of the panic that trapped this instance.
    static LAST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// The message of the panic that trapped this instance ("panicked at FILE:LINE:COL:" and the
/// payload), once; `undefined` if there was none. pkg/runtime.js asks after a trap.
#[wasm_bindgen(js_name = takePanic)]
pub fn take_panic() -> Option<String> {
    LAST_PANIC.with(|p| p.borrow_mut().take())
}

/// Panics. For the package's tests of what follows a trap (the error, the recovery); nothing
/// else calls it.
#[wasm_bindgen(js_name = panicForTest)]
pub fn panic_for_test() {
    panic!("panicForTest was called");
}
