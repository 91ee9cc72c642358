//! The request engine: every decision an isolate makes, and nothing else (docs/adr/005).
//!
//! Why one engine? The Worker and `understudy simulate` must answer the same request the same
//! way. When each kept its own glue around the core — naming outcomes, admitting and
//! recording breaker calls, planning write-through — the copies drifted, and an origin 404
//! opened the breaker for every tenant. Here the whole request lives in one sans-IO state
//! machine, in the manner of quinn-proto: [`Engine::start`] and [`Engine::step`] take what
//! happened with the time it happened and return the next [`Action`]; the drivers (the
//! Worker, `simulate`) perform actions and hold no decision.
//!
//! Order of a request: correlation and trace context → the admin endpoint → token
//! verification → parameters (400/404/405 before any I/O) → retry-storm limit (an
//! [`Action::Limit`]) → breaker admission → the race and the cascade ([`Exchange`]) →
//! rendering, write-through, counters, the data point and the log line ([`Reply`]).

pub mod action;
mod events;
mod finish;
mod flight;
pub mod freshness;
pub mod kvcache;
pub mod outbound;
pub mod report;
pub mod rng;
mod steps;
pub mod trace;
mod verdict;

use std::cell::Cell;
use std::collections::BTreeMap;
use std::rc::Rc;

pub use crate::http::{Credential, Outbound};
pub use action::{Action, Event, Prefetch, Reply};
pub use flight::Flight;

use crate::bake::Bake;
use crate::breaker::Breaker;
use crate::correlation::{self, Provenance};
use crate::disclosure::{self, Meta, Rendered};
use crate::exchange::Exchange;
use crate::metrics::{data_point, Counters, Outcome};
use crate::policy::Policy;
use crate::request::Validator;
use crate::time::Millis;
use crate::writethrough::{KvWrite, WriteThrough};

use self::rng::Rng;
use self::trace::Trace;

/// The window over which the origin's p95 (the hedge's default delay) is measured.
pub const HEDGE_WINDOW_MS: u64 = 30_000;

/// Wrangler `[vars]` entry that points the origin elsewhere (local dev, tests, drills).
pub const ORIGIN_OVERRIDE_VAR: &str = "UNDERSTUDY_ORIGIN_URL";

/// What the driver can read from its environment: secret bindings and plain vars.
pub trait Bindings {
    fn secret(&self, name: &str) -> Option<String>;
    fn var(&self, name: &str) -> Option<String>;
    /// Fills `buf` with cryptographically strong random bytes (the seal's nonces); `false`
    /// when the environment has none (the edge then stores nothing and answers 503).
    fn random_bytes(&self, buf: &mut [u8]) -> bool {
        let _ = buf;
        false
    }
}

/// The request as the driver received it, nothing interpreted yet.
#[derive(Debug, Clone, Copy)]
pub struct Incoming<'a> {
    pub method: &'a str,
    /// The URL path, still percent-encoded.
    pub path: &'a str,
    /// The raw query string without `?`.
    pub query: &'a str,
    /// Header names (any case) and values.
    pub headers: &'a [(String, String)],
}

/// The request headers the engine reads whatever the policy (names lower-case): a driver may
/// hand it only these and the policy's own ([`Engine::request_headers`]). A header the
/// engine reads must be listed here; the tests record every name it asks for and check.
pub const READ_HEADERS: &[&str] = &[
    "authorization",
    "cookie",
    "cf-connecting-ip",
    "x-correlation-id",
    trace::TRACEPARENT,
    trace::TRACESTATE,
    "content-length",
    "content-type",
];

#[cfg(test)]
thread_local! {
    /// Every header name [`Incoming::header`] was asked for on this thread (the tests check
    /// them against [`READ_HEADERS`] and the policy's).
    pub(crate) static HEADERS_ASKED: std::cell::RefCell<std::collections::BTreeSet<String>> =
        const { std::cell::RefCell::new(std::collections::BTreeSet::new()) };
}

