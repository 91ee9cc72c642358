//! [B-SIM] `understudy simulate`: the edge's own request engine — the very code the Worker
//! runs (`understudy_core::engine`) — driven natively over a scenario in virtual time.
//!
//! This module is a driver and holds no decision: it builds each scenario request as the
//! HTTP request a client sends ([`request::plan`], the same one `drill` sends), hands it to
//! the engine, and performs the actions the engine asks for on a virtual clock: the model
//! answers as the scenario scripts it ([`origin`], raw statuses and bodies the engine
//! classifies), KV holds the scenario's entries plus what the engine writes through, the
//! rate limiter counts fixed windows ([`limiter`]). What a request's answer was is read from
//! the reply's status and headers, as a client would.
//!
//! The loop is event-driven in the style of quinn's test `Pair`: a queue of wake-ups, and
//! each step jumps to the next one. Requests overlap in time exactly as their arrivals and
//! latencies say, so the breaker sees outcomes in the order a real isolate would. Nothing
//! sleeps; a 120-second drill replays in milliseconds.

pub mod limiter;
pub mod origin;
pub mod report;
pub mod request;
pub mod scenario;

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};

use understudy_core::bake::Bake;
use understudy_core::cascade::KvRead;
use understudy_core::catalog::Catalog;
use understudy_core::classify::Observed;
use understudy_core::engine::{Action, Bindings, Engine, Event, Flight, Incoming, Reply};
use understudy_core::policy::Policy;
use understudy_core::Millis;

use scenario::Scenario;

/// How one request was answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Origin,
    Tier(String),
    /// The origin refused the caller's request and its status was passed through.
    Rejected(u16),
    /// Any other non-answer: 504 / 503 with the error envelope, a 400, a 429.
    Error(u16),
}

#[derive(Debug, Clone)]
pub struct RequestResult {
    pub index: u64,
    /// Arrival, ms after the scenario's start.
    pub arrival_ms: u64,
    pub latency_ms: u64,
    pub status: u16,
    pub source: Source,
    /// `X-Degraded-Reason` for fallbacks and errors.
    pub reason: Option<String>,
    pub model_attempts: u32,
    /// The breaker's mode when the request arrived.
    pub mode: &'static str,
    /// The model alone (no timeout of ours, no fallback) would have answered within budget.
    pub model_alone_ok: bool,
}

/// A breaker transition, located at the request whose outcome (or arrival) caused it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BreakerEvent {
    pub request: u64,
    pub at_ms: u64,
    pub from: &'static str,
    pub to: &'static str,
}

pub struct Run {
    pub results: Vec<RequestResult>,
    pub breaker: Vec<BreakerEvent>,
    pub model_calls: u64,
}

/// How a reply reads to a client: where the answer came from and why.
pub fn source_of(status: u16, header: impl Fn(&str) -> Option<String>) -> (Source, Option<String>) {
    let reason = header("x-degraded-reason");
    let from = header("x-result-source");
    let source = match (status, from.as_deref()) {
        (200, Some("origin")) => Source::Origin,
        (200, Some("fallback")) => Source::Tier(header("x-fallback-tier").unwrap_or_default()),
        (s, Some("origin")) if (400..500).contains(&s) => Source::Rejected(s),
        (s, _) => Source::Error(s),
    };
    (source, reason)
}

/// The secrets `simulate` gives the engine: every secret binding holds its development
/// value (as in `understudy dev` and the drills); no var is set.
struct DevBindings;

impl Bindings for DevBindings {
    fn secret(&self, name: &str) -> Option<String> {
        Some(request::dev_secret(name))
    }
    fn var(&self, _: &str) -> Option<String> {
        None
    }
}

/// The simulated KV store: (binding, key) → (value, metadata).
type Kv = HashMap<(String, String), (String, serde_json::Value)>;

#[derive(PartialEq, Eq, PartialOrd, Ord)]
enum Wake {
    /// Request `i` arrives.
    Arrive(u64),
    /// Request `i`'s pending event is due.
    Deliver(u64),
}

struct InFlight<'p> {
    flight: Flight<'p>,
    arrival_ms: u64,
    mode: &'static str,
    attempts: u32,
    /// Calls made to the model (attempts and hedges).
    calls: u32,
    pending: Option<Event>,
    /// Speculative tier reads this request started: (binding, key, when in ms).
    prefetched: Vec<(String, String, u64)>,
}

/// Everything the run mutates, apart from the engine.
struct World<'s> {
    sc: &'s Scenario,
    start: Millis,
    kv: Kv,
    limiter: limiter::Limiter,
    queue: BinaryHeap<Reverse<(u64, u64, Wake)>>,
    seq: u64,
    model_calls: u64,
    budget_ms: u64,
}

