//! [B-SIM] `understudy simulate`: the edge's own decision core — the same `Exchange`,
//! breaker, retry and cascade code the Worker runs — replayed natively over a scenario in
//! virtual time.
//!
//! The loop is event-driven in the style of quinn's test `Pair`: a queue of wake-ups, and
//! `step` jumps to the next one. Requests overlap in time exactly as their arrivals and
//! latencies say, so the breaker sees outcomes in the order a real isolate would. Nothing
//! sleeps; a 120-second drill replays in milliseconds.

pub mod report;
pub mod scenario;

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};

use understudy_core::breaker::{Admission, Breaker, Outcome};
use understudy_core::cascade::{Ctx, KvRead};
use understudy_core::catalog::Catalog;
use understudy_core::classify::{Failure, FailureReason};
use understudy_core::deadline::Deadline;
use understudy_core::exchange::{Action, Answer, Event, Exchange, Gate};
use understudy_core::policy::Policy;
use understudy_core::request::{ParamValue, Params};
use understudy_core::retry::Backoff;
use understudy_core::writethrough::{self, WriteThrough};
use understudy_core::Millis;

use scenario::{ModelFault, Scenario};

/// How one request was answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Origin,
    Tier(String),
    /// 504 / 503 with the error envelope.
    Error(u16),
}

#[derive(Debug, Clone)]
pub struct RequestResult {
    pub index: u64,
    /// Arrival, ms after the scenario's start.
    pub arrival_ms: u64,
    pub latency_ms: u64,
    pub source: Source,
    /// `X-Degraded-Reason` for fallbacks and errors.
    pub reason: Option<&'static str>,
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

/// A tiny deterministic random source (xorshift64*), seeded per request, for retry jitter.
struct XorShift(u64);

impl XorShift {
    fn next_unit(&mut self) -> f64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        (x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
    }
}

type Ex<'p> = Exchange<'p, Backoff<'p, Box<dyn FnMut() -> f64>>>;

struct InFlight<'p> {
    exchange: Ex<'p>,
    admission: Admission,
    arrival_ms: u64,
    mode: &'static str,
    attempt_started: Millis,
    pending: Option<Event>,
}

#[derive(PartialEq, Eq, PartialOrd, Ord)]
enum Wake {
    /// Request `i` arrives.
    Arrive(u64),
    /// Request `i`'s pending event is due.
    Deliver(u64),
}

fn mode_name(b: &mut Breaker, now: Millis) -> &'static str {
    b.mode_name(now)
}

/// The params request `i` carries.
fn params_for(policy: &Policy, sc: &Scenario, i: u64) -> Params {
    let mut values = Vec::new();
    for p in &policy.params {
        let v = sc
            .param(&p.name, i)
            .map(str::to_string)
            .or_else(|| p.default.clone());
        if let Some(value) = v {
            values.push(ParamValue {
                name: p.name.clone(),
                value,
                identity: p.identity,
            });
        }
    }
    Params { values }
}

fn model_items(i: u64) -> Vec<String> {
    vec![format!("{{\"sku\":\"MODEL-{i}\",\"source\":\"model\"}}")]
}