impl<'a> Incoming<'a> {
    pub fn header(&self, name: &str) -> Option<&'a str> {
        #[cfg(test)]
        HEADERS_ASKED.with(|h| h.borrow_mut().insert(name.to_ascii_lowercase()));
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// One isolate's engine: the bake, the compiled parameter rules, and the state that lives as
/// long as the isolate — the breaker, the write-through map, the counters.
pub struct Engine<'p> {
    bake: &'p Bake,
    validator: Validator,
    breaker: Breaker,
    writes: WriteThrough,
    counters: Counters,
    /// Origin calls in flight in this isolate (the bulkhead's count), shared with the
    /// [`Lease`]s of the flights that hold one.
    origin_in_flight: Rc<Cell<u32>>,
    /// When the isolate's first origin attempt ended: attempts started before it ran on a
    /// cold isolate and are not the model's to answer for (see [`steps`]).
    warm_since: Option<Millis>,
    /// Bearer tokens this isolate has verified (re-checked for time on every use).
    tokens: crate::token::Verified,
    /// KV reads of the last 30 s ([`kvcache::TTL_MS`]).
    kv_cache: kvcache::KvCache,
    /// Time left on the curated data, as last seen ([`freshness`]).
    freshness: freshness::Freshness,
    /// Successful origin latencies of the last 30 s, for the hedge's delay.
    origin_latency: crate::breaker::window::Window,
    /// The hedge's token bucket.
    hedge_tokens: f64,
    /// The isolate's own scheduling delay, as the driver last measured it (ms): how late a
    /// zero-delay timer fires. Subtracted from origin latencies before the breaker judges
    /// them slow.
    queue_delay_ms: u64,
    /// When the model was last heard from, and the timeouts waiting for it ([`verdict`]).
    verdicts: verdict::Verdicts,
    /// When an origin attempt last ended in `ML_TIMEOUT`: with no answer from the model
    /// since, new attempts start their tier reads alongside ([`Engine::model_silent`]).
    last_timeout: Option<Millis>,
    /// The request headers this policy's engine reads ([`Engine::request_headers`]).
    request_headers: Vec<String>,
}

fn request_headers(policy: &Policy) -> Vec<String> {
    let mut names: Vec<String> = READ_HEADERS.iter().map(|h| h.to_string()).collect();
    let own = policy
        .params
        .iter()
        .filter(|p| p.source == crate::policy::ParamSource::Header)
        .map(|p| p.from.as_str())
        .chain(policy.origin.idempotency_key_header.as_deref());
    for h in own {
        let h = h.to_ascii_lowercase();
        if !names.contains(&h) {
            names.push(h);
        }
    }
    names
}

/// One origin call's slot in the bulkhead, given back when the call ends — or when the
/// flight is dropped without ending it (a client that went away), so a lost flight cannot
/// leak a slot.
#[derive(Debug)]
pub struct Lease(Rc<Cell<u32>>);

impl Lease {
    fn take(count: &Rc<Cell<u32>>) -> Lease {
        count.set(count.get().saturating_add(1));
        Lease(Rc::clone(count))
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.0.set(self.0.get().saturating_sub(1));
    }
}

