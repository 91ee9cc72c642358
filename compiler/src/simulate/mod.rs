//! [B-SIM] `understudy simulate`: the edge's own request engine — the very code the Worker
//! runs (`understudy_core::engine`) — driven natively over a scenario in virtual time.
//!
//! This module is a driver and holds no decision: it builds each scenario request as the
//! HTTP request a client sends ([`request::plan`], the same one `drill` sends), hands it to
//! the engine, and performs the commands the engine gives on a virtual clock: the model
//! answers as the scenario scripts it ([`origin`], raw statuses and bodies the engine
//! classifies), KV holds the scenario's entries plus what the engine writes through, the
//! rate limiter counts fixed windows ([`limiter`]). What a request's answer was is read from
//! the reply's status and headers, as a client would.
//!
//! The loop is event-driven in the style of quinn's test `Pair`: a queue of wake-ups, and
//! each step jumps to the next one. Requests overlap in time exactly as their arrivals and
//! latencies say, so the breaker sees outcomes in the order a real isolate would. Nothing
//! sleeps; a 120-second drill replays in milliseconds.

pub mod fleet;
pub mod limiter;
pub mod origin;
pub mod report;
pub mod request;
pub mod scale;
pub mod scenario;

use std::collections::{BTreeMap, HashMap};

use understudy_core::bake::Bake;
use understudy_core::breaker::member::FleetReport;
use understudy_core::catalog::Catalog;
use understudy_core::classify::Observed;
use understudy_core::engine::virtual_io::{Arrival, Virtual, World};
use understudy_core::engine::{Bindings, Done, Engine, KvRead, Op, Reply};
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
    /// The engine's log line for every request, in answer order ([`run_logged`]; empty
    /// from [`run`]).
    pub logs: Vec<String>,
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
pub(crate) struct DevBindings;

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

/// The scenario's world as the virtual driver performs it: the model answers as the
/// scenario scripts it ([`origin`]), KV holds the scenario's entries plus what the engine
/// writes through and answers after the scenario's KV latency, the rate limiter counts
/// fixed windows ([`limiter`]). It decides nothing: the engine times out, hedges, retries.
pub(crate) struct ScenarioWorld<'s> {
    sc: &'s Scenario,
    start: Millis,
    origin_url: &'s str,
    kv: Kv,
    limiter: limiter::Limiter,
    model_calls: u64,
    budget_ms: u64,
    /// Per request: arrival (ms and µs after the start), calls made to the model so far.
    arrivals: Vec<u64>,
    arrivals_us: Vec<u64>,
    calls: Vec<u32>,
    results: Vec<Option<RequestResult>>,
    /// The breaker's mode when each request arrived (filled by the run loop).
    modes: Vec<&'static str>,
    /// Model calls made while the scenario's model was faulty.
    outage_calls: u64,
    /// Calls to the breaker's coordinators the replies carried, and those requests asked
    /// with (`Command::Ask`).
    reports: Vec<Sent>,
    /// When the replies asked to be woken for the breaker's coordinator (`fleet_wake`):
    /// (request, when).
    wakes: Vec<(u64, Millis)>,
    /// The replies' log lines, when kept.
    logs: Option<Vec<String>>,
    /// In a fleet run with regions: each request's region (an index into `region_names`).
    pub(crate) request_region: Vec<u16>,
    pub(crate) region_names: Vec<String>,
}

/// A call to a breaker's coordinator an isolate handed out: with request `request`'s answer
/// (or, `ask`, with its first model call), at `at`.
pub(crate) struct Sent {
    pub request: u64,
    pub at: Millis,
    pub call: FleetReport,
    pub ask: bool,
}

impl ScenarioWorld<'_> {
    /// The region request `i` is served in, when the run has regions.
    fn region(&self, i: usize) -> Option<&str> {
        let r = *self.request_region.get(i)?;
        self.region_names.get(usize::from(r)).map(String::as_str)
    }
}