/// The origin's answer to one attempt: (how long it takes, what the edge sees).
fn origin_answer(
    fault: ModelFault,
    timeout_ms: u64,
    i: u64,
) -> (u64, Result<Vec<String>, Failure>, bool) {
    let timeout = || {
        Failure::new(
            FailureReason::MlTimeout,
            "simulated: no answer within the attempt's timeout",
        )
    };
    match fault {
        ModelFault::Ok { latency_ms } if latency_ms <= timeout_ms => {
            (latency_ms, Ok(model_items(i)), false)
        }
        ModelFault::Hang | ModelFault::Ok { .. } => (timeout_ms, Err(timeout()), true),
        ModelFault::Status { code, latency_ms } if latency_ms <= timeout_ms => {
            let reason = if code == 408 {
                FailureReason::Ml408
            } else {
                FailureReason::Ml5xx
            };
            (
                latency_ms,
                Err(Failure::new(reason, format!("simulated: HTTP {code}"))),
                false,
            )
        }
        ModelFault::RateLimited {
            retry_after_s,
            latency_ms,
        } if latency_ms <= timeout_ms => {
            let mut f = Failure::new(FailureReason::Ml429, "simulated: HTTP 429");
            f.retry_after_s = retry_after_s;
            (latency_ms, Err(f), false)
        }
        ModelFault::Reset => (
            1.min(timeout_ms),
            Err(Failure::new(
                FailureReason::MlConnect,
                "simulated: connection reset",
            )),
            false,
        ),
        ModelFault::Malformed { latency_ms } | ModelFault::Empty { latency_ms }
            if latency_ms <= timeout_ms =>
        {
            (
                latency_ms,
                Err(Failure::new(
                    FailureReason::MlBadResponse,
                    "simulated: body not the declared shape",
                )),
                false,
            )
        }
        _ => (timeout_ms, Err(timeout()), true),
    }
}

/// Whether the model alone answers request `i` within the total budget.
fn model_alone_ok(fault: ModelFault, budget_ms: u64) -> bool {
    matches!(fault, ModelFault::Ok { latency_ms } if latency_ms <= budget_ms)
}

