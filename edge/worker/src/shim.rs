//! The Worker's I/O, written where it is cheapest: in JavaScript, one crossing per operation.
//!
//! Profiling the edge in workerd (scripts/profile-edge.mjs) showed the per-request cost was
//! not the engine's decisions but the glue: every Rust future awaiting a JS promise costs
//! closures and a queued microtask, a body read through `ReadableStream` costs a crossing per
//! chunk and lock, and every header set from Rust costs a crossing and a transcoding. So the
//! operations themselves — race a fetch against its timeout and abort the loser, read a KV
//! entry against its timeout, build a response — live in small JS functions that take and
//! return plain values, and each is ONE crossing and at most ONE awaited promise. Headers
//! travel as one string of `name\nvalue\n` pairs (names and values never contain a newline:
//! the runtime refuses them and the engine writes none). The decisions stay in the engine;
//! this is I/O only. The JavaScript is `src/io.js` (its unit tests: tests/io.test.mjs).

use js_sys::{Array, Promise, Uint8Array};
use understudy_core::cascade::KvRead;
use understudy_core::classify::Observed;
use understudy_core::http::Outbound;
use wasm_bindgen::prelude::*;
use worker::wasm_bindgen_futures::JsFuture;
use worker::web_sys;

#[wasm_bindgen(module = "/src/io.js")]
extern "C" {
    fn us_incoming(req: &web_sys::Request, names: &Array) -> String;
    fn us_response(status: u16, head: &str, body: &str) -> web_sys::Response;
    fn us_drive(
        id: u32,
        action: &JsValue,
        env: &JsValue,
        step: &JsValue,
        perform: &JsValue,
    ) -> Promise;
    fn us_race(
        url: &str,
        method: &str,
        head: &str,
        body: Option<String>,
        timeout_ms: f64,
        max_body: f64,
        hedge_after_ms: f64,
    ) -> Promise;
    fn us_lag() -> f64;
    fn us_prefetch(ns: &JsValue, key: &str, binding: &str, ctx: &JsValue, keep_ms: f64);
    #[allow(clippy::too_many_arguments)]
    fn us_put(
        ctx: &JsValue,
        ns: &JsValue,
        binding: &str,
        key: &str,
        value: &str,
        meta: &str,
        cid: &str,
        failed: &JsValue,
    );
}

/// [E-CASCADE] Starts a speculative tier read of `key` in namespace `ns` (`us_prefetch`):
/// a later read of the key within `keep_ms` joins it.
pub fn prefetch(ns: &JsValue, key: &str, binding: &str, ctx: &JsValue, keep_ms: u64) {
    us_prefetch(ns, key, binding, ctx, keep_ms as f64);
}

/// Runs request `id`'s loop in JavaScript from `action` (see `us_drive` above): the promise
/// of its response.
pub fn drive(id: u32, action: &Array, env: &JsValue, step: &JsValue, perform: &JsValue) -> Promise {
    us_drive(id, action, env, step, perform)
}

thread_local! {
    /// `crate::kv::failed` as a JS function, made once per isolate.
    static WRITE_FAILED: JsValue =
        Closure::<dyn Fn(String, String, String, String)>::new(
            |binding: String, key: String, error: String, cid: String| {
                crate::kv::failed(&binding, &key, &error, &cid)
            },
        )
        .into_js_value();
}

/// [E-LIVE] Puts `w` into namespace `ns` in the background (`us_put` above).
pub fn put(ctx: &JsValue, ns: &JsValue, w: &understudy_core::writethrough::KvWrite, cid: &str) {
    let meta = if w.metadata.is_null() {
        String::new()
    } else {
        w.metadata.to_string()
    };
    WRITE_FAILED.with(|failed| us_put(ctx, ns, &w.binding, &w.key, &w.value, &meta, cid, failed));
}

/// The isolate's scheduling delay in ms (see `us_lag` above): the latest its timers fired
/// in the last second.
pub fn lag_ms() -> u64 {
    let l = us_lag();
    if l.is_finite() && l > 0.0 {
        l.round() as u64
    } else {
        0
    }
}

/// The request's method, URL and headers (names lower-case, as the runtime gives them).
pub struct Incoming {
    pub method: String,
    pub url: String,
    pub headers: Vec<(String, String)>,
}

/// The request's method, URL and the headers named in `names` that it carries.
pub fn incoming(req: &web_sys::Request, names: &Array) -> Incoming {
    let text = us_incoming(req, names);
    let mut lines = text.split('\n');
    let method = lines.next().unwrap_or("GET").to_string();
    let url = lines.next().unwrap_or("").to_string();
    let mut headers = Vec::new();
    while let (Some(k), Some(v)) = (lines.next(), lines.next()) {
        headers.push((k.to_string(), v.to_string()));
    }
    Incoming {
        method,
        url,
        headers,
    }
}

/// `name\nvalue\n…` for a list of headers.
fn flat<'a>(headers: impl Iterator<Item = (&'a str, &'a str)>) -> String {
    let mut out = String::with_capacity(512);
    for (i, (k, v)) in headers.enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(k);
        out.push('\n');
        out.push_str(v);
    }
    out
}

