//! What the origin remembers: the script, the live override, the request counter and the
//! statistics tests read to prove what the edge did (how many calls reached the model, which
//! were abandoned by the client, which headers they carried).
//!
//! One mutex guards it all; it is never held across an `.await`, and every critical section
//! is a few field updates.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use hyper::http::request::Parts;
use serde::{Deserialize, Serialize};

use super::fault::Behavior;
use super::script::Script;

/// How many recent requests [`Stats::recent`] keeps by default.
pub const DEFAULT_RECENT: usize = 100;
/// Header values longer than this are cut in the records (they are for eyes and asserts).
const MAX_HEADER_CHARS: usize = 200;
/// Bins of [`Shared::served_histogram`]: one per millisecond, the last for everything slower.
pub const SERVED_BINS: usize = 1024;

/// A snapshot of what the origin has seen since start or the last reset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    /// Model requests received (control requests are not counted).
    pub requests: u64,
    /// Model requests per fault kind (`healthy`, `status`, `hang`, …).
    pub by_fault: BTreeMap<String, u64>,
    /// Answers sent in full.
    pub completed: u64,
    /// Requests whose client went away before the answer was complete: the proof that the
    /// edge abandoned (aborted) a call.
    pub disconnected: u64,
    /// Connections the origin reset on purpose (`reset` fault).
    pub resets: u64,
    /// Requests still being answered (or hanging).
    pub in_flight: u64,
    /// The live override set through the control API, if any.
    #[serde(rename = "override")]
    pub override_behavior: Option<Behavior>,
    /// Milliseconds since start or the last reset (the script's clock).
    pub elapsed_ms: u64,
    /// The most recent requests, oldest first.
    pub recent: Vec<RequestRecord>,
}

/// One model request as the origin saw it. The credential itself is never recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestRecord {
    /// The request number (1-based), as the script sees it.
    pub n: u64,
    pub method: String,
    pub path: String,
    pub query: Option<String>,
    /// The `X-Correlation-ID` header.
    pub correlation_id: Option<String>,
    /// Whether an `Authorization` header was present (its value is not kept).
    pub auth: bool,
    /// The `Idempotency-Key` header.
    pub idempotency_key: Option<String>,
    /// The fault kind this request got.
    pub fault: String,
    pub outcome: Outcome,
}

/// How a model request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Still being answered.
    Pending,
    /// The whole answer was handed to the connection.
    Completed,
    /// The client went away first.
    Disconnected,
    /// The origin reset the connection on purpose.
    Reset,
}

pub(crate) struct Shared {
    inner: Mutex<State>,
    /// The event consumer and its side-effect ledger (`/__events/…`).
    pub(crate) consumer: super::consumer::Consumer,
}

struct State {
    script: Script,
    override_behavior: Option<Behavior>,
    base_latency: Duration,
    started: Instant,
    /// Bumped by a counter reset, so requests begun before it do not count after it.
    epoch: u64,
    next_n: u64,
    requests: u64,
    by_fault: BTreeMap<String, u64>,
    completed: u64,
    disconnected: u64,
    resets: u64,
    in_flight: u64,
    recent: VecDeque<RequestRecord>,
    recent_cap: usize,
    /// Calls seen per drill request (`drill-<i>` correlation IDs).
    calls: HashMap<u64, u64>,
    /// Answers sent in full, by how long they took (ms from arrival to the last byte handed
    /// to the connection): the origin's own view of its latency, scheduling delays included.
    served: Box<[u64; SERVED_BINS]>,
}

/// What one model request should do, decided when it arrives.
pub(crate) struct Plan {
    pub n: u64,
    pub behavior: Behavior,
    pub base_latency: Duration,
    /// For a drill's request (`X-Correlation-ID: drill-<i>`): its index and which of its
    /// calls this is (attempts and hedges count, from 0), so a `bimodal` model draws what
    /// `understudy simulate` draws for the same call
    /// (`understudy_compiler::simulate::origin::draw`).
    pub call: Option<(u64, u64)>,
}

/// Calls remembered per correlation ID; past it the count starts over.
const MAX_CALLERS: usize = 100_000;

