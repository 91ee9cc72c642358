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
//! this is I/O only.

use js_sys::{Array, Promise, Uint8Array};
use understudy_core::cascade::KvRead;
use understudy_core::classify::Observed;
use understudy_core::http::Outbound;
use wasm_bindgen::prelude::*;
use worker::wasm_bindgen_futures::JsFuture;
use worker::web_sys;

#[wasm_bindgen(inline_js = r#"
function headersOf(flat) {
  const h = new Headers();
  if (flat.length === 0) return h;
  const p = flat.split("\n");
  for (let i = 0; i + 1 < p.length; i += 2) {
    try { h.set(p[i], p[i + 1]); } catch (_) { /* a value the runtime refuses is dropped */ }
  }
  return h;
}
const firstLine = (e) => String((e && e.message) || e).split("\n")[0];

// The isolate's scheduling delay: how late its timers fire, as the largest sample of the
// last second (ten 100 ms buckets). Sampled with a zero-delay timer at each request (at most
// every 10 ms) and from every race timer that fires. A busy or cold isolate takes every
// answer late by about this much — the breaker must not count that as the model's latency —
// and stays known as busy for a second after its last late timer.
const lagBuckets = new Array(10).fill(0), lagAt = new Array(10).fill(0);
let probing = false, lastProbe = 0;
function sample(late) {
  const now = Date.now(), slot = Math.floor(now / 100) % 10;
  if (now - lagAt[slot] >= 100) { lagBuckets[slot] = 0; lagAt[slot] = now - (now % 100); }
  if (late > lagBuckets[slot]) lagBuckets[slot] = late;
}
function probe() {
  const t0 = Date.now();
  if (probing || t0 - lastProbe < 10) return;
  probing = true;
  lastProbe = t0;
  setTimeout(() => { sample(Date.now() - t0); probing = false; }, 0);
}
export function us_lag() {
  probe();
  const now = Date.now();
  let m = 0;
  for (let i = 0; i < 10; i++) if (now - lagAt[i] < 1000 && lagBuckets[i] > m) m = lagBuckets[i];
  return m;
}

// The method, the URL, and the headers named in `names` that the request carries: the engine
// reads no others (`Engine::request_headers`), and a `get` per name costs a fraction of
// iterating every header the client and the platform sent (the profile: ~75 µs a request).
export function us_incoming(req, names) {
  let out = req.method + "\n" + req.url;
  const h = req.headers;
  for (let i = 0; i < names.length; i++) {
    const v = h.get(names[i]);
    if (v !== null) out += "\n" + names[i] + "\n" + v;
  }
  return out;
}

export function us_response(status, head, body) {
  return new Response(body, { status, headers: headersOf(head) });
}

// One request of a race: [kind, status, retryAfter, body], kind 0 timed out, 1 answered,
// 2 body too large, 3 failed. `ctl` aborts it; `isTimedOut()` says whether the race's
// timer fired.
async function attempt(url, method, head, body, maxBody, ctl, isTimedOut) {
  try {
    const res = await fetch(url, { method, headers: headersOf(head), body: body === undefined ? null : body, signal: ctl.signal });
    probe();
    const status = res.status;
    if (status < 200 || status > 299) {
      const ra = res.headers.get("retry-after");
      ctl.abort(); // the unread body stops costing a connection
      return [1, status, ra === null ? "" : ra, null];
    }
    const len = res.headers.get("content-length");
    if (len !== null && Number(len) > maxBody) { ctl.abort(); return [2, status, "", null]; }
    let bytes;
    if (len !== null) {
      bytes = new Uint8Array(await res.arrayBuffer());
    } else {
      const reader = res.body.getReader();
      const parts = [];
      let n = 0;
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        n += value.length;
        if (n > maxBody) { ctl.abort(); return [2, status, "", null]; }
        parts.push(value);
      }
      bytes = new Uint8Array(n);
      let at = 0;
      for (const p of parts) { bytes.set(p, at); at += p.length; }
    }
    if (bytes.length > maxBody) return [2, status, "", null];
    return [1, status, "", bytes];
  } catch (e) {
    if (isTimedOut()) return [0, 0, "", null];
    ctl.abort();
    return [3, 0, firstLine(e), null];
  }
}

const good = (r) => r[0] === 1 && r[1] >= 200 && r[1] <= 299;