impl World<'_> {
    fn push(&mut self, at_us: u64, w: Wake) {
        self.seq += 1;
        self.queue.push(Reverse((at_us, self.seq, w)));
    }
}

/// Replays `sc` against `policy` (and its baked `catalog`).
pub fn run(policy: &Policy, catalog: Option<&Catalog>, sc: &Scenario) -> Run {
    let bake = Bake {
        release_id: "simulate".into(),
        policy_hash: String::new(),
        catalog_hash: String::new(),
        validated_at_ms: sc.start_ms,
        compiler_version: crate::dist::COMPILER_VERSION.into(),
        policy: policy.clone(),
        catalog: catalog.cloned(),
    };
    let Ok(mut engine) = Engine::new(&bake) else {
        // The compiler refuses such a policy; nothing can be answered.
        return Run {
            results: Vec::new(),
            breaker: Vec::new(),
            model_calls: 0,
        };
    };
    let start = Millis(sc.start_ms);
    let (limit, period) = policy.storm.as_ref().map_or((u32::MAX, 1), |s| {
        (understudy_core::storm::limit(s), s.window_ms)
    });
    let mut w = World {
        sc,
        start,
        kv: seed_kv(sc),
        limiter: limiter::Limiter::new(limit, period),
        queue: BinaryHeap::new(),
        seq: 0,
        model_calls: 0,
        budget_ms: policy.budget.total_ms,
    };
    let mut tokens = BTreeMap::new();
    let plans: Vec<request::Planned> = (0..sc.requests)
        .map(|i| request::plan(policy, sc, i, &mut tokens, sc.start_ms / 1000))
        .collect();
    for p in &plans {
        w.push(p.due_us, Wake::Arrive(p.index));
    }
    let mut flights: HashMap<u64, InFlight<'_>> = HashMap::new();
    let mut results: Vec<Option<RequestResult>> = vec![None; sc.requests as usize];
    let mut events = Vec::new();
    let mut last_mode = engine.breaker_mode(start);

    while let Some(Reverse((at_us, _, wake))) = w.queue.pop() {
        let rel_ms = at_us / 1000;
        let now = start.plus(rel_ms);
        let (i, action) = match wake {
            Wake::Arrive(i) => {
                let p = &plans[i as usize];
                let (path, query) = p.path_and_query();
                let req = Incoming {
                    method: &p.method,
                    path,
                    query,
                    headers: &p.headers,
                };
                let mode = engine.breaker_mode(now);
                let (flight, action) = engine.start(now, &req, &DevBindings, i + 1);
                flights.insert(
                    i,
                    InFlight {
                        flight,
                        arrival_ms: rel_ms,
                        mode,
                        attempts: 0,
                        calls: 0,
                        pending: None,
                        prefetched: Vec::new(),
                    },
                );
                (i, action)
            }
            Wake::Deliver(i) => {
                let Some(f) = flights.get_mut(&i) else {
                    continue;
                };
                let Some(event) = f.pending.take() else {
                    continue;
                };
                (i, engine.step(&mut f.flight, now, event))
            }
        };
        let done = perform(&mut engine, &mut w, &mut flights, i, rel_ms, action);
        if let Some(reply) = done {
            if let Some(f) = flights.remove(&i) {
                results[i as usize] = Some(result_of(&w, i, rel_ms, &f, &reply));
            }
        }
        let mode = engine.breaker_mode(now);
        if mode != last_mode {
            events.push(BreakerEvent {
                request: i,
                at_ms: rel_ms,
                from: last_mode,
                to: mode,
            });
            last_mode = mode;
        }
    }
    Run {
        results: results.into_iter().flatten().collect(),
        breaker: events,
        model_calls: w.model_calls,
    }
}

