//! The Worker's JavaScript: the driver of the request engine (`src/io.js`, docs/adr/010;
//! the Durable Objects' drivers are in the same file, docs/adr/015).
//!
//! Why JavaScript: profiling the edge in workerd (scripts/profile-edge.mjs) showed the
//! per-request cost was not the engine's decisions but the glue — a Rust future awaiting a
//! JS promise costs closures and a queued microtask, a body read through `ReadableStream`
//! a crossing per chunk, a header set from Rust a crossing and a transcoding. So the driver
//! lives in JS and crosses into the engine once per step, with one encoded output back
//! (`understudy_core::wire`). It performs and reports; every decision is the engine's.

use js_sys::{Array, Promise};
use wasm_bindgen::prelude::*;

// The wire's constants, generated from `understudy_core::wire` (`io.js` imports them).
#[wasm_bindgen(module = "/src/wire.js")]
extern "C" {
    fn us_wire() -> u32;
}

#[wasm_bindgen(module = "/src/io.js")]
extern "C" {
    fn us_incoming(req: &JsValue, names: &Array, place: bool) -> String;
    fn us_run(
        id: u32,
        out: &str,
        req: &JsValue,
        env: &JsValue,
        ctx: &JsValue,
        engine: &JsValue,
    ) -> Promise;
    fn us_init(analytics: &str, head: &str, body: &str);
}

/// Once per isolate: the Analytics Engine binding and the last-resort answer (headers and
/// body with `{cid}` where the correlation ID goes) the driver uses when the engine cannot
/// run.
#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_namespace = console, js_name = log)]
    fn console_log(s: &str);
}

/// A line on the Worker's log (`console.log`).
pub fn log(line: &str) {
    console_log(line);
}

pub fn init(analytics: &str, head: &str, body: &str) {
    us_init(analytics, head, body);
    // The bundle carries `wire.js` beside `io.js` (its one use from Rust), and says so if it
    // is not the one this engine was built with.
    if us_wire() != understudy_core::wire::RESPOND {
        log("edge: src/wire.js is not the engine's wire (rebuild the Worker)");
    }
}

/// Runs request `id`'s driver from the engine's first output `out` (`us_run`): the promise
/// of its response.
pub fn run(
    id: u32,
    out: &str,
    req: &JsValue,
    env: &JsValue,
    ctx: &JsValue,
    engine: &JsValue,
) -> Promise {
    us_run(id, out, req, env, ctx, engine)
}

/// The request as the engine reads it, the clock, a seed, and the lateness of the driver's
/// last timer probe.
pub struct Incoming {
    /// How late the driver's zero-delay probe fired (ms), `None` without a new sample.
    pub late_ms: Option<u64>,
    /// `Date.now()` when the request was read.
    pub now_ms: u64,
    /// `Math.random()`'s 64 bits for the request's random source.
    pub seed: u64,
    /// [F-SCOPE] Asked for with `place`: the request's `cf` continent, country and
    /// longitude (`Some(None)`: it has no `cf`).
    pub place: Option<Option<[String; 3]>>,
    pub method: String,
    pub url: String,
    pub headers: Vec<(String, String)>,
}

/// The request's method, URL and the headers named in `names` that it carries; with
/// `place`, its `cf` fields too.
pub fn incoming(req: &JsValue, names: &Array, place: bool) -> Incoming {
    let text = us_incoming(req, names, place);
    let mut lines = text.split('\n');
    let late_ms = lines
        .next()
        .and_then(|l| l.parse::<i64>().ok())
        .and_then(|l| u64::try_from(l).ok());
    let mut number = || {
        lines
            .next()
            .and_then(|l| l.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let now_ms = number();
    let seed = (number() << 32) | number();
    let place = match lines.next().unwrap_or("-") {
        "-" => None,
        "" => Some(None),
        line => {
            let mut f = line.split('\t').map(str::to_string);
            let mut next = || f.next().unwrap_or_default();
            Some(Some([next(), next(), next()]))
        }
    };
    let method = lines.next().unwrap_or("GET").to_string();
    let url = lines.next().unwrap_or("").to_string();
    let mut headers = Vec::new();
    while let (Some(k), Some(v)) = (lines.next(), lines.next()) {
        headers.push((k.to_string(), v.to_string()));
    }
    Incoming {
        late_ms,
        now_ms,
        seed,
        place,
        method,
        url,
        headers,
    }
}
