//! The world a replayed engine meets: the origin and the tiers doing, at each instant, what
//! the logs saw them do then ([`observed`](super::observed)). The engine — the Worker's own,
//! driven by `simulate`'s virtual driver — decides everything else: deadlines, retries,
//! the breaker, the cascade.
//!
//! Where the logs cannot tell, the world plays one of two cases, and the replay runs both:
//! - a call cut at X ms (censored: slower than X) answers well at X + 1 ms in the **best**
//!   case and never in the **worst**; a tier read timed out at X ms is a hit at X + 1 ms
//!   (best) or never ends (worst);
//! - an instant nobody observed, between two observations that disagree, is the better of
//!   the two (best) or the worse (worst);
//! - a good answer the edge took past its attempt's due time (its timer ran late on a busy
//!   isolate; the answer may have waited in the isolate's queue) came just within the due
//!   time (best) or when it was taken (worst).
//!
//! - a write-through tier's entry written while the logs ran, when the policy replayed
//!   answered fewer requests live then than the logs did, is there (best) or not (worst)
//!   ([`tiers`]).
//!
//! A policy that waits no longer than the logged one meets the same world in both cases:
//! its timer cuts the call before X + 1 either way. Only a policy that waits longer, or
//! calls when nobody did, gets two different answers — and the replay says how many of its
//! calls did ([`Unknowable`]).

use std::collections::{HashMap, HashSet};

use serde::Serialize;
use understudy_core::classify::{FailureReason, Observed as Fetched};
use understudy_core::engine::virtual_io::World;
use understudy_core::engine::{Done, KvRead, Op, Reply};
use understudy_core::policy::{Policy, TierKind};
use understudy_core::Millis;

use super::line::{kind, Kind, Line};
use super::observed::{CallWas, Lookup, Observed, Taken, CLOCK_MS, OWN_MS};

mod tiers;

use tiers::TierIo;

/// Which way the unknowable goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Case {
    Best,
    Worst,
}

/// Calls and reads whose outcome the logs could not tell.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Unknowable {
    /// Calls to the origin that waited longer than the logs saw a call wait (censored).
    pub calls_past_censoring: u64,
    /// Calls made at an instant nobody observed, between observations that disagree.
    pub calls_unobserved: u64,
    /// Tier reads that waited past a logged timeout, or read an unobserved instant.
    pub reads: u64,
}

impl Unknowable {
    pub fn any(&self) -> bool {
        self.calls_past_censoring + self.calls_unobserved + self.reads > 0
    }
}

/// One replayed request.
pub struct Request<'l> {
    /// The logged line it replays.
    pub logged: &'l Line,
    /// Arrival, ms after the first.
    pub at_ms: u64,
}

/// A call or read the world answered, and the bound past which its answer was a guess.
#[derive(Debug, Clone, Copy)]
pub(super) enum Doubt {
    /// Censored at this many ms: an engine that waited longer met a case, not the logs.
    Past(u64),
    /// Unobserved: whatever the engine did met a case.
    Always,
}

pub struct ReplayWorld<'a> {
    obs: &'a Observed,
    case: Case,
    start: Millis,
    requests: &'a [Request<'a>],
    origin_url: String,
    /// KV binding or HTTP tier URL → the tier reading it.
    tiers_by_io: HashMap<String, TierIo>,
    /// The logged live answers by the instant they were given (ms after the first
    /// arrival): a write-through tier's entry written then was written by one of them.
    writers: HashMap<i64, Vec<usize>>,
    /// The requests the replay has answered live so far.
    replayed_live: HashSet<usize>,
    calls: Vec<u32>,
    reads: Vec<HashMap<String, u32>>,
    /// The origin's observations met so far (a request's own, or drawn for another).
    taken_calls: Taken,
    /// Each tier's observations met so far.
    taken_reads: HashMap<String, Taken>,
    /// (request, call number) → doubt, for the calls that had one.
    call_doubts: HashMap<(u64, usize), Doubt>,
    /// (request, tier, its read number) → doubt, for the reads that had one.
    read_doubts: HashMap<(u64, String, usize), Doubt>,
    pub model_calls: u64,
    /// How long the limiter took, for a request whose own line does not say: the median
    /// time logged requests took before their first call.
    limiter_ms: u64,
    /// Each request's replayed line.
    pub lines: Vec<Option<Line>>,
    /// Replies whose log line did not read back (a defect: counted, never dropped silently).
    pub unreadable: u64,
}

