//! [E-CASCADE] [E-LIVE] Workers KV: tier reads raced against their timeout (a KV read cannot
//! be aborted, so the edge just stops waiting; the race runs in JS, `crate::shim::kv`) and
//! background write-through.

use understudy_core::writethrough::KvWrite;
use wasm_bindgen::JsValue;
use worker::{console_log, Env};

use crate::{isolate, shim};

/// The namespace object bound as `binding`, as the runtime gives it (for `us_kv`).
pub fn namespace(env: &Env, binding: &str) -> Result<JsValue, String> {
    match js_sys::Reflect::get(env.as_ref(), &JsValue::from_str(binding)) {
        Ok(ns) if ns.is_object() => Ok(ns),
        _ => Err(format!("KV binding `{binding}` is not bound")),
    }
}

/// Starts the planned writes in the background (`ctx.waitUntil`, in JS: `crate::shim::put`);
/// a failed one is reported to the engine, which forgets it so a later live answer writes
/// again. No Rust future: the put's promise is the runtime's own.
pub fn write_all(env: &Env, ctx: &JsValue, writes: Vec<KvWrite>, correlation_id: &str) {
    for w in writes {
        match namespace(env, &w.binding) {
            Ok(ns) => shim::put(ctx, &ns, &w, correlation_id),
            Err(e) => failed(&w.binding, &w.key, &e, correlation_id),
        }
    }
}

/// Write `binding`/`key` failed with `error`: the engine forgets it, and its log line goes out.
pub fn failed(binding: &str, key: &str, error: &str, correlation_id: &str) {
    if let Ok(line) =
        isolate::with_engine(|en| en.write_failed(binding, key, error, correlation_id))
    {
        console_log!("{}", line);
    }
}