impl<'p> Engine<'p> {
    /// An engine for `bake`. A pattern that does not compile is a bake the compiler should
    /// have refused; the driver answers [`unbaked`] with the message.
    pub fn new(bake: &'p Bake) -> Result<Engine<'p>, String> {
        let validator = Validator::new(&bake.policy)
            .map_err(|e| format!("the baked policy is invalid: {e}; re-bake"))?;
        Ok(Engine {
            bake,
            validator,
            breaker: Breaker::new(&bake.policy.breaker),
            writes: WriteThrough::default(),
            counters: Counters::default(),
            origin_in_flight: Rc::new(Cell::new(0)),
            warm_since: None,
            tokens: crate::token::Verified::default(),
            queue_delay_ms: 0,
            verdicts: verdict::Verdicts::default(),
            last_timeout: None,
            kv_cache: kvcache::KvCache::default(),
            freshness: freshness::Freshness::default(),
            origin_latency: crate::breaker::window::Window::new(HEDGE_WINDOW_MS),
            hedge_tokens: bake
                .policy
                .origin
                .hedge
                .as_ref()
                .map_or(0.0, |h| f64::from(h.burst)),
            request_headers: request_headers(&bake.policy),
        })
    }

    /// Every request header the engine may read for this policy, lower-case, each once:
    /// [`READ_HEADERS`], the header parameters and the idempotency-key header. A driver that
    /// reads headers one by one (cheaper than copying them all) reads these.
    pub fn request_headers(&self) -> &[String] {
        &self.request_headers
    }

    /// The driver's measurement of the isolate's scheduling delay: the largest lateness of
    /// its timers in the last second (zero-delay probes and race timers), not an average. A
    /// busy isolate takes the model's answer late; that wait is the edge's, and the breaker
    /// does not count it as the model's latency. (`simulate` has no queue and never sets it.)
    pub fn set_queue_delay(&mut self, ms: u64) {
        self.queue_delay_ms = ms;
    }

    /// The latency at or under which the breaker judges no success slow — neither a call
    /// (the slow-call bar) nor a probe (the probe bar) — `u64::MAX` when it judges none.
    fn slow_call_ms(&self) -> u64 {
        match &self.bake.policy.breaker {
            crate::policy::Breaker::Rate(r) => r.slow_call_p95_ms.min(r.probe_p95_ms),
            _ => u64::MAX,
        }
    }

    /// Origin calls in flight in this isolate.
    pub fn origin_in_flight(&self) -> u32 {
        self.origin_in_flight.get()
    }

    /// When to hedge this attempt, taking a token: `None` when the policy does not hedge,
    /// the request may not be repeated, the origin's p95 is not known yet or would not leave
    /// the hedge time to run, or the bucket is empty. Every origin call refills the bucket by
    /// `max_share`.
    fn hedge_after(&mut self, now: Millis, timeout_ms: u64, repeatable: bool) -> Option<u64> {
        let h = self.bake.policy.origin.hedge.as_ref()?;
        self.hedge_tokens = (self.hedge_tokens + h.max_share).min(f64::from(h.burst));
        if !repeatable {
            return None;
        }
        let after = match h.after_ms {
            Some(ms) => ms,
            None => {
                let s = self.origin_latency.summary(now);
                if s.calls < h.min_calls {
                    return None;
                }
                s.p95_ms.max(1)
            }
        };
        if after >= timeout_ms || self.hedge_tokens < 1.0 {
            return None;
        }
        self.hedge_tokens -= 1.0;
        Some(after)
    }

    /// A hedge token taken for an attempt that sent no hedge goes back to the bucket.
    fn refund_hedge(&mut self) {
        if let Some(h) = &self.bake.policy.origin.hedge {
            self.hedge_tokens = (self.hedge_tokens + 1.0).min(f64::from(h.burst));
        }
    }

    /// Whether the bulkhead lets another origin call start now.
    /// The model's last call timed out and it has answered no call since: a request that
    /// calls it now will likely need its tiers at the deadline.
    fn model_silent(&self) -> bool {
        self.last_timeout
            .is_some_and(|t| self.verdicts.heard().is_none_or(|h| h < t))
    }

    fn origin_open(&self) -> bool {
        self.bake
            .policy
            .origin
            .max_in_flight
            .is_none_or(|cap| self.origin_in_flight.get() < cap)
    }

    pub fn policy(&self) -> &'p Policy {
        &self.bake.policy
    }