impl Shared {
    pub(crate) fn new(script: Script, base_latency: Duration, recent_cap: usize) -> Arc<Self> {
        Arc::new(Shared {
            consumer: super::consumer::Consumer::default(),
            inner: Mutex::new(State {
                script,
                override_behavior: None,
                base_latency,
                started: Instant::now(),
                epoch: 0,
                next_n: 1,
                requests: 0,
                by_fault: BTreeMap::new(),
                completed: 0,
                disconnected: 0,
                resets: 0,
                in_flight: 0,
                recent: VecDeque::new(),
                recent_cap,
                calls: HashMap::new(),
                served: Box::new([0; SERVED_BINS]),
            }),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the counters half-updated in a way
        // that matters more than losing the origin, so a poisoned lock is used as is.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Numbers and records a model request, chooses its behaviour, and returns the tracker
    /// that records how it ends.
    pub(crate) fn begin(self: &Arc<Self>, parts: &Parts) -> (Plan, Tracker) {
        let mut s = self.lock();
        let n = s.next_n;
        s.next_n += 1;
        let behavior = match &s.override_behavior {
            Some(b) => b.clone(),
            None => s.script.select(n, s.started.elapsed()).clone(),
        };
        let kind = behavior.fault.kind();
        s.requests += 1;
        s.in_flight += 1;
        *s.by_fault.entry(kind.to_string()).or_insert(0) += 1;
        let record = RequestRecord {
            n,
            method: parts.method.to_string(),
            path: parts.uri.path().to_string(),
            query: parts.uri.query().map(clip),
            correlation_id: header(parts, "x-correlation-id"),
            auth: parts.headers.contains_key(hyper::header::AUTHORIZATION),
            idempotency_key: header(parts, "idempotency-key"),
            fault: kind.to_string(),
            outcome: Outcome::Pending,
        };
        if s.recent_cap > 0 {
            while s.recent.len() >= s.recent_cap {
                s.recent.pop_front();
            }
            s.recent.push_back(record);
        }
        let call = header(parts, "x-correlation-id")
            .and_then(|c| c.strip_prefix("drill-").and_then(|i| i.parse::<u64>().ok()))
            .map(|i| {
                if s.calls.len() >= MAX_CALLERS {
                    s.calls.clear();
                }
                let c = s.calls.entry(i).or_insert(0);
                *c += 1;
                (i, *c - 1)
            });
        let plan = Plan {
            n,
            behavior,
            base_latency: s.base_latency,
            call,
        };
        let tracker = Tracker {
            shared: Arc::clone(self),
            n,
            epoch: s.epoch,
            began: Instant::now(),
            done: false,
        };
        (plan, tracker)
    }

    fn finish(&self, n: u64, epoch: u64, outcome: Outcome, took: Duration) {
        let mut s = self.lock();
        if s.epoch != epoch {
            return;
        }
        s.in_flight = s.in_flight.saturating_sub(1);
        match outcome {
            Outcome::Completed => {
                s.completed += 1;
                let ms = usize::try_from(took.as_millis()).unwrap_or(usize::MAX);
                s.served[ms.min(SERVED_BINS - 1)] += 1;
            }
            Outcome::Disconnected => s.disconnected += 1,
            Outcome::Reset => s.resets += 1,
            Outcome::Pending => {}
        }
        if let Some(r) = s.recent.iter_mut().rev().find(|r| r.n == n) {
            r.outcome = outcome;
        }
    }

    pub(crate) fn set_override(&self, behavior: Option<Behavior>) {
        self.lock().override_behavior = behavior;
    }

    /// Answers sent in full since start (a counter reset does not clear it), by the
    /// milliseconds they took: index `i` counts answers of `i` ms, the last bin everything
    /// slower. Two snapshots' difference is a phase's.
    pub(crate) fn served_histogram(&self) -> Vec<u64> {
        self.lock().served.to_vec()
    }

    pub(crate) fn set_base_latency(&self, latency: Duration) {
        self.lock().base_latency = latency;
    }

    /// Zeroes the counters, restarts request numbering at 1 and the script's clock at 0.
    pub(crate) fn reset_counters(&self) {
        let mut s = self.lock();
        s.epoch += 1;
        s.calls.clear();
        s.started = Instant::now();
        s.next_n = 1;
        s.requests = 0;
        s.by_fault.clear();
        s.completed = 0;
        s.disconnected = 0;
        s.resets = 0;
        s.in_flight = 0;
        s.recent.clear();
    }

    pub(crate) fn stats(&self) -> Stats {
        let s = self.lock();
        Stats {
            requests: s.requests,
            by_fault: s.by_fault.clone(),
            completed: s.completed,
            disconnected: s.disconnected,
            resets: s.resets,
            in_flight: s.in_flight,
            override_behavior: s.override_behavior.clone(),
            elapsed_ms: u64::try_from(s.started.elapsed().as_millis()).unwrap_or(u64::MAX),
            recent: s.recent.iter().cloned().collect(),
        }
    }
}

fn header(parts: &Parts, name: &str) -> Option<String> {
    parts
        .headers
        .get(name)
        .map(|v| clip(&String::from_utf8_lossy(v.as_bytes())))
}

fn clip(s: &str) -> String {
    s.chars().take(MAX_HEADER_CHARS).collect()
}

/// Records how one model request ends. Dropped without [`Tracker::finish`] — because hyper
/// dropped the request's future or body when the client went away — it records
/// [`Outcome::Disconnected`].
pub(crate) struct Tracker {
    shared: Arc<Shared>,
    n: u64,
    epoch: u64,
    began: Instant,
    done: bool,
}

impl Tracker {
    pub(crate) fn finish(&mut self, outcome: Outcome) {
        if !self.done {
            self.done = true;
            self.shared
                .finish(self.n, self.epoch, outcome, self.began.elapsed());
        }
    }
}

impl Drop for Tracker {
    fn drop(&mut self) {
        self.finish(Outcome::Disconnected);
    }
}

#[cfg(test)]
mod tests {
    use super::super::fault::Fault;
    use super::*;

    fn parts(path: &str) -> Parts {
        let (parts, ()) = hyper::Request::builder()
            .method("POST")
            .uri(path)
            .header("x-correlation-id", "corr-1")
            .header("authorization", "Bearer secret-value")
            .header("idempotency-key", "idem-9")
            .body(())
            .unwrap()
            .into_parts();
        parts
    }

    #[test]
    fn records_headers_but_not_the_credential() {
        let shared = Shared::new(Script::constant(Behavior::healthy()), Duration::ZERO, 2);
        let (plan, mut t) = shared.begin(&parts("/v1/recs?user=7"));
        assert_eq!(plan.n, 1);
        t.finish(Outcome::Completed);
        let stats = shared.stats();
        let r = &stats.recent[0];
        assert_eq!(r.correlation_id.as_deref(), Some("corr-1"));
        assert_eq!(r.idempotency_key.as_deref(), Some("idem-9"));
        assert_eq!(r.query.as_deref(), Some("user=7"));
        assert!(r.auth);
        assert_eq!(r.outcome, Outcome::Completed);
        assert!(!serde_json::to_string(&stats)
            .unwrap()
            .contains("secret-value"));
    }

    #[test]
    fn served_histogram_counts_completed_answers_by_their_milliseconds() {
        let shared = Shared::new(Script::constant(Behavior::healthy()), Duration::ZERO, 2);
        let (_plan, mut t) = shared.begin(&parts("/"));
        std::thread::sleep(Duration::from_millis(12));
        t.finish(Outcome::Completed);
        let (_plan, t) = shared.begin(&parts("/"));
        drop(t); // disconnected: not an answer
        let h = shared.served_histogram();
        assert_eq!(h.len(), SERVED_BINS);
        assert_eq!(h.iter().sum::<u64>(), 1);
        let bin = h.iter().position(|&c| c == 1).unwrap();
        assert!((12..200).contains(&bin), "took {bin} ms");
    }

    #[test]
    fn dropped_tracker_counts_as_disconnected_and_recent_is_bounded() {
        let shared = Shared::new(Script::constant(Behavior::healthy()), Duration::ZERO, 2);
        for _ in 0..3 {
            let (_plan, t) = shared.begin(&parts("/"));
            drop(t);
        }
        let stats = shared.stats();
        assert_eq!(
            (stats.requests, stats.disconnected, stats.in_flight),
            (3, 3, 0)
        );
        assert_eq!(
            stats.recent.iter().map(|r| r.n).collect::<Vec<_>>(),
            vec![2, 3]
        );
    }

    #[test]
    fn override_wins_and_reset_restarts_numbering() {
        let shared = Shared::new(Script::constant(Behavior::healthy()), Duration::ZERO, 10);
        shared.set_override(Some(Behavior::new(Fault::Hang)));
        let (plan, old) = shared.begin(&parts("/"));
        assert_eq!(plan.behavior.fault, Fault::Hang);
        shared.reset_counters();
        drop(old); // begun before the reset: not counted after it
        shared.set_override(None);
        let (plan, _t) = shared.begin(&parts("/"));
        assert_eq!((plan.n, plan.behavior.fault), (1, Fault::Healthy));
        let stats = shared.stats();
        assert_eq!((stats.requests, stats.disconnected), (1, 0));
        assert_eq!(stats.by_fault.get("healthy"), Some(&1));
    }
}
