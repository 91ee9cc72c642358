//! The request path: hand the request to the engine and its output to the JS driver
//! (`src/io.js`, docs/adr/010-the-engine-owns-time.md), which performs it and calls back
//! [`on_step`] with each report. Every branch ends in a response rendered by the engine.
//!
//! The flight waits between steps in [`FLIGHTS`]. A request the runtime cancels (the client
//! went away) never reports again — its timers never fire — so past `parked::MAX_WAITING` the
//! flights whose wake-up is long overdue go first, then the oldest; a dropped flight's
//! answer is rendered at once and kept, in case its driver reports after all.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;

use js_sys::{Array, Promise};
use understudy_core::breaker::fleet::place::Cf;
use understudy_core::engine::{self, Bindings, Flight, Incoming, Input, IoId, Output, Reply};
use understudy_core::events::flow::{Heard, Io as EventIo};
use understudy_core::Millis;
use understudy_core::{parked, wire};
use wasm_bindgen::prelude::*;

use crate::isolate::{self, now};
use crate::{analytics, body, shards, shim};

/// Secrets and vars, as the engine reads them — each read from the environment once per
/// isolate (a changed secret or var is a new deployment, hence a new isolate).
struct WorkerEnv<'a>(&'a JsValue);

impl WorkerEnv<'_> {
    /// A string binding (a secret or a var).
    fn string(&self, name: &str) -> Option<String> {
        js_sys::Reflect::get(self.0, &JsValue::from_str(name))
            .ok()
            .and_then(|v| v.as_string())
    }
}

impl Bindings for WorkerEnv<'_> {
    fn secret(&self, name: &str) -> Option<String> {
        isolate::binding(name, || self.string(name))
    }
    fn var(&self, name: &str) -> Option<String> {
        isolate::binding(name, || self.string(name))
    }
    fn random_bytes(&self, buf: &mut [u8]) -> bool {
        isolate::random_bytes(buf)
    }
}

/// Answers of dropped flights kept for a late report.
const MAX_DROPPED: usize = 256;

/// A request between two steps.
struct Waiting {
    flight: Flight<'static>,
    /// When the engine asked to be woken (for the eviction of cancelled requests).
    wake_at: Option<Millis>,
    /// Largest body an origin fetch of this request reads (a too-large report names it).
    max_body: u64,
    /// What an event operation the driver performed ([`on_perform`]) heard.
    heard: Option<(IoId, Heard)>,
    /// The event operation to perform; the one being performed.
    events: Option<(IoId, EventIo)>,
    performing: Option<(IoId, EventIo)>,
}

thread_local! {
    /// The request headers the engine reads (`Engine::request_headers`; without an engine,
    /// the ones it reads whatever the policy), as a JS array made once per isolate.
    static HEADER_NAMES: Array = {
        let names: Vec<String> = isolate::with_engine(|e| e.request_headers().to_vec())
            .unwrap_or_else(|_| engine::READ_HEADERS.iter().map(|h| h.to_string()).collect());
        names.iter().map(|n| JsValue::from_str(n)).collect()
    };
    static FLIGHTS: RefCell<BTreeMap<u32, Waiting>> = const { RefCell::new(BTreeMap::new()) };
    static DROPPED: RefCell<BTreeMap<u32, Reply>> = const { RefCell::new(BTreeMap::new()) };
    static NEXT_ID: Cell<u32> = const { Cell::new(1) };
    /// [F-SCOPE] The engine needs no request's `cf` any more (its fleet member picked its
    /// region, or it has none): the driver stops reading it.
    static LOCATED: Cell<bool> = const { Cell::new(false) };
    /// The engine's closures for the driver (`step`, `perform`, `failed`, `writeFailed`,
    /// `fleetHeard`, `fleetWake`), made once per isolate, as one JS object.
    static DRIVER: JsValue = driver();
}

