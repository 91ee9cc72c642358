//! [V-INGEST] A request body, read up to a limit: past it reading stops and the engine
//! answers 413 — a large body never sits in memory. Read by the driver (`us_read_body` in
//! `src/io.js`, which reads an origin's answer up to its limit the same way), like the rest
//! of the Worker's I/O ([`crate::shim`]).

use js_sys::{Array, Uint8Array};
use understudy_core::events::flow::BodyError;
use wasm_bindgen::prelude::*;

/// The driver's instruction: read the body up to `max_bytes`.
pub fn ask(max_bytes: u64) -> JsValue {
    let out = Array::new();
    out.push(&JsValue::from(1));
    out.push(&JsValue::from_f64(max_bytes as f64));
    out.into()
}

/// What the driver read: `[0, bytes]`, `[1]` (too large) or `[2, message]`.
pub fn heard(got: &JsValue) -> Result<Vec<u8>, BodyError> {
    let Some(r) = got.dyn_ref::<Array>() else {
        return Err(BodyError::Unreadable(
            got.as_string()
                .unwrap_or_else(|| "the body was not read".into()),
        ));
    };
    match r.get(0).as_f64().unwrap_or(2.0) as u8 {
        0 => Ok(r
            .get(1)
            .dyn_into::<Uint8Array>()
            .map(|b| b.to_vec())
            .unwrap_or_default()),
        1 => Err(BodyError::TooLarge),
        _ => Err(BodyError::Unreadable(
            r.get(1).as_string().unwrap_or_default(),
        )),
    }
}
