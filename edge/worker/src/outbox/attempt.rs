//! [V-DELIVER] One delivery attempt from the shard's alarm: the request sent, raced against
//! the attempt's timeout (`shim::within`), the fetch aborted when the timer wins
//! (`events::attempt::ended`: the attempt timed out). The timeout is the policy's
//! (`[events.delivery] attempt_timeout`, the lease `understudy_core::events::outbox` took);
//! this runs in a Durable Object's alarm, off every client's path, so it awaits from Rust.

use js_sys::{Array, Uint8Array};
use understudy_core::classify::{bounded, Observed};
use understudy_core::events::attempt;
use understudy_core::http::Outbound;
use understudy_core::wire;
use wasm_bindgen::JsCast;
use worker::wasm_bindgen_futures::JsFuture;

use crate::shim;

/// What the consumer answered to `req`, or `TimedOut` after `timeout_ms`.
pub async fn deliver(req: &Outbound, timeout_ms: u64) -> Observed {
    let ctl = shim::controller();
    let head =
        understudy_core::wire::flat(req.headers.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    let fetch = JsFuture::from(shim::fetch(
        &req.url,
        req.method.as_str(),
        &head,
        req.body.clone(),
        req.max_body_bytes,
        &ctl,
    ));
    let answer = shim::within(fetch, timeout_ms).await;
    if answer.is_none() {
        shim::abort(&ctl);
    }
    attempt::ended(answer.map(|r| match r {
        Ok(v) => observed(&v, req.max_body_bytes),
        Err(e) => Observed::Connect(bounded(&format!("{e:?}"))),
    }))
}

/// The fetch's result, read as the engine reads its own (`understudy_core::wire::fetched`).
fn observed(v: &wasm_bindgen::JsValue, max_body: u64) -> Observed {
    let Some(r) = v.dyn_ref::<Array>() else {
        return Observed::Connect("the fetch reported no result".into());
    };
    wire::fetched(
        r.get(0).as_f64().unwrap_or(f64::from(wire::FETCH_FAILED)),
        r.get(1).as_string(),
        r.get(2).dyn_into::<Uint8Array>().ok().map(|b| b.to_vec()),
        max_body,
    )
}