fn driver() -> JsValue {
    let o = js_sys::Object::new();
    let set = |k: &str, v: JsValue| {
        let _ = js_sys::Reflect::set(&o, &JsValue::from_str(k), &v);
    };
    set(
        "step",
        Closure::<
            dyn Fn(
                u32,
                u32,
                u32,
                f64,
                Option<String>,
                Option<String>,
                Option<Vec<u8>>,
                f64,
            ) -> String,
        >::new(on_step)
        .into_js_value(),
    );
    set(
        "perform",
        Closure::<dyn Fn(u32, u32) -> JsValue>::new(on_perform).into_js_value(),
    );
    set(
        "performed",
        Closure::<dyn Fn(u32, u32, JsValue)>::new(on_performed).into_js_value(),
    );
    set(
        "failed",
        Closure::<dyn Fn(u32, String) -> String>::new(on_failed).into_js_value(),
    );
    set(
        "writeFailed",
        Closure::<dyn Fn(String, String, String, String)>::new(write_failed).into_js_value(),
    );
    set(
        "fleetHeard",
        Closure::<dyn Fn(String, bool, String) -> String>::new(fleet_heard).into_js_value(),
    );
    set(
        "fleetWake",
        Closure::<dyn Fn(f64) -> String>::new(fleet_wake).into_js_value(),
    );
    o.into()
}

fn incoming_of(r: &shim::Incoming) -> Incoming<'_> {
    // The URL is absolute (`scheme://host/path?query#fragment`): the path starts at the
    // first `/` after `://`, the query after the first `?`.
    let after_scheme = r.url.find("://").map_or(0, |i| i + 3);
    let target = r.url[after_scheme..]
        .find('/')
        .map_or("/", |i| &r.url[after_scheme + i..]);
    let target = target.split('#').next().unwrap_or(target);
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    Incoming {
        method: &r.method,
        path,
        query,
        headers: &r.headers,
    }
}

pub fn serve(req: JsValue, env: JsValue, ctx: JsValue) -> Promise {
    let place = !LOCATED.with(Cell::get);
    let r = HEADER_NAMES.with(|names| shim::incoming(&req, names, place));
    let arrived = Millis(r.now_ms);
    let seed = r.seed;
    let started = isolate::with_engine(|e| {
        if let Some(late) = r.late_ms {
            e.lag_sample(arrived, late);
        }
        if let Some(cf) = &r.place {
            fn given(s: &str) -> Option<&str> {
                (!s.is_empty()).then_some(s)
            }
            let cf = cf.as_ref().map(|[continent, country, longitude]| Cf {
                continent: given(continent),
                country: given(country),
                longitude: given(longitude),
            });
            e.locate(cf.as_ref());
        }
        if !e.wants_place() {
            LOCATED.with(|l| l.set(true));
        }
        let (flight, out) = e.start(arrived, &incoming_of(&r), &WorkerEnv(&env), seed);
        let max_body = e.policy().origin.max_body_bytes;
        (flight, out, max_body)
    });
    let (flight, out, max_body) = match started {
        Ok(s) => s,
        Err(message) => {
            let reply = engine::unbaked(arrived, &incoming_of(&r), &message, seed);
            let out = wire::encode(&Output {
                commands: vec![engine::Command::Respond(Box::new(reply))],
                wake_at: None,
            });
            return DRIVER.with(|d| shim::run(0, &out, &req, &env, &ctx, d));
        }
    };
    let encoded = wire::encode(&out);
    if flight.is_done() {
        return DRIVER.with(|d| shim::run(0, &encoded, &req, &env, &ctx, d));
    }
    let id = park(Waiting {
        flight,
        wake_at: out.wake_at,
        max_body,
        heard: None,
        events: wire::events_op(&out),
        performing: None,
    });
    DRIVER.with(|d| shim::run(id, &encoded, &req, &env, &ctx, d))
}

