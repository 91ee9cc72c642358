//! The request path: hand the request to the engine, perform each action it asks for, feed
//! back what happened with the time, and send its reply. Every branch ends in a response.
//!
//! JavaScript drives the loop (docs/adr/009-io-in-js.md, "The loop in JavaScript"): the
//! fetch handler starts the engine synchronously and, unless the reply is already known,
//! hands the first action to `us_drive` (`crate::shim`), which performs it, calls back
//! [`on_step`] synchronously with what happened, and performs the next action it returns.
//! No Rust future awaits a JS promise on the request path: each await is JavaScript's own,
//! without wasm-bindgen-futures' closures and queued wake-ups. The flight waits between
//! steps in [`FLIGHTS`]. The rarer actions (request body, outbox shards) are performed in
//! Rust ([`on_perform`]) and their event handed to the next step.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;

use js_sys::{Array, Promise};
use understudy_core::cascade::KvRead;
use understudy_core::engine::{self, Action, Bindings, Event, Flight, Incoming, Reply};
use understudy_core::events::protocol::ShardRequest;
use wasm_bindgen::prelude::*;
use worker::{console_log, wasm_bindgen_futures, web_sys, Env};

use crate::isolate::{self, now};
use crate::{analytics, body, kv, shards, shim};

/// Secrets and vars, as the engine reads them — each read from the environment once per
/// isolate (a changed secret or var is a new deployment, hence a new isolate).
struct WorkerEnv<'a>(&'a Env);

impl Bindings for WorkerEnv<'_> {
    fn secret(&self, name: &str) -> Option<String> {
        isolate::binding(name, || self.0.secret(name).ok().map(|s| s.to_string()))
    }
    fn var(&self, name: &str) -> Option<String> {
        isolate::binding(name, || self.0.var(name).ok().map(|v| v.to_string()))
    }
    fn random_bytes(&self, buf: &mut [u8]) -> bool {
        isolate::random_bytes(buf)
    }
}

/// The codes of the actions `us_drive` performs (the first element of each action array),
/// and of the events it reports back with.
const DONE: u32 = 0;
const RACE: u32 = 1;
const KV: u32 = 2;
const WAIT: u32 = 3;
const IN_RUST: u32 = 4;
const LIMIT: u32 = 5;

/// Flights waiting for their next event. A request the runtime cancels (the client went
/// away) never reports back; past this many waiting, the oldest is dropped.
const MAX_WAITING: usize = 4096;

/// A request between two steps.
struct Waiting {
    flight: Flight<'static>,
    req: web_sys::Request,
    env: Env,
    /// The runtime's execution context (its `waitUntil` keeps the write-through alive).
    ctx: JsValue,
    incoming: shim::Incoming,
    seed: u64,
    doing: Doing,
}

/// What the driver is doing for a waiting flight: how to read what it reports.
enum Doing {
    Race {
        origin: bool,
        hedged: bool,
        max_body: u64,
    },
    Kv,
    Wait,
    Limit,
    InRust(Option<Slow>, Option<Event>),
}

