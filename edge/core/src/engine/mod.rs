//! The request engine: every decision an isolate makes, and nothing else (docs/adr/005).
//!
//! Why one engine? The Worker and `understudy simulate` must answer the same request the same
//! way. When each kept its own glue around the core — naming outcomes, admitting and
//! recording breaker calls, planning write-through — the copies drifted, and an origin 404
//! opened the breaker for every tenant. Here the whole request lives in one sans-IO state
//! machine, in the manner of quinn-proto: [`Engine::start`] and [`Engine::step`] take what
//! happened with the time it happened and return an [`Output`]: the [`Command`]s to perform
//! and when to wake the request next (docs/adr/010); the drivers (the Worker, `simulate`)
//! perform commands and hold no decision.
//!
//! Order of a request: correlation and trace context → the admin endpoint → token
//! verification → parameters (400/404/405 before any I/O) → retry-storm limit (a
//! [`Command::Start`] of [`crate::io::Op::Limit`]) → breaker admission → the race
//! (`race.rs`) and the cascade (`walk.rs`) → rendering, write-through, counters, the data
//! point and the log line ([`Reply`]).

mod bulkhead;
pub mod calls;
mod capacity;
pub mod command;
mod events;
mod finish;
mod fleet;
mod flight;
pub mod freshness;
mod health;
mod hedge;
mod incoming;
pub mod kvcache;
mod lag;
pub use lag::PROBE_EVERY_MS;
pub mod outbound;
mod race;
mod reads;
pub mod report;
pub mod rng;
mod start;
mod steps;
mod timers;
pub mod trace;
mod unbaked;
mod verdict;
pub mod virtual_io;
mod walk;

pub use crate::http::{Credential, Outbound};
pub use crate::io::{Done, IoId, KvRead, Op};
pub use command::{Command, Input, Output, Reply};
pub use fleet::FleetHeard;
pub use flight::Flight;
pub use health::BUSY_MS;
#[cfg(test)]
pub(crate) use incoming::HEADERS_ASKED;
pub use incoming::{Bindings, Incoming, READ_HEADERS};
pub use unbaked::{last_resort, unbaked, LAST_RESORT_CID, MODE_UNKNOWN};

use crate::bake::Bake;
use crate::breaker::Breaker;
use crate::correlation::Provenance;
use crate::disclosure::{Meta, Rendered};
use crate::metrics::{data_point, Counters, Outcome};
use crate::policy::Policy;
use crate::request::Validator;
use crate::time::Millis;
use crate::writethrough::KvWrite;

/// Wrangler `[vars]` entry that points the origin elsewhere (local dev, tests, drills).
pub const ORIGIN_OVERRIDE_VAR: &str = "UNDERSTUDY_ORIGIN_URL";

/// One isolate's engine: the bake, the compiled parameter rules, and the state that lives as
/// long as the isolate, each part held by the component that owns it (docs/adr/010, "The
/// engine's components"). A request's steps work on it through a `Step` (`steps.rs`).
pub struct Engine<'p> {
    bake: &'p Bake,
    validator: Validator,
    /// The breaker, the timeouts awaiting the model's word, how late the isolate's timers
    /// fire, when it warmed and when the model last timed out ([`health`]).
    health: health::OriginHealth,
    counters: Counters,
    /// Origin attempts in flight in this isolate and its hedging budget ([`capacity`]).
    capacity: capacity::Capacity,
    /// Bearer tokens this isolate has verified (re-checked for time on every use).
    tokens: crate::token::Verified,
    /// KV reads of the last 30 s ([`kvcache::TTL_MS`]) and those in flight that other
    /// requests may join ([`reads`]).
    reads: reads::Reads,
    /// What the isolate's live answers wrote through, and time left on the curated data as
    /// last seen ([`freshness`]).
    curated: freshness::Curated,
    /// The request headers this policy's engine reads ([`Engine::request_headers`]).
    request_headers: Vec<String>,
    /// The isolate's name on its log lines, drawn when it serves its first request
    /// ([`Engine::identify`]), read-only after.
    isolate: String,
    /// Hands out operation handles ([`Ios::next`]).
    ios: Ios,
}

/// Operation handles, unique in the isolate (wrapping after 2³² operations: by then every
/// earlier one has long ended).
#[derive(Debug, Default)]
pub(crate) struct Ios(u32);

