//! [F-SCOPE] The fleet's breaker, sans I/O (ADR 011): what the coordinator — a Durable
//! Object per service, settings and region ([`place`]), off every request's path — does with
//! the isolates' reports, and the verdict it answers with; a region's coordinator merges its
//! window into the global one (`fleet/region.rs`). The Durable Object and `simulate --isolates` both
//! drive this one struct; neither decides anything itself.
//!
//! A report carries the isolate's **absolute** counts per bucket of its window (calls,
//! failures, timeouts, calls slower than `slow_call_p95`, and the probes'), not deltas: a
//! lost or repeated report cannot double count, and a late one (an older `seq`) is ignored.
//! The fleet's window is the sum, over isolates heard within a window, of each one's latest
//! counts per bucket. On it the coordinator applies seed 000's rules with the same
//! thresholds and the same evidence rule for slowness ([`super::rate::p95_exceeded`]) as an
//! isolate's breaker ([`super::rate::Rate`]); probes are pooled across the fleet, so the
//! fleet's 2% decides in under a second what one thin isolate's 2% takes minutes to.
//!
//! Every verdict carries when it was issued and when it expires (three report intervals
//! later): an isolate applies only an unexpired one, so a coordinator that stops answering
//! can never hold the fleet open.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use super::rate::p95_exceeded;
use super::window::BUCKETS;
use crate::policy::RateBreaker;
use crate::time::Millis;

/// The coordinator's Durable Object class, exported by the Worker (`understudy build`
/// declares it and its SQLite migration when a policy's breaker is fleet-scoped).
pub const CLASS: &str = "BreakerCoordinator";

/// Most isolates one coordinator keeps (ADR 011's budget is 5,000 a region at most).
pub const MAX_ISOLATES: usize = 20_000;
/// Most buckets a report may carry (the window's, and one being filled).
const MAX_BUCKETS: usize = BUCKETS + 1;

/// The hash a report names: of the breaker's settings and of the policy they come from
/// (`Bake::policy_hash`, the policy source's). Isolates running another policy — the other
/// release of a gradual rollout, even one that changes only the deadline — report to
/// another coordinator, so a canary's failures never open the breaker of the release it is
/// judged against. Releases of one policy with other catalogs (a nightly re-bake) share it.
pub fn settings_hash(cfg: &RateBreaker, policy_hash: &str) -> String {
    use sha2::{Digest, Sha256};
    let mut bytes = postcard::to_allocvec(cfg).unwrap_or_default();
    bytes.extend_from_slice(policy_hash.as_bytes());
    hex::encode(&Sha256::digest(&bytes)[..8])
}

/// One bucket of an isolate's window, as the isolate counted it so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Counts {
    /// The bucket: `time / (window / BUCKETS)`, on the isolate's clock.
    pub epoch: u64,
    pub calls: u32,
    pub failures: u32,
    pub timeouts: u32,
    /// Calls slower than `slow_call_p95`.
    pub slow: u32,
    /// Probe calls, and those that succeeded within `slow_call_p95` (a probe that did not
    /// aborts probing, seed 000); `probe_slow`: probes slower than `probe_p95`.
    pub probes: u32,
    pub probe_ok: u32,
    pub probe_slow: u32,
}

impl Counts {
    /// Adds `other`'s counts to these (or takes them away), saturating; the epoch stays.
    fn merge(&mut self, other: &Counts, plus: bool) {
        let f = |x: &mut u32, v: u32| {
            *x = if plus {
                x.saturating_add(v)
            } else {
                x.saturating_sub(v)
            }
        };
        f(&mut self.calls, other.calls);
        f(&mut self.failures, other.failures);
        f(&mut self.timeouts, other.timeouts);
        f(&mut self.slow, other.slow);
        f(&mut self.probes, other.probes);
        f(&mut self.probe_ok, other.probe_ok);
        f(&mut self.probe_slow, other.probe_slow);
    }
}

/// An isolate's report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Report {
    pub service: String,
    /// A hash of the breaker's settings: isolates with other settings (another release in a
    /// gradual rollout) are refused, not merged.
    pub config: String,
    /// The isolate's random ID, and the report's number from it (increasing).
    pub isolate: String,
    pub seq: u64,
    pub buckets: Vec<Counts>,
    /// The period the isolate reports at now (the coordinator's pace or heartbeat; 0: the
    /// report interval): the report stands for that much of the fleet in the recent sample.
    #[serde(default)]
    pub period_ms: u64,
}

/// The fleet's mode, as a verdict states it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum FleetMode {
    Closed,
    Open,
    Probing,
}