impl<'p> World<'p> for ScenarioWorld<'_> {
    fn perform(&mut self, request: u64, now: Millis, op: &Op<'p>) -> Option<(u64, Done)> {
        let i = request as usize;
        match op {
            Op::Limit { key, .. } => Some((0, Done::Limited(Ok(self.limiter.allow(key, now))))),
            Op::Fetch(o) if o.url.starts_with(self.origin_url) => {
                // The model is faulty for stretches of time: a call meets the fault of when
                // it is made (a retry or a hedge may fall in another phase than its first).
                // A first attempt is made at its request's arrival, to the µs.
                let t_us = (now.since(self.start) * 1000).max(self.arrivals_us[i]);
                let fault = self.sc.fault_at_in(t_us, self.region(i));
                let call = u64::from(self.calls[i]);
                self.calls[i] += 1;
                self.model_calls += 1;
                if !matches!(fault, scenario::ModelFault::Ok { latency_ms } if latency_ms <= self.sc.model_latency_ms)
                {
                    self.outage_calls += 1;
                }
                origin::attempt(fault, request, call).map(|(ms, o)| (ms, Done::Fetched(o)))
            }
            Op::Fetch(_) => Some((
                1,
                Done::Fetched(Observed::Connect(
                    "simulated: HTTP tiers are not modelled".into(),
                )),
            )),
            Op::ReadKv { binding, key } => {
                let got = self.kv.get(&(binding.to_string(), key.clone()));
                Some((
                    self.sc.kv_latency_ms,
                    Done::Kv(KvRead::Value {
                        value: got.map(|g| g.0.clone()),
                        metadata: got.map(|g| g.1.clone()),
                    }),
                ))
            }
        }
    }

    fn ask(&mut self, request: u64, now: Millis, call: FleetReport) {
        self.reports.push(Sent {
            request,
            at: now,
            call,
            ask: true,
        });
    }

    fn answered(&mut self, request: u64, now: Millis, reply: Reply) {
        if let Some(logs) = &mut self.logs {
            logs.push(reply.log.clone());
        }
        for r in &reply.fleet {
            self.reports.push(Sent {
                request,
                at: now,
                call: r.clone(),
                ask: false,
            });
        }
        if let Some(at) = reply.fleet_wake {
            self.wakes.push((request, at));
        }
        for wr in &reply.writes {
            self.kv.insert(
                (wr.binding.clone(), wr.key.clone()),
                (wr.value.clone(), wr.metadata.clone()),
            );
        }
        let i = request as usize;
        let (source, reason) = source_of(reply.status, |h| reply.header(h).map(str::to_string));
        let arrival_ms = self.arrivals[i];
        let fault = self.sc.fault_in(request, arrival_ms, self.region(i));
        // The engine's own count of the request's origin attempts, from its log line.
        let attempts = serde_json::from_str::<serde_json::Value>(&reply.log)
            .ok()
            .and_then(|l| l["attempts"].as_u64())
            .unwrap_or(0) as u32;
        self.results[i] = Some(RequestResult {
            index: request,
            arrival_ms,
            latency_ms: now.since(self.start).saturating_sub(arrival_ms),
            status: reply.status,
            source,
            reason,
            model_attempts: attempts,
            mode: self.modes.get(i).copied().unwrap_or(""),
            model_alone_ok: origin::alone_ok(fault, self.budget_ms, request),
        });
    }
}

/// The bake `simulate` runs `policy` (and its baked `catalog`) as.
pub(crate) fn bake(policy: &Policy, catalog: Option<&Catalog>, sc: &Scenario) -> Bake {
    Bake {
        release_id: "simulate".into(),
        policy_hash: String::new(),
        catalog_hash: String::new(),
        validated_at_ms: sc.start_ms,
        compiler_version: crate::dist::COMPILER_VERSION.into(),
        policy: policy.clone(),
        catalog: catalog.cloned(),
    }
}