impl<'a> ReplayWorld<'a> {
    pub fn new(
        obs: &'a Observed,
        case: Case,
        policy: &Policy,
        start: Millis,
        requests: &'a [Request<'a>],
    ) -> ReplayWorld<'a> {
        let mut tiers_by_io = HashMap::new();
        for t in &policy.cascade.tiers {
            let io = |path, published| TierIo {
                name: t.name.clone(),
                path,
                published,
                write_through: t.kind.write_through().is_some(),
            };
            match &t.kind {
                TierKind::Kv(k) => {
                    tiers_by_io
                        .entry(k.binding.clone())
                        .or_insert(io(None, k.published));
                }
                TierKind::Http(h) => {
                    tiers_by_io
                        .entry(h.url.clone())
                        .or_insert(io(Some(h.result_path.clone()), false));
                }
                TierKind::Embedded(_) => {}
            }
        }
        let mut writers: HashMap<i64, Vec<usize>> = HashMap::new();
        for (i, r) in requests.iter().enumerate() {
            if r.logged.outcome == "live" {
                let at = (r.at_ms + r.logged.latency_ms) as i64;
                writers.entry(at).or_default().push(i);
            }
        }
        let mut before: Vec<u64> = requests
            .iter()
            .filter_map(|r| r.logged.calls.first().map(|c| c.start_ms))
            .collect();
        before.sort_unstable();
        let limiter_ms = before.get(before.len() / 2).copied().unwrap_or(0);
        ReplayWorld {
            obs,
            case,
            limiter_ms,
            start,
            requests,
            origin_url: policy.origin.url.clone(),
            tiers_by_io,
            writers,
            replayed_live: HashSet::new(),
            calls: vec![0; requests.len()],
            reads: vec![HashMap::new(); requests.len()],
            taken_calls: Taken::default(),
            taken_reads: HashMap::new(),
            call_doubts: HashMap::new(),
            read_doubts: HashMap::new(),
            model_calls: 0,
            lines: vec![None; requests.len()],
            unreadable: 0,
        }
    }

    /// The calls whose answers were one of the cases, by what the replayed lines show the
    /// engine waited for.
    pub fn unknowable(&self) -> Unknowable {
        let mut u = Unknowable::default();
        for ((i, tier, k), doubt) in &self.read_doubts {
            let waited = || {
                self.lines
                    .get(*i as usize)
                    .and_then(Option::as_ref)
                    .and_then(|l| l.tiers.iter().filter(|t| &t.tier == tier).nth(*k))
                    .map(|t| t.took_ms())
            };
            match doubt {
                Doubt::Always => u.reads += 1,
                Doubt::Past(x) => u.reads += u64::from(waited().is_some_and(|w| w > *x)),
            }
        }
        for (&(i, k), doubt) in &self.call_doubts {
            match doubt {
                Doubt::Always => u.calls_unobserved += 1,
                Doubt::Past(x) => {
                    let waited = self
                        .lines
                        .get(i as usize)
                        .and_then(Option::as_ref)
                        .and_then(|l| l.calls.get(k))
                        .map(|c| c.took_ms());
                    if waited.is_some_and(|w| w > *x) {
                        u.calls_past_censoring += 1;
                    }
                }
            }
        }
        u
    }

    /// What the origin did for call `k` of request `i`, starting `t` ms after the first
    /// arrival: the logs' (maybe one of two cases), and how sure that is.
    fn origin_at(&mut self, i: usize, k: usize, t: u64) -> (CallWas, Option<Doubt>) {
        let r = &self.requests[i];
        let offset = t.saturating_sub(r.at_ms);
        if let Some(own) = r.logged.calls.get(k).filter(|c| !c.cut_busy()) {
            if own.start_ms.abs_diff(offset) <= OWN_MS {
                let was = CallWas::of(own);
                self.obs
                    .origin
                    .take(r.at_ms + own.start_ms, &was, &mut self.taken_calls);
                return (was, censored(&was));
            }
        }
        match self.obs.origin.draw(t, key(i, k), &mut self.taken_calls) {
            Lookup::Known(CallWas::Censored { after_ms }) => {
                let after_ms = self
                    .obs
                    .origin
                    .censored_near(t)
                    .map_or(after_ms, |m| m.max(after_ms));
                let was = CallWas::Censored { after_ms };
                (was, censored(&was))
            }
            Lookup::Known(was) => (was, censored(&was)),
            Lookup::Between(a, b) => {
                let (better, worse) = if a.rank() <= b.rank() { (a, b) } else { (b, a) };
                let was = match self.case {
                    Case::Best => better,
                    Case::Worst => worse,
                };
                (was, Some(Doubt::Always))
            }
            Lookup::Unseen => (CallWas::Censored { after_ms: 0 }, Some(Doubt::Always)),
        }
    }
}

