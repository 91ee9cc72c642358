//! [V-INGEST] A request body, read up to a limit: past it reading stops and the engine
//! answers 413 — a large body never sits in memory. One crossing into JavaScript, like the
//! rest of the Worker's I/O ([`crate::shim`]): `us_read_body` in `src/io.js`, which reads an
//! origin's answer up to its limit the same way.

use js_sys::{Array, Promise, Uint8Array};
use understudy_core::events::flow::BodyError;
use wasm_bindgen::prelude::*;
use worker::wasm_bindgen_futures::JsFuture;
use worker::web_sys;

#[wasm_bindgen(module = "/src/io.js")]
extern "C" {
    fn us_read_body(req: &web_sys::Request, max: f64) -> Promise;
}

pub async fn read(req: &web_sys::Request, max_bytes: u64) -> Result<Vec<u8>, BodyError> {
    let r = match JsFuture::from(us_read_body(req, max_bytes as f64)).await {
        Ok(v) => Array::from(&v),
        Err(e) => return Err(BodyError::Unreadable(format!("{e:?}"))),
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