pub fn response(status: u16, headers: &[(&'static str, String)], body: &str) -> web_sys::Response {
    us_response(
        status,
        &flat(headers.iter().map(|(k, v)| (*k, v.as_str()))),
        body,
    )
}

fn str_at(a: &Array, i: u32) -> String {
    a.get(i).as_string().unwrap_or_default()
}

/// What a race observed, and what its hedge did.
pub struct Raced {
    pub observed: Observed,
    pub hedge_sent: bool,
    pub hedge_won: bool,
}

/// [E-RACE] The arguments of `us_race` for `o`: headers *and* body must arrive within
/// `timeout_ms`, the body at most its limit; the loser is aborted (`AbortController`). With
/// `hedge_after_ms`, a second identical request goes out if no answer came by then; the first
/// good one wins.
pub fn race_args(a: &Array, o: &Outbound, timeout_ms: u64, hedge_after_ms: Option<u64>) {
    a.push(&JsValue::from_str(&o.url));
    a.push(&JsValue::from_str(o.method.as_str()));
    a.push(&JsValue::from_str(&flat(
        o.headers.iter().map(|(k, v)| (k.as_str(), v.as_str())),
    )));
    a.push(
        &o.body
            .as_deref()
            .map_or(JsValue::UNDEFINED, JsValue::from_str),
    );
    a.push(&JsValue::from(timeout_ms as f64));
    a.push(&JsValue::from(o.max_body_bytes as f64));
    a.push(&JsValue::from(hedge_after_ms.map_or(-1.0, |ms| ms as f64)));
}

/// The race awaited from Rust: for the outbox's deliveries (`crate::outbox`), off the request
/// path.
pub async fn race(
    url: &str,
    method: &str,
    headers: &[(String, String)],
    body: Option<String>,
    timeout_ms: u64,
    max_body: u64,
) -> Raced {
    let head = flat(headers.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    let p = us_race(
        url,
        method,
        &head,
        body,
        timeout_ms as f64,
        max_body as f64,
        -1.0,
    );
    match JsFuture::from(p).await {
        Ok(v) => raced(&v, max_body),
        Err(e) => Raced {
            observed: Observed::Connect(understudy_core::classify::bounded(&format!("{e:?}"))),
            hedge_sent: false,
            hedge_won: false,
        },
    }
}

/// What a race (`us_race`'s array) observed, and what its hedge did.
pub fn raced(v: &JsValue, max_body: u64) -> Raced {
    let Some(r) = v.dyn_ref::<Array>() else {
        return Raced {
            observed: Observed::Connect("the race reported no result".into()),
            hedge_sent: false,
            hedge_won: false,
        };
    };
    Raced {
        observed: observed(r, max_body),
        hedge_sent: r.get(4).as_f64() == Some(1.0),
        hedge_won: r.get(5).as_f64() == Some(1.0),
    }
}

fn observed(r: &Array, max_body: u64) -> Observed {
    let status = r.get(1).as_f64().unwrap_or(0.0) as u16;
    match r.get(0).as_f64().unwrap_or(3.0) as u8 {
        0 => Observed::TimedOut,
        1 => Observed::Response {
            status,
            retry_after: Some(str_at(r, 2)).filter(|s| !s.is_empty()),
            body: r
                .get(3)
                .dyn_into::<Uint8Array>()
                .map(|b| b.to_vec())
                .unwrap_or_default(),
        },
        2 => Observed::TooLarge { limit: max_body },
        _ => Observed::Connect(str_at(r, 2)),
    }
}

/// [E-STORM] The rate limiter's verdict (`us_limit`'s array): `Ok(true)` within the limit.
pub fn limited(v: &JsValue) -> Result<bool, String> {
    let Some(r) = v.dyn_ref::<Array>() else {
        return Err("the rate limiter reported no result".into());
    };
    match r.get(0).as_f64() {
        Some(1.0) => Ok(true),
        Some(0.0) => Ok(false),
        _ => Err(Some(str_at(r, 1))
            .filter(|m| !m.is_empty())
            .unwrap_or_else(|| "the rate limiter failed".into())),
    }
}

/// [E-CASCADE] What a KV read (`us_kv`'s array: the read raced against its timeout; a KV
/// read cannot be aborted, the edge just stops waiting) found.
pub fn kv_read(v: &JsValue) -> KvRead {
    let Some(r) = v.dyn_ref::<Array>() else {
        return KvRead::Error("the KV read reported no result".into());
    };
    match r.get(0).as_f64().unwrap_or(3.0) as u8 {
        0 => KvRead::TimedOut,
        1 => KvRead::Value {
            value: None,
            metadata: None,
        },
        2 => {
            let meta = str_at(r, 2);
            KvRead::Value {
                value: Some(str_at(r, 1)),
                metadata: (!meta.is_empty())
                    .then(|| serde_json::from_str(&meta).ok())
                    .flatten(),
            }
        }
        _ => KvRead::Error(str_at(r, 1)),
    }
}