/// Keeps a flight until its next report.
fn park(w: Waiting) -> u32 {
    let id = NEXT_ID.with(|n| {
        let id = n.get();
        n.set(id.wrapping_add(1).max(1));
        id
    });
    let now = now();
    let dropped = FLIGHTS.with(|f| {
        let mut f = f.borrow_mut();
        let waiting: Vec<(u32, Option<Millis>)> =
            f.iter().map(|(id, w)| (*id, w.wake_at)).collect();
        let mut dropped = Vec::new();
        for id in parked::evict(now, &waiting, parked::MAX_WAITING) {
            dropped.extend(f.remove(&id).map(|w| (id, w)));
        }
        f.insert(id, w);
        dropped
    });
    for (id, mut w) in dropped {
        let why = "the isolate had too many requests waiting: this one was dropped";
        if let Ok(reply) = isolate::with_engine(|e| e.failed(&mut w.flight, now, why)) {
            DROPPED.with(|d| {
                let mut d = d.borrow_mut();
                while d.len() >= MAX_DROPPED {
                    d.pop_first();
                }
                d.insert(id, reply);
            });
        }
    }
    id
}

fn respond_with(reply: Reply) -> String {
    wire::encode(&Output {
        commands: vec![engine::Command::Respond(Box::new(reply))],
        wake_at: None,
    })
}

/// The driver reports for flight `id` (see `wire::input`); the engine steps, and its
/// output goes back encoded.
#[allow(clippy::too_many_arguments)]
fn on_step(
    id: u32,
    kind: u32,
    io: u32,
    num: f64,
    a: Option<String>,
    b: Option<String>,
    bytes: Option<Vec<u8>>,
    clock: f64,
) -> String {
    // The driver's clock when it reported (`Date.now()`: one crossing fewer than asking).
    let now = if clock.is_finite() && clock > 0.0 {
        Millis(clock as u64)
    } else {
        now()
    };
    let Some(mut w) = FLIGHTS.with(|f| f.borrow_mut().remove(&id)) else {
        // The request was answered (a late report only teaches the isolate), or dropped
        // (the report still teaches the isolate, and the client gets the dropped answer).
        if let Some(input) = wire::input(kind, io, num, a, b, bytes, 0) {
            let _ = isolate::with_engine(|e| e.settle(now, input));
        }
        if kind & wire::LIVE != 0 {
            let reply = DROPPED.with(|d| d.borrow_mut().remove(&id));
            let reply = reply.unwrap_or_else(|| lost(now));
            return respond_with(reply);
        }
        return wire::encode(&Output::default());
    };
    let input = if kind & 0xff == wire::HEARD {
        w.heard
            .take()
            .filter(|(got, _)| got.0 == io)
            .map(|(got, heard)| Input::Heard(got, heard))
    } else {
        wire::input(kind, io, num, a, b, bytes, w.max_body)
    };
    let Some(input) = input else {
        return finish_failed(
            &mut w,
            now,
            "the driver reported something it was not asked for",
        );
    };
    let stepped = isolate::with_engine(|e| e.step(&mut w.flight, now, input));
    let out = match stepped {
        Ok(out) => out,
        Err(message) => return finish_failed(&mut w, now, &message),
    };
    let encoded = wire::encode(&out);
    if !w.flight.is_done() {
        w.wake_at = out.wake_at;
        if let Some(op) = wire::events_op(&out) {
            w.events = Some(op);
        }
        FLIGHTS.with(|f| f.borrow_mut().insert(id, w));
    }
    encoded
}

/// The answer for a request whose flight is gone from the isolate's memory (a new isolate,
/// or dropped long ago): the engine's 503 with every header.
fn lost(now: Millis) -> Reply {
    let headers = Vec::new();
    let req = Incoming {
        method: "GET",
        path: "/",
        query: "",
        headers: &headers,
    };
    engine::unbaked(
        now,
        &req,
        "the request was lost by the isolate",
        isolate::seed(),
    )
}

fn finish_failed(w: &mut Waiting, now: Millis, why: &str) -> String {
    match isolate::with_engine(|e| e.failed(&mut w.flight, now, why)) {
        Ok(reply) => respond_with(reply),
        Err(_) => respond_with(lost(now)),
    }
}

/// Something on the driver's path threw for flight `id`: the engine's answer for it.
fn on_failed(id: u32, why: String) -> String {
    let now = now();
    match FLIGHTS.with(|f| f.borrow_mut().remove(&id)) {
        Some(mut w) => finish_failed(&mut w, now, &why),
        None => respond_with(
            DROPPED
                .with(|d| d.borrow_mut().remove(&id))
                .unwrap_or_else(|| lost(now)),
        ),
    }
}