/// Performs `action` for request `i` at `rel_ms`: schedules what it will observe, or — for
/// actions that take no time — steps the engine again at once. Returns the reply when the
/// request is answered.
fn perform<'p>(
    engine: &mut Engine<'p>,
    w: &mut World<'_>,
    flights: &mut HashMap<u64, InFlight<'p>>,
    i: u64,
    rel_ms: u64,
    mut action: Action<'p>,
) -> Option<Reply> {
    let now = w.start.plus(rel_ms);
    loop {
        let f = flights.get_mut(&i)?;
        let (took, event) = match action {
            Action::Limit { key, .. } => {
                let allowed = w.limiter.allow(&key, now);
                action = engine.step(&mut f.flight, now, Event::Limited(Ok(allowed)));
                continue;
            }
            Action::FetchOrigin {
                timeout_ms,
                hedge_after_ms,
                prefetch,
                ..
            } => {
                // A speculative tier read is a KV read started now: a later read of its key
                // ends when it does.
                for p in prefetch {
                    f.prefetched.push((p.binding.to_string(), p.key, rel_ms));
                }
                let fault = w.sc.fault(i, f.arrival_ms);
                let call = u64::from(f.calls);
                f.attempts += 1;
                match hedge_after_ms {
                    None => {
                        w.model_calls += 1;
                        f.calls += 1;
                        let (took, observed) = origin::attempt(fault, timeout_ms, i, call);
                        (took, Event::Origin(observed))
                    }
                    Some(after) => {
                        let (took, observed, sent, won) =
                            origin::hedged(fault, timeout_ms, after, i, call);
                        let n = 1 + u32::from(sent);
                        w.model_calls += u64::from(n);
                        f.calls += n;
                        (
                            took,
                            Event::OriginHedged {
                                observed,
                                sent,
                                won,
                            },
                        )
                    }
                }
            }
            Action::Wait { ms } => (ms, Event::Woke),
            Action::ReadKv {
                binding,
                key,
                timeout_ms,
                ..
            } => {
                let started = f
                    .prefetched
                    .iter()
                    .find(|(b, k, _)| b == binding && *k == key)
                    .map_or(rel_ms, |(_, _, at)| *at);
                let latency = (started + w.sc.kv_latency_ms).saturating_sub(rel_ms);
                if latency > timeout_ms {
                    (timeout_ms, Event::Kv(KvRead::TimedOut))
                } else {
                    let got = w.kv.get(&(binding.to_string(), key));
                    (
                        latency,
                        Event::Kv(KvRead::Value {
                            value: got.map(|g| g.0.clone()),
                            metadata: got.map(|g| g.1.clone()),
                        }),
                    )
                }
            }
            Action::FetchHttp { .. } => (
                1,
                Event::Http(Observed::Connect(
                    "simulated: HTTP tiers are not modelled".into(),
                )),
            ),
            // Scenarios send no events: an event request is answered as if the outbox
            // could not be reached (`understudy drill` runs events against the real edge).
            Action::ReadBody { .. } => (0, Event::Body(Ok(Vec::new()))),
            Action::CallShards { calls } => (
                1,
                Event::Shards(
                    calls
                        .iter()
                        .map(|_| Err("simulated: the events outbox is not modelled".into()))
                        .collect(),
                ),
            ),
            Action::Respond(reply) => {
                for wr in &reply.writes {
                    w.kv.insert(
                        (wr.binding.clone(), wr.key.clone()),
                        (wr.value.clone(), wr.metadata.clone()),
                    );
                }
                return Some(*reply);
            }
        };
        f.pending = Some(event);
        w.push((rel_ms + took) * 1000, Wake::Deliver(i));
        return None;
    }
}

fn result_of(w: &World<'_>, i: u64, rel_ms: u64, f: &InFlight<'_>, reply: &Reply) -> RequestResult {
    let (source, reason) = source_of(reply.status, |h| reply.header(h).map(str::to_string));
    let fault = w.sc.fault(i, f.arrival_ms);
    RequestResult {
        index: i,
        arrival_ms: f.arrival_ms,
        latency_ms: rel_ms - f.arrival_ms,
        status: reply.status,
        source,
        reason,
        model_attempts: f.attempts,
        mode: f.mode,
        model_alone_ok: origin::alone_ok(fault, w.budget_ms, i),
    }
}

/// The scenario's `[[kv]]` entries, written `age` before its start (a published tier's,
/// validated then).
fn seed_kv(sc: &Scenario) -> Kv {
    let mut kv = Kv::new();
    for seed in &sc.kv {
        let written = (sc.start_ms as i64 - seed.age_ms).max(0) as u64;
        let items: Vec<String> = seed
            .items
            .iter()
            .map(|sku| serde_json::json!({ "sku": sku }).to_string())
            .collect();
        let (value, mut meta) = understudy_core::entry::render(&items, Millis(written));
        if seed.published {
            meta = understudy_core::entry::published_metadata(Millis(written), Millis(written));
        }
        kv.insert((seed.binding.clone(), seed.key.clone()), (value, meta));
    }
    kv
}

/// Counts per answer source, in cascade order.
pub fn tier_counts(policy: &Policy, run: &Run) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    counts.insert("origin".to_string(), 0);
    for t in &policy.cascade.tiers {
        counts.insert(t.name.clone(), 0);
    }
    for r in &run.results {
        let key = match &r.source {
            Source::Origin => "origin".to_string(),
            Source::Tier(t) => t.clone(),
            Source::Rejected(code) => format!("rejected {code}"),
            Source::Error(code) => format!("error {code}"),
        };
        *counts.entry(key).or_insert(0) += 1;
    }
    counts
}