/// The scenario's world, and its requests as the clients send them.
pub(crate) fn setup<'s>(
    policy: &'s Policy,
    sc: &'s Scenario,
) -> (ScenarioWorld<'s>, Vec<request::Planned>) {
    let start = Millis(sc.start_ms);
    let (limit, period) = policy.storm.as_ref().map_or((u32::MAX, 1), |s| {
        (understudy_core::storm::limit(s), s.window_ms)
    });
    let mut tokens = BTreeMap::new();
    let plans: Vec<request::Planned> = (0..sc.requests)
        .map(|i| request::plan(policy, sc, i, &mut tokens, sc.start_ms / 1000))
        .collect();
    let n = sc.requests as usize;
    let world = ScenarioWorld {
        sc,
        start,
        origin_url: &policy.origin.url,
        kv: seed_kv(sc),
        limiter: limiter::Limiter::new(limit, period),
        model_calls: 0,
        budget_ms: policy.budget.total_ms,
        arrivals: plans.iter().map(|p| p.due_us / 1000).collect(),
        arrivals_us: plans.iter().map(|p| p.due_us).collect(),
        calls: vec![0; n],
        results: vec![None; n],
        modes: vec![""; n],
        outage_calls: 0,
        reports: Vec::new(),
        wakes: Vec::new(),
        logs: None,
        request_region: Vec::new(),
        region_names: Vec::new(),
    };
    (world, plans)
}

/// Request `p` as the virtual driver delivers it.
pub(crate) fn arrival(p: &request::Planned) -> Arrival {
    let (path, query) = p.path_and_query();
    Arrival {
        method: p.method.clone(),
        path: path.to_string(),
        query: query.to_string(),
        headers: p.headers.clone(),
        seed: p.index + 1,
    }
}

/// Replays `sc` against `policy` (and its baked `catalog`).
pub fn run(policy: &Policy, catalog: Option<&Catalog>, sc: &Scenario) -> Run {
    drive(policy, catalog, sc, false)
}

/// [`run`], keeping every request's log line (the edge's, as a Worker prints it: what
/// `understudy replay` reads).
pub fn run_logged(policy: &Policy, catalog: Option<&Catalog>, sc: &Scenario) -> Run {
    drive(policy, catalog, sc, true)
}

fn drive(policy: &Policy, catalog: Option<&Catalog>, sc: &Scenario, keep_logs: bool) -> Run {
    let bake = bake(policy, catalog, sc);
    let Ok(mut engine) = Engine::new(&bake) else {
        // The compiler refuses such a policy; nothing can be answered.
        return Run {
            results: Vec::new(),
            breaker: Vec::new(),
            model_calls: 0,
            logs: Vec::new(),
        };
    };
    let start = Millis(sc.start_ms);
    let (mut world, plans) = setup(policy, sc);
    world.logs = keep_logs.then(Vec::new);
    let n = sc.requests as usize;
    let mut v = Virtual::new();
    for p in &plans {
        v.arrive(sc.start_ms * 1000 + p.due_us, p.index, arrival(p));
    }
    let mut events = Vec::new();
    let mut last_mode = engine.breaker_mode(start);
    let mut seen = vec![false; n];
    while let Some(stepped) = v.step(&mut engine, &DevBindings, &mut world) {
        let now = stepped.at;
        let i = stepped.request;
        let mode = engine.breaker_mode(now);
        if let Some(s) = seen.get_mut(i as usize).filter(|s| !**s) {
            // The request's first step is its arrival: the mode it met.
            *s = true;
            world.modes[i as usize] = mode;
            if let Some(Some(r)) = world.results.get_mut(i as usize) {
                r.mode = mode;
            }
        }
        if mode != last_mode {
            events.push(BreakerEvent {
                request: i,
                at_ms: now.since(start),
                from: last_mode,
                to: mode,
            });
            last_mode = mode;
        }
    }
    Run {
        results: world.results.into_iter().flatten().collect(),
        breaker: events,
        model_calls: world.model_calls,
        logs: world.logs.unwrap_or_default(),
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