/// What the coordinator answers a report with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub mode: FleetMode,
    /// The evidence it stands on: the fleet window's totals (or the probes' while probing).
    pub calls: u32,
    pub failures: u32,
    pub slow: u32,
    pub probes: u32,
    pub probe_ok: u32,
    /// Isolates heard within the window.
    pub isolates: usize,
    pub issued_at: u64,
    pub expires_at: u64,
    /// When the fleet last opened, and when probing began — for a closed verdict, when the
    /// probing that closed it began: an isolate that opened on its own evidence before then
    /// recovers with the fleet, one that opened after keeps its own mode.
    pub opened_at: Option<u64>,
    pub probing_since: Option<u64>,
    /// The report period asked of an isolate with something to tell, and the heartbeat of
    /// a healthy one (0: the policy's interval and ten of them), set by how many isolates
    /// the coordinator keeps ([`sample::pace_ms`]).
    #[serde(default)]
    pub pace_ms: u64,
    #[serde(default)]
    pub heartbeat_ms: u64,
    /// The isolate whose reports alone make the fleet's window, when one does and no global
    /// verdict is heard (a fleet of one): the verdict holds nothing its own breaker does not
    /// know a report sooner, and that breaker decides ([`super::member`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sole: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
enum State {
    Closed,
    Open { since: Millis, until: Millis },
    Probing { since: Millis, opened: Millis },
}

#[derive(Debug)]
struct Isolate {
    seq: u64,
    heard: Millis,
    buckets: Vec<Counts>,
}

/// The coordinator's state: soft, rebuilt from reports after a restart.
#[derive(Debug)]
pub struct Coordinator {
    service: String,
    config: String,
    cfg: RateBreaker,
    report_interval_ms: u64,
    state: State,
    /// Buckets before this epoch do not count (the window starts afresh after a recovery).
    fresh_from: u64,
    isolates: HashMap<String, Isolate>,
    /// The sum of every kept isolate's counts, per bucket: a report costs O(its buckets),
    /// not O(isolates) (ADR 011's budget: hundreds of reports a second per coordinator).
    sums: BTreeMap<u64, Counts>,
    /// When silent isolates were last swept out (at most once per report interval).
    swept: Millis,
    /// When the probing that last closed the fleet began: a closed verdict names it, and an
    /// isolate whose own opening is older recovers with the fleet.
    recovered_from: Option<Millis>,
    /// Whether the last verdict was `CLOSED`, and whether that flipped since
    /// [`Coordinator::moved`] was last asked (the watches to answer).
    closed: bool,
    moved: bool,
    /// The reports of the last interval, weighted ([`sample`]).
    recent: Sample,
    /// A regional coordinator's last verdict from the global one ([`region`]).
    global: Option<Verdict>,
    /// A region passing on the global verdict's opening: when that verdict's probing began
    /// (if it had). Its isolates adopted the opening; when the region stops following, its
    /// closed verdict names a recovery so that they let it go.
    following: Option<Option<u64>>,
    /// Until when, and how many isolates, the fleet resumed from a snapshot kept ([`snapshot`]).
    resumed_fleet: Option<(Millis, usize)>,
}

impl Coordinator {
    pub fn new(service: &str, config: &str, cfg: RateBreaker, report_interval_ms: u64) -> Self {
        Coordinator {
            service: service.to_string(),
            config: config.to_string(),
            cfg,
            report_interval_ms: report_interval_ms.max(1),
            state: State::Closed,
            fresh_from: 0,
            isolates: HashMap::new(),
            sums: BTreeMap::new(),
            swept: Millis(0),
            recovered_from: None,
            closed: true,
            moved: false,
            recent: Sample::default(),
            global: None,
            following: None,
            resumed_fleet: None,
        }
    }

    /// Whether the fleet opened or closed since the last call: the driver then answers every
    /// watch it holds with the verdict it just gave. Probing is no move: an isolate the fleet
    /// opened stays open through it (the fleet's probes come from the isolates that report
    /// often), and its watch stays held for the close — probing may last 67 ms, too short
    /// for a thin isolate to watch again in between.
    pub fn moved(&mut self) -> bool {
        std::mem::take(&mut self.moved)
    }

    fn bucket_ms(&self) -> u64 {
        (self.cfg.window_ms / BUCKETS as u64).max(1)
    }

    /// Parses a report's JSON; every problem is a [`Refusal::Malformed`] naming it.
    pub fn parse(text: &str) -> Result<Report, Refusal> {
        serde_json::from_str(text).map_err(|e| Refusal::Malformed(e.to_string()))
    }

