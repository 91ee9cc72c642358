//! After a trap, a fresh module. A panic (under `panic = "abort"`, a trap) or any other trap
//! leaves the module's memory unusable; `worker-build`'s entry shim (`index.js`) then builds a
//! new instance before the next call, when the state object it reads
//! (`__worker_init_state`: `criticalError`, `instanceId`) says so, through wasm-bindgen's
//! reset (`__wbg_reset_state`). This module keeps that object and marks it, as workers-rs'
//! own start function does for a Worker built on it.

use wasm_bindgen::prelude::*;

#[wasm_bindgen(
    inline_js = "export const state = globalThis.__worker_init_state = { criticalError: false, instanceId: 0 };"
)]
extern "C" {
    type InitState;

    #[wasm_bindgen(thread_local_v2, js_name = state)]
    static INIT_STATE: InitState;

    #[wasm_bindgen(method, setter, js_name = criticalError)]
    fn set_critical_error(this: &InitState, val: bool);

    #[wasm_bindgen(method, getter, js_name = instanceId)]
    fn instance_id(this: &InitState) -> u32;

    #[wasm_bindgen(method, setter, js_name = instanceId)]
    fn set_instance_id(this: &InitState, val: u32);
}

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_namespace = console, js_name = error)]
    fn console_error(s: &str);
}

/// The state object the entry shim reads.
#[wasm_bindgen(js_name = "__worker_init_state")]
pub fn worker_init_state() -> JsValue {
    INIT_STATE.with(|s| s.into())
}

/// At the module's start: a panic marks the module for a fresh instance (and is logged), an
/// abort schedules one, and this instance is counted.
pub fn arm() {
    std::panic::set_hook(Box::new(|info| {
        console_error(&format!("Critical: Rust panic: {info}"));
        INIT_STATE.with(|s| s.set_critical_error(true));
    }));
    INIT_STATE.with(|s| s.set_instance_id(s.instance_id() + 1));
    wasm_bindgen::handler::set_on_abort(wasm_bindgen::handler::schedule_reinit);
}