/// A background KV write failed: the engine forgets it, and its log line goes out.
fn write_failed(binding: String, key: String, error: String, cid: String) {
    if let Ok(line) = isolate::with_engine(|en| en.write_failed(&binding, &key, &error, &cid)) {
        shim::log(&line);
    }
}

/// [F-SCOPE] The breaker's coordinator answered a report or a watch (`path`; `ok`: `text`
/// is its answer) or it failed (`text` says why): the engine applies the verdict, or falls
/// back to isolate scope (a failed report). What the driver must do about it, as JSON — `{"log": line or null,
/// "point": {"indexes", "blobs", "doubles"} or null, "again": calls or null}`, `again` the
/// call to send at once (a failed one's retry, encoded as a reply's calls) — or nothing.
fn fleet_heard(path: String, ok: bool, text: String) -> String {
    let now = now();
    let answer = if ok {
        Ok(text.as_str())
    } else {
        Err(text.as_str())
    };
    isolate::with_engine(|e| {
        if path == understudy_core::breaker::member::WATCH_PATH {
            e.fleet_watched(now, answer)
        } else {
            e.fleet_heard(now, answer)
        }
    })
    .map(|heard| wire::encode_heard(&heard))
    .unwrap_or_default()
}

/// [F-SCOPE] The instant `asked` an answer's `wake` named came: the coordinator's calls to
/// send now (`Engine::fleet_wake`), encoded as a reply's are.
fn fleet_wake(asked: f64) -> String {
    let now = now();
    let asked = Millis(asked.max(0.0) as u64);
    let calls = isolate::with_engine(|e| e.fleet_wake(now, asked)).unwrap_or_default();
    wire::encode_calls(&calls)
}

/// What flight `id`'s event operation `io` asks the driver to perform (the request body,
/// the outbox shards: off the hot path): `[1, max]` or `[2, binding, url, names, bodies]`
/// ([`body::ask`], [`shards::ask`]); `undefined` when there is none. What the driver heard
/// comes back through [`on_performed`].
fn on_perform(id: u32, io: u32) -> JsValue {
    FLIGHTS.with(|f| {
        let mut f = f.borrow_mut();
        let Some(w) = f.get_mut(&id) else {
            return JsValue::UNDEFINED;
        };
        let Some((got, op)) = w.events.take().filter(|(got, _)| got.0 == io) else {
            return JsValue::UNDEFINED;
        };
        let todo = match &op {
            EventIo::ReadBody { max_bytes } => body::ask(*max_bytes),
            EventIo::Call(calls) => shards::ask(calls),
        };
        w.performing = Some((got, op));
        todo
    })
}

/// What the driver heard of flight `id`'s event operation `io`: it waits for the driver's
/// next report.
fn on_performed(id: u32, io: u32, got: JsValue) {
    FLIGHTS.with(|f| {
        let mut f = f.borrow_mut();
        let Some(w) = f.get_mut(&id) else {
            return;
        };
        let Some((asked, op)) = w.performing.take().filter(|(asked, _)| asked.0 == io) else {
            return;
        };
        let heard = match op {
            EventIo::ReadBody { .. } => Heard::Body(body::heard(&got)),
            EventIo::Call(calls) => Heard::Shards(shards::heard(&calls, &got)),
        };
        w.heard = Some((asked, heard));
    });
}

/// Once per isolate, at start: the driver's Analytics Engine binding and the last-resort
/// answer, rendered by the engine with every header (`engine::last_resort`).
pub fn init() {
    let release =
        isolate::with_engine(|e| e.release_id().to_string()).unwrap_or_else(|_| "none".to_string());
    let reply = engine::last_resort(&release);
    let head = understudy_core::wire::flat(reply.headers.iter().map(|(k, v)| (*k, v.as_str())));
    shim::init(analytics::BINDING, &head, &reply.body);
}