    /// Merges `report` at `now` and answers with the fleet's verdict.
    pub fn report(&mut self, now: Millis, report: Report) -> Result<Verdict, Refusal> {
        if report.service != self.service {
            return Err(Refusal::OtherService(report.service));
        }
        if report.config != self.config {
            return Err(Refusal::OtherConfig(report.config));
        }
        if report.buckets.len() > MAX_BUCKETS {
            return Err(Refusal::TooManyBuckets(report.buckets.len()));
        }
        self.forget_silent(now);
        let full = self.isolates.len() >= MAX_ISOLATES;
        match self.isolates.get_mut(&report.isolate) {
            Some(known) if report.seq <= known.seq => known.heard = now,
            None if full => return Err(Refusal::Full),
            _ => {
                let span = self.report_interval_ms;
                let who = (report.isolate.as_str(), report.seq);
                let period = (report.period_ms, span);
                self.recent.heard(now, who, &report.buckets, period);
                for b in &report.buckets {
                    self.add(b, true);
                }
                let new = Isolate {
                    seq: report.seq,
                    heard: now,
                    buckets: report.buckets,
                };
                if let Some(old) = self.isolates.insert(report.isolate, new) {
                    for b in &old.buckets {
                        self.add(b, false);
                    }
                }
            }
        }
        Ok(self.verdict(now))
    }

    /// Adds (or takes away) one isolate's bucket to the fleet's sums.
    fn add(&mut self, b: &Counts, plus: bool) {
        let sum = self.sums.entry(b.epoch).or_insert(Counts {
            epoch: b.epoch,
            ..Counts::default()
        });
        sum.merge(b, plus);
    }

    /// Isolates silent for a whole window no longer count; buckets older than the window
    /// are dropped from the sums. At most once per report interval.
    fn forget_silent(&mut self, now: Millis) {
        if now.since(self.swept) < self.report_interval_ms && self.swept.0 != 0 {
            return;
        }
        self.swept = now;
        let window = self.cfg.window_ms;
        let silent: Vec<String> = self
            .isolates
            .iter()
            .filter(|(_, i)| now.since(i.heard) >= window)
            .map(|(k, _)| k.clone())
            .collect();
        for k in silent {
            if let Some(i) = self.isolates.remove(&k) {
                for b in &i.buckets {
                    self.add(b, false);
                }
            }
        }
        let oldest = (now.0 / self.bucket_ms()).saturating_sub(BUCKETS as u64);
        self.sums.retain(|e, _| *e >= oldest);
    }

    /// The fleet window's totals at `now`: buckets inside the window and not before
    /// `fresh_from`, summed over isolates.
    fn totals(&self, now: Millis, from_epoch: u64) -> Counts {
        let current = now.0 / self.bucket_ms();
        let oldest = current.saturating_sub(BUCKETS as u64 - 1).max(from_epoch);
        let mut t = Counts::default();
        for (_, b) in self.sums.range(oldest..=current + 1) {
            t.merge(b, true);
        }
        t
    }