/// The actions performed in Rust ([`on_perform`]).
enum Slow {
    Body { max_bytes: u64 },
    Shards(Vec<(String, ShardRequest)>),
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
    static NEXT_ID: Cell<u32> = const { Cell::new(0) };
    /// `on_step` and `on_perform` as JS functions, made once per isolate.
    static DRIVER: (JsValue, JsValue) = (
        Closure::<dyn Fn(u32, u32, JsValue) -> JsValue>::new(on_step).into_js_value(),
        Closure::<dyn Fn(u32) -> Promise>::new(on_perform).into_js_value(),
    );
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

pub fn serve(req: web_sys::Request, env: Env, ctx: JsValue) -> Promise {
    let arrived = now();
    let r = HEADER_NAMES.with(|names| shim::incoming(&req, names));
    let seed = isolate::seed();
    let started =
        isolate::with_engine(|e| e.start(arrived, &incoming_of(&r), &WorkerEnv(&env), seed));
    let (flight, action) = match started {
        Ok(s) => s,
        Err(message) => {
            let reply = engine::unbaked(arrived, &incoming_of(&r), &message, seed);
            return Promise::resolve(&JsValue::from(send(reply, &env, &ctx)));
        }
    };
    let mut w = Waiting {
        flight,
        req,
        env,
        ctx,
        incoming: r,
        seed,
        doing: Doing::Wait,
    };
    let next = dispatch(&mut w, action);
    if next.get(0).as_f64() == Some(f64::from(DONE)) {
        return Promise::resolve(&next.get(1));
    }
    let env = JsValue::from(w.env.clone());
    let id = park(w);
    DRIVER.with(|(step, perform)| shim::drive(id, &next, &env, step, perform))
}

/// Keeps a flight until its next event.
fn park(w: Waiting) -> u32 {
    let id = NEXT_ID.with(|n| {
        let id = n.get();
        n.set(id.wrapping_add(1));
        id
    });
    FLIGHTS.with(|f| {
        let mut f = f.borrow_mut();
        while f.len() >= MAX_WAITING {
            f.pop_first();
        }
        f.insert(id, w);
    });
    id
}

/// `us_drive` reports what action `kind` observed (`value`) for flight `id`: the engine
/// steps, and the next action goes back (`[0, response]` when done).
fn on_step(id: u32, kind: u32, value: JsValue) -> JsValue {
    let Some(mut w) = FLIGHTS.with(|f| f.borrow_mut().remove(&id)) else {
        // Dropped as the oldest of too many waiting: nobody waits for it any more either.
        return done(shim::response(503, &[], "")).into();
    };
    let event = match (&mut w.doing, kind) {
        (
            Doing::Race {
                origin,
                hedged,
                max_body,
            },
            RACE,
        ) => {
            let r = shim::raced(&value, *max_body);
            match (*origin, *hedged) {
                (true, false) => Event::Origin(r.observed),
                (true, true) => Event::OriginHedged {
                    observed: r.observed,
                    sent: r.hedge_sent,
                    won: r.hedge_won,
                },
                (false, _) => Event::Http(r.observed),
            }
        }
        (Doing::Kv, KV) => Event::Kv(shim::kv_read(&value)),
        (Doing::Wait, WAIT) => Event::Woke,
        (Doing::Limit, LIMIT) => Event::Limited(shim::limited(&value)),
        (Doing::InRust(_, event), IN_RUST) => match event.take() {
            Some(e) => e,
            None => return finish(&mut w, "the action performed in Rust reported nothing"),
        },
        _ => {
            return finish(
                &mut w,
                "the driver reported another action than it was given",
            )
        }
    };
    let action = step(&mut w, event);
    let next = dispatch(&mut w, action);
    if next.get(0).as_f64() != Some(f64::from(DONE)) {
        FLIGHTS.with(|f| f.borrow_mut().insert(id, w));
    }
    next.into()
}

/// An answer for a flight the driver lost track of: the engine's 503 for an edge that cannot
/// serve, with the reason logged. Never expected; never a panic.
fn finish(w: &mut Waiting, message: &str) -> JsValue {
    let reply = engine::unbaked(now(), &incoming_of(&w.incoming), message, w.seed);
    done(send(reply, &w.env, &w.ctx)).into()
}

/// Performs flight `id`'s action in Rust; its event waits for the next [`on_step`].
fn on_perform(id: u32) -> Promise {
    let taken = FLIGHTS.with(|f| {
        let mut f = f.borrow_mut();
        let w = f.get_mut(&id)?;
        match &mut w.doing {
            Doing::InRust(slow, _) => slow
                .take()
                .map(|s| (s, w.env.clone(), Clone::clone(&w.req))),
            _ => None,
        }
    });
    wasm_bindgen_futures::future_to_promise(async move {
        let Some((slow, env, req)) = taken else {
            return Ok(JsValue::UNDEFINED);
        };
        let event = match slow {
            Slow::Body { max_bytes } => Event::Body(body::read(&req, max_bytes).await),
            Slow::Shards(calls) => Event::Shards(shards::call_all(&env, calls).await),
        };
        FLIGHTS.with(|f| {
            if let Some(w) = f.borrow_mut().get_mut(&id) {
                w.doing = Doing::InRust(None, Some(event));
            }
        });
        Ok(JsValue::UNDEFINED)
    })
}

/// One engine step with the time; an engine that cannot step answers 503 `BAKE_INVALID`.
fn step(w: &mut Waiting, event: Event) -> Action<'static> {
    let lag = matches!(event, Event::Origin(_) | Event::OriginHedged { .. }).then(shim::lag_ms);
    match isolate::with_engine(|e| {
        if let Some(ms) = lag {
            e.set_queue_delay(ms);
        }
        e.step(&mut w.flight, now(), event)
    }) {
        Ok(a) => a,
        Err(message) => Action::Respond(Box::new(engine::unbaked(
            now(),
            &incoming_of(&w.incoming),
            &message,
            w.seed,
        ))),
    }
}