impl Ios {
    pub(crate) fn next(&mut self) -> IoId {
        self.0 = self.0.wrapping_add(1);
        IoId(self.0)
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
            health: health::OriginHealth::new(
                Breaker::for_service(
                    &bake.policy.breaker,
                    &bake.policy.service.name,
                    &bake.policy_hash,
                ),
                slow_call_ms(&bake.policy),
            ),
            counters: Counters::default(),
            capacity: capacity::Capacity::new(bake.policy.origin.hedge.as_ref()),
            tokens: crate::token::Verified::default(),
            reads: reads::Reads::default(),
            curated: freshness::Curated::default(),
            request_headers: incoming::request_headers(&bake.policy),
            isolate: String::new(),
            ios: Ios::default(),
        })
    }

    /// Every request header the engine may read for this policy, lower-case, each once:
    /// [`READ_HEADERS`], the header parameters and the idempotency-key header. A driver that
    /// reads headers one by one (cheaper than copying them all) reads these.
    pub fn request_headers(&self) -> &[String] {
        &self.request_headers
    }

    /// [F-SCOPE] Whether the driver should hand this isolate its request's `cf` fields
    /// ([`Engine::locate`]): a fleet-scoped breaker not located yet.
    pub fn wants_place(&mut self) -> bool {
        self.health.member().is_some_and(|m| !m.located())
    }

    /// [F-SCOPE] The request's `cf` fields (`None`: it had none): picks the region whose
    /// coordinator this isolate reports to, once (`breaker::fleet::place`).
    pub fn locate(&mut self, cf: Option<&crate::breaker::fleet::place::Cf<'_>>) {
        if let Some(m) = self.health.member() {
            m.locate(cf);
        }
    }

    /// The isolate's name: drawn from its first request's random `seed`, never from the
    /// request itself (the log line's `isolate`, the coordinator's name for it).
    fn identify(&mut self, seed: u64) {
        if self.isolate.is_empty() {
            self.isolate = format!("{:016x}", seed ^ 0x9e37_79b9_7f4a_7c15);
        }
        if let Some(m) = self.health.member() {
            m.identify(seed ^ 0x9e37_79b9_7f4a_7c15);
        }
    }

    /// The driver measured, at `now`, a zero-delay timer firing `late_ms` late: the isolate's
    /// own queue ([`lag`]). The engine's own timers are measured without it. (`simulate`
    /// has no queue and never reports one.)
    pub fn lag_sample(&mut self, now: Millis, late_ms: u64) {
        self.health.lag_sample(now, late_ms);
    }

    /// Origin attempts in flight in this isolate.
    pub fn origin_in_flight(&self) -> u32 {
        self.capacity.in_flight()
    }

    pub fn policy(&self) -> &'p Policy {
        &self.bake.policy
    }

    /// The policy source's hash (what the breaker's coordinator is keyed on with its settings).
    pub fn policy_hash(&self) -> &'p str {
        &self.bake.policy_hash
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
        self.health.mode_name(now)
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
        self.curated.write_failed(binding, key);
        // The isolate must not go on serving, as KV's, what KV refused to store.
        self.reads.forget(binding, key);
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
    ) -> (Flight<'p>, Output<'p>) {
        start::start(self, now, req, env, seed)
    }

    /// The driver reports `input` for `flight` at `now`; returns what to do next.
    pub fn step(&mut self, flight: &mut Flight<'p>, now: Millis, input: Input) -> Output<'p> {
        steps::Step::new(self, flight, now).report(input)
    }

    /// An operation ended after its request was answered (and forgotten by the driver): what
    /// it tells the isolate still counts — a KV read fills the cache, where the requests that
    /// joined it find it — and no request hears it.
    pub fn settle(&mut self, now: Millis, input: Input) {
        if let Input::Done(io, Done::Kv(read)) = &input {
            self.reads.ended(now, *io, read);
        }
        self.health.listened(now, &input, &mut self.counters);
    }

    /// The answer for a request the driver could not carry on with (it lost track of it, or
    /// performing a command failed): 503 with the envelope and every header, and its log
    /// line. `why` is logged, never shown to the client.
    pub fn failed(&mut self, flight: &mut Flight<'p>, now: Millis, why: &str) -> Reply {
        let m = meta(
            &flight.correlation_id,
            &self.bake.release_id,
            flight.credentialed,
        );
        let mut r = unbaked::could_not_complete(&m);
        r.headers.push((
            "Retry-After",
            self.bake
                .policy
                .disclosure
                .retry_after_s
                .unwrap_or(1)
                .to_string(),
        ));
        flight.note("EDGE_FAILED", why.to_string());
        flight.armed = None;
        steps::Step::new(self, flight, now).early_reply(
            r,
            Outcome::Unavailable { reason: "" },
            Some(format!("EDGE_FAILED: {}", crate::classify::bounded(why))),
        )
    }

    /// Adds `X-Breaker-Mode`, counts, and writes the data point and the log line.
    fn reply(&mut self, now: Millis, mut rendered: Rendered, facts: Facts<'_>) -> Reply {
        let mode = self.health.mode_name(now);
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
        let (fleet, fleet_wake) = self.health.member().map_or((Vec::new(), None), |m| {
            // An answer the model did not give is something to tell or to learn, whatever
            // the breaker recorded (a cold isolate's timeouts are not).
            if matches!(
                facts.outcome,
                Outcome::Fallback { .. } | Outcome::Unavailable { .. }
            ) {
                m.noticed(now);
            }
            let calls = m.calls_due(now);
            (calls, m.first_wake(now))
        });
        let log = report::Line {
            correlation_id: facts.correlation_id,
            provenance: facts.provenance,
            trace_id: facts.trace_id,
            at: facts.started,
            outcome: facts.outcome.name(),
            status: rendered.status,
            tier,
            reason: facts.reason,
            class: facts.class,
            notes: facts.notes,
            tiers: facts.tiers,
            attempts: facts.attempts,
            calls: facts.calls,
            latency_ms,
            origin_override: facts.origin_override,
            policy_version: &self.bake.release_id,
            breaker_mode: mode,
            service: &policy.service.name,
            isolate: &self.isolate,
        }
        .to_json();
        Reply {
            correlation_id: facts.correlation_id.to_string(),
            status: rendered.status,
            headers: rendered.headers,
            body: rendered.body,
            writes: facts.writes,
            log,
            point,
            fleet,
            fleet_wake,
        }
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
    tiers: &'a [crate::tier::Consult],
    attempts: usize,
    calls: &'a [calls::Call],
    origin_override: bool,
    writes: Vec<KvWrite>,
}

/// The latency at or under which the breaker judges no success slow — neither a call (the
/// slow-call bar) nor a probe (the probe bar) — `u64::MAX` when it judges none.
fn slow_call_ms(policy: &Policy) -> u64 {
    match &policy.breaker {
        crate::policy::Breaker::Rate(r) => r.slow_call_p95_ms.min(r.probe_p95_ms),
        _ => u64::MAX,
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

#[cfg(test)]
mod tests;