    /// Applies what the evidence and time say, and states the result.
    pub fn verdict(&mut self, now: Millis) -> Verdict {
        let bucket_ms = self.bucket_ms();
        let epoch_of = |m: Millis| m.0 / bucket_ms;
        self.recover_with_global(now);
        // One isolate's reports alone, and no word from the other regions (the global
        // verdict may open or close this one on theirs).
        let alone = self.isolates.len() == 1
            && self.global.as_ref().is_none_or(|g| now.0 >= g.expires_at)
            && self.resumed_fleet(now) <= 1;
        if let State::Open { since, until } = self.state {
            if now >= until {
                self.state = State::Probing {
                    since: now,
                    opened: since,
                };
            }
        }
        let t = match self.state {
            State::Closed => {
                let t = self.totals(now, self.fresh_from);
                let trips = t.calls >= self.cfg.min_calls.max(1)
                    && (f64::from(t.failures) >= self.cfg.failure_ratio * f64::from(t.calls)
                        || p95_exceeded(t.slow, t.calls));
                if trips || self.sample_trips(now) {
                    self.state = State::Open {
                        since: now,
                        until: now.plus(self.cfg.hold_down_ms),
                    };
                }
                t
            }
            State::Open { .. } => self.totals(now, self.fresh_from),
            State::Probing { since, opened } => {
                // Probes sent since probing began, pooled across the fleet.
                let t = self.totals(now, epoch_of(since));
                let mut p = t;
                if alone {
                    // A lone isolate's breaker decides for it (`Verdict::sole`): a call it
                    // made since is one that breaker let through after its own probes, and
                    // counts as a probe — the fleet closes with it, not stuck probing.
                    let ok = t.calls.saturating_sub(t.failures).saturating_sub(t.slow);
                    p.probes = p.probes.saturating_add(t.calls);
                    p.probe_ok = p.probe_ok.saturating_add(ok);
                    p.probe_slow = p.probe_slow.saturating_add(t.slow);
                }
                let bad = p.probes.saturating_sub(p.probe_ok);
                if bad > 0 {
                    self.state = State::Open {
                        since: opened,
                        until: now.plus(self.cfg.failed_probe_hold_ms),
                    };
                } else if p.probes >= self.cfg.probe_min_calls.max(1) {
                    let allowed_slow = p.probes - (0.95 * f64::from(p.probes)).ceil() as u32;
                    let ratio = f64::from(p.probe_ok) / f64::from(p.probes);
                    if ratio >= self.cfg.probe_success_ratio && p.probe_slow <= allowed_slow {
                        self.state = State::Closed;
                        self.recovered_from = Some(since);
                        self.fresh_from = epoch_of(now) + 1;
                        self.recent.clear();
                    } else {
                        self.state = State::Open {
                            since: opened,
                            until: now.plus(self.cfg.failed_probe_hold_ms),
                        };
                    }
                }
                t
            }
        };
        let sole = alone
            .then(|| self.isolates.keys().next().cloned())
            .flatten();
        let (mode, opened_at, probing_since) = match self.state {
            State::Closed => match self.followed(now) {
                Some(g) => {
                    self.following = Some(g.probing_since);
                    (g.mode, g.opened_at, g.probing_since)
                }
                None => {
                    self.let_go(now);
                    (FleetMode::Closed, None, self.recovered_from.map(|m| m.0))
                }
            },
            State::Open { since, .. } => (FleetMode::Open, Some(since.0), None),
            State::Probing { since, opened } => (FleetMode::Probing, Some(opened.0), Some(since.0)),
        };
        if (mode == FleetMode::Closed) != self.closed {
            self.closed = mode == FleetMode::Closed;
            self.moved = true;
        }
        Verdict {
            mode,
            calls: t.calls,
            failures: t.failures,
            slow: t.slow,
            probes: t.probes,
            probe_ok: t.probe_ok,
            isolates: self.isolates.len(),
            issued_at: now.0,
            expires_at: now.0 + 3 * self.report_interval_ms,
            opened_at,
            probing_since,
            pace_ms: self.pace_ms(),
            heartbeat_ms: sample::heartbeat_ms(
                self.isolates.len(),
                self.report_interval_ms,
                self.cfg.window_ms,
            ),
            sole,
        }
    }

    /// The policy's report interval: a region merges its window into the global one once
    /// per interval.
    pub fn report_interval_ms(&self) -> u64 {
        self.report_interval_ms
    }

    /// The report period this coordinator asks of isolates with something to tell.
    pub fn pace_ms(&self) -> u64 {
        sample::pace_ms(
            self.isolates.len(),
            self.report_interval_ms,
            self.cfg.window_ms,
        )
    }

    /// Whether seed 000's rule trips on the recent sample: the reports of the last
    /// interval, each weighted by its period, hold `min_calls` calls of their own and come
    /// from [`sample::MIN_REPORTS`] isolates (every one kept, in a smaller fleet).
    fn sample_trips(&mut self, now: Millis) -> bool {
        self.recent.expire(now);
        if self.recent.len() < sample::MIN_REPORTS.min(self.isolates.len()).max(1) {
            return false;
        }
        let current = now.0 / self.bucket_ms();
        let oldest = current
            .saturating_sub(BUCKETS as u64 - 1)
            .max(self.fresh_from);
        let t = self.recent.totals(oldest, current + 1);
        if t.seen < f64::from(self.cfg.min_calls.max(1)) || t.calls <= 0.0 {
            return false;
        }
        // The evidence is as strong as the calls the sample holds, at the weighted share.
        let seen = t.seen.round() as u32;
        let slow = (t.slow / t.calls * t.seen).round() as u32;
        t.failures >= self.cfg.failure_ratio * t.calls || p95_exceeded(slow, seen)
    }
}

pub mod place;
mod refusal;
pub use refusal::Refusal;
mod region;
mod snapshot;
pub use snapshot::{Snapshot, SNAPSHOT_EVERY_MS};
pub mod sample;
use sample::Sample;
mod watch;
pub use watch::{Watch, WAIT_UNTIL_MS, WATCH_MS};

#[cfg(test)]
mod tests;