/// Replays `sc` against `policy` (and its baked `catalog`).
pub fn run(policy: &Policy, catalog: Option<&Catalog>, sc: &Scenario) -> Run {
    let start = Millis(sc.start_ms);
    let all_params: Vec<Params> = (0..sc.requests)
        .map(|i| params_for(policy, sc, i))
        .collect();
    let mut kv: HashMap<(String, String), (String, serde_json::Value)> = HashMap::new();
    for seed in &sc.kv {
        let written = (sc.start_ms as i64 - seed.age_ms).max(0) as u64;
        let items: Vec<String> = seed
            .items
            .iter()
            .map(|sku| serde_json::json!({ "sku": sku }).to_string())
            .collect();
        let (value, meta) = understudy_core::entry::render(&items, Millis(written));
        kv.insert((seed.binding.clone(), seed.key.clone()), (value, meta));
    }
    let mut breaker = Breaker::new(&policy.breaker);
    let mut wt = WriteThrough::new(writethrough::DEFAULT_CAPACITY);
    let mut queue: BinaryHeap<Reverse<(u64, u64, Wake)>> = BinaryHeap::new();
    let mut seq = 0u64;
    let mut push = |queue: &mut BinaryHeap<Reverse<(u64, u64, Wake)>>, at_us: u64, w: Wake| {
        seq += 1;
        queue.push(Reverse((at_us, seq, w)));
    };
    for i in 0..sc.requests {
        push(&mut queue, i * sc.interval_us, Wake::Arrive(i));
    }
    let mut flights: HashMap<u64, InFlight<'_>> = HashMap::new();
    let mut results: Vec<Option<RequestResult>> = vec![None; sc.requests as usize];
    let mut events = Vec::new();
    let mut model_calls = 0u64;
    let mut last_mode = mode_name(&mut breaker, start);

    while let Some(Reverse((at_us, _, wake))) = queue.pop() {
        let rel_ms = at_us / 1000;
        let now = start.plus(rel_ms);
        let (i, event) = match wake {
            Wake::Arrive(i) => {
                let admission = breaker.admit(now);
                let mode = mode_name(&mut breaker, now);
                let ctx = Ctx {
                    policy,
                    catalog,
                    params: &all_params[i as usize],
                    deadline: Deadline::new(now, policy.budget),
                };
                let mut rng = XorShift(0x9E37_79B9_7F4A_7C15 ^ (i + 1));
                let random: Box<dyn FnMut() -> f64> = Box::new(move || rng.next_unit());
                let exchange =
                    Exchange::with_retry(ctx, Backoff::new(&policy.origin, false, random));
                flights.insert(
                    i,
                    InFlight {
                        exchange,
                        admission,
                        arrival_ms: rel_ms,
                        mode,
                        attempt_started: now,
                        pending: None,
                    },
                );
                let gate = if admission.calls_origin() {
                    Gate::Allow
                } else {
                    Gate::Open
                };
                (i, Event::Start(gate))
            }
            Wake::Deliver(i) => match flights.get_mut(&i).and_then(|f| f.pending.take()) {
                Some(e) => (i, e),
                None => continue,
            },
        };
        let Some(flight) = flights.get_mut(&i) else {
            continue;
        };
        // Outcomes reach the breaker when they happen.
        if let Event::Origin(result) = &event {
            let latency = now.since(flight.attempt_started);
            let outcome = match result {
                Ok(_) => Outcome::success(latency),
                Err(f) if f.reason == FailureReason::MlTimeout => Outcome::timeout(latency),
                Err(_) => Outcome::failure(latency),
            };
            breaker.record(now, flight.admission, outcome);
        }
        let action = flight.exchange.step(now, event);
        let fault = sc.fault(i, flight.arrival_ms);
        match action {
            Action::FetchOrigin { timeout_ms, .. } => {
                model_calls += 1;
                flight.attempt_started = now;
                let (took, result, _) = origin_answer(fault, timeout_ms, i);
                flight.pending = Some(Event::Origin(result));
                push(&mut queue, (rel_ms + took) * 1000, Wake::Deliver(i));
            }
            Action::Wait { ms } => {
                flight.pending = Some(Event::Woke);
                push(&mut queue, (rel_ms + ms) * 1000, Wake::Deliver(i));
            }
            Action::ReadKv {
                binding,
                key,
                timeout_ms,
                ..
            } => {
                let (took, read) = if sc.kv_latency_ms > timeout_ms {
                    (timeout_ms, KvRead::TimedOut)
                } else {
                    let got = kv.get(&(binding.to_string(), key.clone()));
                    (
                        sc.kv_latency_ms,
                        KvRead::Value {
                            value: got.map(|g| g.0.clone()),
                            metadata: got.map(|g| g.1.clone()),
                        },
                    )
                };
                flight.pending = Some(Event::Kv(read));
                push(&mut queue, (rel_ms + took) * 1000, Wake::Deliver(i));
            }
            Action::FetchHttp { .. } => {
                flight.pending = Some(Event::Http(Err(Failure::new(
                    FailureReason::MlConnect,
                    "simulated: HTTP tiers are not modelled",
                ))));
                push(&mut queue, (rel_ms + 1) * 1000, Wake::Deliver(i));
            }
            Action::Respond(answer) => {
                let attempts = flight.exchange.attempts().len() as u32;
                let (source, reason) = match &answer {
                    Answer::Live { items, .. } => {
                        for w in
                            writethrough::plan(policy, &all_params[i as usize], items, now, &mut wt)
                        {
                            kv.insert((w.binding, w.key), (w.value, w.metadata));
                        }
                        (Source::Origin, None)
                    }
                    Answer::Fallback(f) => (Source::Tier(f.tier.clone()), Some(f.reason.code())),
                    Answer::Unavailable { failure, timed_out } => (
                        Source::Error(if *timed_out { 504 } else { 503 }),
                        Some(failure.reason.code()),
                    ),
                };
                results[i as usize] = Some(RequestResult {
                    index: i,
                    arrival_ms: flight.arrival_ms,
                    latency_ms: rel_ms - flight.arrival_ms,
                    source,
                    reason,
                    model_attempts: attempts,
                    mode: flight.mode,
                    model_alone_ok: model_alone_ok(fault, policy.budget.total_ms),
                });
                flights.remove(&i);
            }
        }
        let mode = mode_name(&mut breaker, now);
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
        model_calls,
    }
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
            Source::Error(code) => format!("error {code}"),
        };
        *counts.entry(key).or_insert(0) += 1;
    }
    counts
}