// The race: [kind, status, retryAfter, body, hedgeSent, hedgeWon]. With hedgeAfterMs >= 0,
// the same request goes out once more if no answer came within it; the first good answer
// wins and the other is aborted; a failure before the hedge is due is the answer. When the
// timer fires, the race is answered at once (the fallback starts now, not when the aborted
// fetch gets round to rejecting), and the requests are aborted once that answer is out.
export function us_race(url, method, head, body, timeoutMs, maxBody, hedgeAfterMs) {
  probe();
  const ctls = [new AbortController(), new AbortController()];
  let timedOut = false, sent = false, timer;
  const due = Date.now() + timeoutMs;
  const late = new Promise((resolve) => {
    timer = setTimeout(() => {
      timedOut = true;
      sample(Date.now() - due);
      resolve([0, 0, "", null, sent ? 1 : 0, 0]);
      // Cancelling a subrequest is work for the runtime: it waits until the fallback answer
      // has been handed over.
      setTimeout(() => { ctls[0].abort(); ctls[1].abort(); }, 0);
    }, timeoutMs);
  });
  const isTimedOut = () => timedOut;
  let run;
  if (!(hedgeAfterMs >= 0)) {
    run = attempt(url, method, head, body, maxBody, ctls[0], isTimedOut).then((r) => { r.push(0, 0); return r; });
  } else {
    run = new Promise((resolve) => {
      let done = false, pending = 1, hedgeTimer;
      const finish = (i, r) => {
        done = true;
        clearTimeout(hedgeTimer);
        ctls[1 - i].abort();
        r.push(sent ? 1 : 0, sent && i === 1 ? 1 : 0);
        resolve(r);
      };
      const settle = (i, r) => {
        if (done) return;
        pending--;
        if (good(r) || !sent || pending === 0) finish(i, r);
      };
      attempt(url, method, head, body, maxBody, ctls[0], isTimedOut).then((r) => settle(0, r));
      hedgeTimer = setTimeout(() => {
        if (done || timedOut) return;
        sent = true;
        pending++;
        attempt(url, method, head, body, maxBody, ctls[1], isTimedOut).then((r) => settle(1, r));
      }, hedgeAfterMs);
    });
  }
  run.then(() => clearTimeout(timer));
  return Promise.race([run, late]);
}

// [E-LIVE] A write-through in the background: the put (its metadata as JSON text), kept
// alive by `ctx.waitUntil`; a failure goes to `failed(binding, key, message, correlationId)`.
export function us_put(ctx, ns, binding, key, value, meta, cid, failed) {
  let p;
  try {
    p = ns.put(key, value, meta === "" ? {} : { metadata: JSON.parse(meta) });
  } catch (e) {
    failed(binding, key, firstLine(e), cid);
    return;
  }
  ctx.waitUntil(p.then(undefined, (e) => failed(binding, key, firstLine(e), cid)));
}

// [E-STORM] The Rate Limiting binding `binding`'s verdict for `key`: [1] within the limit,
// [0] over it, [2, message] the call failed.
export async function us_limit(env, binding, key) {
  try {
    const ns = env[binding];
    if (ns === undefined || ns === null || typeof ns.limit !== "function") return [2, `no Rate Limiting binding ${binding}`];
    const { success } = await ns.limit({ key });
    return [success ? 1 : 0];
  } catch (e) {
    return [2, firstLine(e)];
  }
}

// The request's loop (crate::serve): perform the action `a` — [1, race args…] a fetch race,
// [2, namespace, key, timeout] a KV read, [3, ms] a wait, [5, binding, key] a rate-limit
// call, [4] an action Rust performs itself (`perform(id)`) — then hand what happened to
// `step(id, code, result)`, which steps the engine synchronously and returns the next
// action, until it is [0, response]. Every await of the request is one of these; none wakes
// a Rust future.
export async function us_drive(id, a, env, step, perform) {
  for (;;) {
    let r;
    switch (a[0]) {
      case 0:
        return a[1];
      case 1:
        try { r = await us_race(a[1], a[2], a[3], a[4], a[5], a[6], a[7]); }
        catch (e) { r = [3, 0, firstLine(e), null, 0, 0]; }
        break;
      case 2:
        r = await us_kv(a[1], a[2], a[3]);
        break;
      case 3:
        await new Promise((res) => setTimeout(res, a[1]));
        break;
      case 5:
        r = await us_limit(env, a[1], a[2]);
        break;
      default:
        await perform(id);
    }
    a = step(id, a[0], r);
  }
}

// [kind, value, metadata JSON]: kind 0 timed out, 1 absent, 2 present, 3 failed.
export async function us_kv(ns, key, timeoutMs) {
  let timer;
  const late = new Promise((r) => { timer = setTimeout(() => r(undefined), timeoutMs); });
  try {
    const got = await Promise.race([ns.getWithMetadata(key, "text"), late]);
    if (got === undefined) return [0, "", ""];
    if (got.value === null) return [1, "", ""];
    return [2, got.value, got.metadata == null ? "" : JSON.stringify(got.metadata)];
  } catch (e) {
    return [3, firstLine(e), ""];
  } finally {
    clearTimeout(timer);
  }
}
"#)]
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