    /// The bake's release ID (`X-Policy-Version`).
    pub fn release_id(&self) -> &'p str {
        &self.bake.release_id
    }

    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// The breaker's mode as of `now`, in the policy's vocabulary.
    pub fn breaker_mode(&mut self, now: Millis) -> &'static str {
        self.breaker.mode_name(now)
    }

    /// A background KV write of a [`Reply`] (to `binding`, under `key`) failed: forget it so
    /// the next live answer writes again. Returns the log line to print.
    pub fn write_failed(
        &mut self,
        binding: &str,
        key: &str,
        error: &str,
        correlation_id: &str,
    ) -> String {
        self.writes.forget(&format!("{binding}/{key}"));
        // The isolate must not go on serving, as KV's, what KV refused to store.
        self.kv_cache.forget(binding, key);
        serde_json::json!({
            "event": "write_through_failed",
            "correlation_id": correlation_id,
            "binding": binding,
            "error": crate::classify::bounded(error),
        })
        .to_string()
    }

    /// A request arrived at `now`. `seed` feeds the request's random source (correlation
    /// and trace IDs, retry jitter).
    pub fn start(
        &mut self,
        now: Millis,
        req: &Incoming<'_>,
        env: &dyn Bindings,
        seed: u64,
    ) -> (Flight<'p>, Action<'p>) {
        flight::start(self, now, req, env, seed)
    }

    /// The driver observed `event` at `now`; returns the next action.
    pub fn step(&mut self, flight: &mut Flight<'p>, now: Millis, event: Event) -> Action<'p> {
        steps::step(self, flight, now, event)
    }

    /// Adds `X-Breaker-Mode`, counts, and writes the data point and the log line.
    fn reply(&mut self, now: Millis, mut rendered: Rendered, facts: Facts<'_>) -> Action<'p> {
        let mode = self.breaker.mode_name(now);
        rendered.headers.push(("X-Breaker-Mode", mode.to_string()));
        let policy = &self.bake.policy;
        self.counters.record(facts.outcome);
        let latency_ms = now.since(facts.started);
        let stubs_left = freshness::stubs_left_ms(policy, self.bake.catalog.as_ref(), now);
        let point = (facts.outcome != Outcome::Admin).then(|| {
            data_point(
                &policy.service.name,
                &self.bake.release_id,
                facts.outcome,
                latency_ms,
                mode,
                stubs_left,
            )
        });
        let tier = match facts.outcome {
            Outcome::Fallback { tier, .. } => Some(tier),
            _ => None,
        };
        let log = report::Line {
            correlation_id: facts.correlation_id,
            provenance: facts.provenance,
            trace_id: facts.trace_id,
            outcome: facts.outcome.name(),
            status: rendered.status,
            tier,
            reason: facts.reason,
            class: facts.class,
            notes: facts.notes,
            attempts: facts.attempts,
            latency_ms,
            origin_override: facts.origin_override,
            policy_version: &self.bake.release_id,
            breaker_mode: mode,
            service: &policy.service.name,
        }
        .to_json();
        Action::Respond(Box::new(Reply {
            correlation_id: facts.correlation_id.to_string(),
            status: rendered.status,
            headers: rendered.headers,
            body: rendered.body,
            writes: facts.writes,
            log,
            point,
        }))
    }
}

/// What the log line, the counters and the data point say about a finished request.
struct Facts<'a> {
    started: Millis,
    correlation_id: &'a str,
    provenance: Provenance,
    trace_id: &'a str,
    outcome: Outcome<'a>,
    reason: Option<String>,
    class: Option<&'static str>,
    notes: &'a [crate::cascade::Note],
    attempts: usize,
    origin_override: bool,
    writes: Vec<KvWrite>,
}

/// The answer when the isolate has no usable bake (missing or corrupt custom section):
/// 503 `BAKE_INVALID`, with a log line. There is no policy to consult.
pub fn unbaked(now: Millis, req: &Incoming<'_>, message: &str, seed: u64) -> Reply {
    let mut rng = Rng::new(seed);
    let (cid, provenance) =
        correlation::resolve(req.header(correlation::HEADER), || rng.bytes::<16>());
    let trace = Trace::resolve(
        req.header(trace::TRACEPARENT),
        req.header(trace::TRACESTATE),
        &mut rng,
    );
    let r = disclosure::bake_invalid(message, &cid);
    let log = report::Line {
        correlation_id: &cid,
        provenance,
        trace_id: &trace.trace_id,
        outcome: Outcome::BakeInvalid.name(),
        status: r.status,
        tier: None,
        reason: Some(crate::classify::bounded(message)),
        class: None,
        notes: &[],
        attempts: 0,
        latency_ms: 0,
        origin_override: false,
        policy_version: "none",
        breaker_mode: "UNKNOWN",
        service: "unknown",
    }
    .to_json();
    let _ = now; // the bake-less answer has nothing to time: it does no I/O
    Reply {
        correlation_id: cid,
        status: r.status,
        headers: r.headers,
        body: r.body,
        writes: Vec::new(),
        log,
        point: None,
    }
}

/// Secret values a test or `simulate` hands the engine.
impl Bindings for BTreeMap<String, String> {
    fn secret(&self, name: &str) -> Option<String> {
        self.get(name).cloned()
    }
    fn var(&self, name: &str) -> Option<String> {
        self.get(name).cloned()
    }
    /// Tests and `simulate`: a fixed pattern (nonces need not be secret, only fresh per
    /// key, and these drivers seal nothing that is kept).
    fn random_bytes(&self, buf: &mut [u8]) -> bool {
        for (i, b) in buf.iter_mut().enumerate() {
            *b = 0x5a ^ i as u8;
        }
        true
    }
}

/// The request's meta for rendering.
fn meta<'a>(cid: &'a str, release: &'a str, credentialed: bool) -> Meta<'a> {
    Meta {
        correlation_id: cid,
        policy_version: release,
        credentialed,
    }
}

/// The type the engine drives for the race and the cascade.
type Race<'p> = Exchange<'p, crate::retry::Backoff<'p, Rng>>;

#[cfg(test)]
mod tests;