fn done(response: web_sys::Response) -> Array {
    let a = Array::new();
    a.push(&JsValue::from(DONE));
    a.push(&response.into());
    a
}

/// The action for `us_drive`, stepping on at once where nothing needs awaiting.
fn dispatch(w: &mut Waiting, mut action: Action<'static>) -> Array {
    loop {
        let a = Array::new();
        match action {
            Action::Respond(reply) => return done(send(*reply, &w.env, &w.ctx)),
            Action::FetchOrigin {
                timeout_ms,
                request,
                hedge_after_ms,
                prefetch,
                ..
            } => {
                for p in prefetch {
                    // An unbound namespace is reported by the read at the deadline.
                    if let Ok(ns) = kv::namespace(&w.env, p.binding) {
                        shim::prefetch(&ns, &p.key, p.binding, &w.ctx, p.keep_ms);
                    }
                }
                w.doing = Doing::Race {
                    origin: true,
                    hedged: hedge_after_ms.is_some(),
                    max_body: request.max_body_bytes,
                };
                a.push(&JsValue::from(RACE));
                shim::race_args(&a, &request, timeout_ms, hedge_after_ms);
                return a;
            }
            Action::FetchHttp {
                timeout_ms,
                request,
                ..
            } => {
                w.doing = Doing::Race {
                    origin: false,
                    hedged: false,
                    max_body: request.max_body_bytes,
                };
                a.push(&JsValue::from(RACE));
                shim::race_args(&a, &request, timeout_ms, None);
                return a;
            }
            Action::ReadKv {
                binding,
                key,
                timeout_ms,
                ..
            } => match kv::namespace(&w.env, binding) {
                Ok(ns) => {
                    w.doing = Doing::Kv;
                    a.push(&JsValue::from(KV));
                    a.push(&ns);
                    a.push(&JsValue::from_str(&key));
                    a.push(&JsValue::from(timeout_ms as f64));
                    a.push(&JsValue::from_str(binding));
                    a.push(&w.ctx);
                    return a;
                }
                Err(e) => action = step(w, Event::Kv(KvRead::Error(e))),
            },
            Action::Wait { ms } => {
                w.doing = Doing::Wait;
                a.push(&JsValue::from(WAIT));
                a.push(&JsValue::from(ms as f64));
                return a;
            }
            Action::Limit { binding, key } => {
                w.doing = Doing::Limit;
                a.push(&JsValue::from(LIMIT));
                a.push(&JsValue::from_str(binding));
                a.push(&JsValue::from_str(&key));
                return a;
            }
            Action::ReadBody { max_bytes } => {
                w.doing = Doing::InRust(Some(Slow::Body { max_bytes }), None);
                a.push(&JsValue::from(IN_RUST));
                return a;
            }
            Action::CallShards { calls } => {
                w.doing = Doing::InRust(Some(Slow::Shards(calls)), None);
                a.push(&JsValue::from(IN_RUST));
                return a;
            }
        }
    }
}

/// Sends the engine's reply: the response, the log line, the data point, and the
/// write-through in the background.
fn send(reply: Reply, env: &Env, ctx: &JsValue) -> web_sys::Response {
    console_log!("{}", reply.log);
    if let Some(point) = &reply.point {
        analytics::write(env, point);
    }
    if !reply.writes.is_empty() {
        kv::write_all(env, ctx, reply.writes, &reply.correlation_id);
    }
    // The compiler validated every value the policy puts here; one the runtime still
    // refuses is dropped, never fatal.
    shim::response(reply.status, &reply.headers, &reply.body)
}
