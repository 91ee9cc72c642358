//! [E-CASCADE] [E-LIVE] Workers KV: tier reads raced against their timeout (a KV read cannot
//! be aborted, so the edge just stops waiting; the race runs in JS, `crate::shim::kv`) and
//! background write-through.

use understudy_core::writethrough::KvWrite;
use wasm_bindgen::JsValue;
use worker::{console_log, Env};

use crate::isolate;

/// The namespace object bound as `binding`, as the runtime gives it (for `us_kv`).
pub fn namespace(env: &Env, binding: &str) -> Result<JsValue, String> {
    match js_sys::Reflect::get(env.as_ref(), &JsValue::from_str(binding)) {
        Ok(ns) if ns.is_object() => Ok(ns),
        _ => Err(format!("KV binding `{binding}` is not bound")),
    }
}

/// Performs the planned writes; a failed one is reported to the engine, which forgets it so
/// a later live answer writes again.
pub async fn write_all(env: Env, writes: Vec<KvWrite>, correlation_id: String) {
    for w in writes {
        let result = async {
            let store = env.kv(&w.binding).map_err(|e| e.to_string())?;
            store
                .put(&w.key, w.value.as_str())
                .map_err(|e| e.to_string())?
                .metadata(&w.metadata)
                .map_err(|e| e.to_string())?
                .execute()
                .await
                .map_err(|e| e.to_string())
        }
        .await;
        if let Err(e) = result {
            if let Ok(line) = isolate::with_engine(|en| en.write_failed(&w, &e, &correlation_id)) {
                console_log!("{}", line);
            }
        }
    }
}