/// A call's outcome as the driver reports it, in `case`.
fn fetched(was: CallWas, case: Case, i: u64) -> Option<(u64, Fetched)> {
    Some(match was {
        CallWas::Ok { ms } => (
            ms,
            response(200, None, crate::simulate::origin::model_body(i)),
        ),
        CallWas::Failed {
            reason,
            status,
            retry_after_s,
            ms,
        } => (ms, failure(reason, status, retry_after_s)),
        CallWas::Late { by_ms, took_ms } => (
            match case {
                Case::Best => by_ms,
                Case::Worst => took_ms,
            },
            response(200, None, crate::simulate::origin::model_body(i)),
        ),
        CallWas::Censored { after_ms } => match case {
            Case::Worst => return None,
            Case::Best => (
                after_ms + CLOCK_MS + 1,
                response(200, None, crate::simulate::origin::model_body(i)),
            ),
        },
    })
}

/// What the origin sends for a failure with `reason` (and its status, when logged).
fn failure(reason: FailureReason, status: Option<u16>, retry_after_s: Option<u64>) -> Fetched {
    let status = status.unwrap_or(match reason {
        FailureReason::Ml5xx => 500,
        FailureReason::Ml429 => 429,
        FailureReason::Ml408 => 408,
        FailureReason::MlAuth => 401,
        FailureReason::Ml4xx => 400,
        _ => 0,
    });
    match reason {
        FailureReason::MlConnect => Fetched::Connect("replayed: connection failed".into()),
        FailureReason::MlBadResponse => response(200, None, b"{\"items\": [1, 2,".to_vec()),
        _ if status == 0 => Fetched::Connect("replayed: no answer".into()),
        _ => response(status, retry_after_s, Vec::new()),
    }
}

pub(super) fn response(status: u16, retry_after_s: Option<u64>, body: Vec<u8>) -> Fetched {
    Fetched::Response {
        status,
        retry_after: retry_after_s.map(|s| s.to_string()),
        body,
    }
}

fn censored(was: &CallWas) -> Option<Doubt> {
    match was {
        CallWas::Censored { after_ms } => Some(Doubt::Past(*after_ms + CLOCK_MS)),
        CallWas::Late { by_ms, .. } => Some(Doubt::Past(*by_ms)),
        _ => None,
    }
}

/// The draw among nearby observations for call `k` of request `i`.
pub(super) fn key(i: usize, k: usize) -> u64 {
    (i as u64) << 20 | k as u64
}

impl<'p> World<'p> for ReplayWorld<'_> {
    fn perform(&mut self, request: u64, now: Millis, op: &Op<'p>) -> Option<(u64, Done)> {
        let i = request as usize;
        let t = now.since(self.start);
        match op {
            // Every replayed request is a user of its own: the retry-storm limit, which
            // counts one user's retries, never refuses one. It answers after the time the
            // logged request took before its first call (the limiter's round trip), so the
            // replayed call starts when the logged one did and meets the same deadline.
            Op::Limit { .. } => {
                let before = self.requests[i]
                    .logged
                    .calls
                    .first()
                    .map_or(self.limiter_ms, |c| c.start_ms);
                Some((before, Done::Limited(Ok(true))))
            }
            Op::Fetch(o) if o.url.starts_with(&self.origin_url) => {
                let k = self.calls[i] as usize;
                self.calls[i] += 1;
                self.model_calls += 1;
                let (was, doubt) = self.origin_at(i, k, t);
                if let Some(d) = doubt {
                    self.call_doubts.insert((request, k), d);
                }
                fetched(was, self.case, request).map(|(ms, f)| (ms, Done::Fetched(f)))
            }
            Op::Fetch(o) => {
                let tier = self
                    .tiers_by_io
                    .iter()
                    .find(|(url, io)| io.path.is_some() && o.url.starts_with(url.as_str()))
                    .map(|(_, io)| io.clone());
                let Some(io) = tier else {
                    return Some((
                        1,
                        Done::Fetched(Fetched::Connect("replayed: no tier reads this URL".into())),
                    ));
                };
                let was = self.tier_at(i, &io, t);
                self.http(&io, was).map(|(ms, f)| (ms, Done::Fetched(f)))
            }
            Op::ReadKv { binding, .. } => {
                let Some(io) = self.tiers_by_io.get(*binding).cloned() else {
                    return Some((
                        0,
                        Done::Kv(KvRead::Error("replayed: no tier reads this binding".into())),
                    ));
                };
                let was = self.tier_at(i, &io, t);
                self.kv(&io, was, t).map(|(ms, r)| (ms, Done::Kv(r)))
            }
        }
    }

    fn answered(&mut self, request: u64, _now: Millis, reply: Reply) {
        match serde_json::from_str::<serde_json::Value>(&reply.log).map(|v| kind(&v)) {
            Ok(Kind::Request(l)) => {
                if l.outcome == "live" {
                    self.replayed_live.insert(request as usize);
                }
                if let Some(slot) = self.lines.get_mut(request as usize) {
                    *slot = Some(*l);
                }
            }
            _ => self.unreadable += 1,
        }
    }
}
