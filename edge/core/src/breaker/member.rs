//! [F-SCOPE] An isolate's side of the fleet-scoped breaker (ADR 011): its own rate breaker,
//! the counts it reports to the coordinator, and the fleet verdict it applies.
//!
//! The isolate keeps seed 000's breaker exactly as in isolate scope ([`Rate`]) and may
//! always open on its own evidence. Beside it, it counts every call and probe per bucket of
//! the window (a [`Ledger`]) and, when a report is due, hands the engine the report's JSON
//! to send off the request path. The coordinator's reply is a [`Verdict`]:
//! - `OPEN` opens an isolate that has not seen the failure yet — its own breaker adopts the
//!   opening, dated when the fleet opened, so that without the coordinator it carries on as
//!   an isolate that opened then (its own hold-down and probes), not as a healthy one;
//! - `PROBING` makes it probe `probe_fraction` of its own traffic — the fleet's 2% is the
//!   sum — unless it opened on its own evidence after the fleet's probing began;
//! - `CLOSED` after a recovery closes an isolate whose own opening is older than the
//!   fleet's probing; an isolate that opened later keeps its own mode;
//! - a verdict that names this isolate `sole` (its reports alone make the fleet's window)
//!   leaves every decision to its own breaker: the coordinator holds the same evidence a
//!   report later, and a lone isolate in fleet scope degrades and recovers when it would
//!   in isolate scope.
//!
//! A verdict holds for the shorter of the policy's `verdict_ttl` and the coordinator's own
//! expiry, measured from its arrival on this isolate's clock, and past it only while the
//! next report is on its way (or, on an isolate that had no request since, until its next
//! request's report is answered; at most a window). A coordinator that fails, is slow or
//! refuses drops the verdict at once: the isolate runs in isolate scope, counts it, and tries
//! again one report interval later. No request ever waits for any of it.

use super::credit::ProbeCredit;
use super::fleet::place::{self, Cf, Region};
use super::fleet::{settings_hash, FleetMode, Verdict};
use super::rate::Rate;
use super::{log_transition, Admission, Mode, Outcome, Transition};
use crate::policy::{FleetScope, RateBreaker};
use crate::time::Millis;

/// How long a driver waits for the coordinator's answer before it reports the report failed.
pub const REPORT_TIMEOUT_MS: u64 = 500;
/// The coordinator's paths: a report, and a watch (held until the fleet moves).
pub const REPORT_PATH: &str = "/report";
pub const WATCH_PATH: &str = "/watch";
/// A healthy isolate reports this many times less often (a heartbeat that keeps it counted).
pub const HEARTBEAT_FACTOR: u64 = 10;

/// A report (or a watch) to send: to the Durable Object named `object` in the namespace
/// bound as `binding`, created with the location hint `hint`, at `path`, the JSON `body`,
/// giving up after `timeout_ms`. The driver tells the object the name it reached it under
/// (its role, [`place::Role`], comes from it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FleetReport {
    /// `/report` or `/watch`.
    pub path: &'static str,
    pub binding: String,
    pub object: String,
    pub hint: &'static str,
    pub body: String,
    pub timeout_ms: u64,
}

impl FleetReport {
    /// How soon the call's answer must begin: a held watch's headers come at once (its verdict
    /// later, within `timeout_ms`), so a call whose answer has not begun within
    /// [`REPORT_TIMEOUT_MS`] failed. The Worker's driver and `simulate` both end it there.
    pub fn begin_ms(&self) -> u64 {
        self.timeout_ms.min(REPORT_TIMEOUT_MS)
    }
}

pub use place::object_name;

/// A change in what this isolate knows of the fleet, for the Analytics Engine point and the
/// log: the fleet's verdict moved, or the coordinator was lost or came back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FleetChange {
    /// `verdict`, `lost` or `regained`.
    pub event: &'static str,
    /// The verdict's mode (`CLOSED`, `OPEN`, `PROBING`), or `NONE` when there is none.
    pub verdict: &'static str,
    pub calls: u32,
    pub isolates: usize,
}

fn fleet_mode_name(m: Option<FleetMode>) -> &'static str {
    match m {
        Some(FleetMode::Closed) => "CLOSED",
        Some(FleetMode::Open) => "OPEN",
        Some(FleetMode::Probing) => "PROBING",
        None => "NONE",
    }
}

/// How the coordinator has been doing, as this isolate saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Health {
    /// No report sent yet.
    Unknown,
    /// The last report was answered with a verdict.
    Ok,
    /// The last report failed, timed out or was refused: isolate scope until one succeeds.
    Failing,
    /// The last verdict that was not `CLOSED` expired before a newer one came.
    Expired,
}

impl Health {
    pub fn name(self) -> &'static str {
        match self {
            Health::Unknown => "unknown",
            Health::Ok => "ok",
            Health::Failing => "failing",
            Health::Expired => "expired",
        }
    }
}

/// The verdict this isolate applies, and when it arrived.
#[derive(Debug, Clone)]
struct Heard {
    verdict: Verdict,
    at: Millis,
    /// Until when it holds, on this isolate's clock.
    until: Millis,
    /// It stands on this isolate's reports alone ([`Verdict::sole`]).
    sole: bool,
}

impl Heard {
    /// An instant of the coordinator's clock on this isolate's (the offset measured when
    /// the verdict arrived: the clocks' skew plus the reply's way back).
    fn local(&self, coordinator_ms: u64) -> Millis {
        let offset = self.at.0 as i128 - self.verdict.issued_at as i128;
        Millis((coordinator_ms as i128 + offset).max(0) as u64)
    }
}

/// Who decides this request: the fleet's verdict, or this isolate's own breaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lead {
    Fleet(Mode),
    Local,
}

/// An isolate's breaker in fleet scope.
#[derive(Debug, Clone)]
pub struct Member {
    local: Rate,
    cfg: RateBreaker,
    fleet: FleetScope,
    service: String,
    config: String,
    /// The isolate's random ID (set by the engine from its first request's random source).
    isolate: String,
    seq: u64,
    ledger: Ledger,
    heard: Option<Heard>,
    /// When the report in flight was handed out.
    in_flight: Option<Millis>,
    last_report: Option<Millis>,
    /// Which requests probe while the fleet probes ([`ProbeCredit`]).
    credit: ProbeCredit,
    /// A fleet-led probe failed since the last verdict: open until the next one.
    probe_failed: bool,
    /// The fleet's last recovery this isolate applied (when its probing began).
    recovered: Option<u64>,
    /// The mode of the last verdict applied (a change is a point and a log line).
    last_verdict: Option<FleetMode>,
    /// A probe ended since the last report: the next answer reports, whatever the interval.
    unreported_probe: bool,
    /// Watches in flight (at most [`MAX_WATCHES`]), each with when it was sent and until
    /// when it is held ([`watch::Held`]), and when the newest was handed out; not before
    /// when the next may go (after a failed one); verdicts pushed through a watch.
    held: Vec<watch::Held>,
    newest_watch: Option<Millis>,
    /// When the last answer went out (a thin isolate renews its watch with each request).
    last_answer: Option<Millis>,
    watch_after: Millis,
    pushed: u64,
    health: Health,
    /// Reports that failed, timed out or were refused; and the last one's reason.
    failures: u64,
    last_error: Option<String>,
    /// The mode answers last carried, and its changes.
    mode: Mode,
    log: Vec<Transition>,
    /// The report period and heartbeat the coordinator last asked for (0: the policy's
    /// interval and [`HEARTBEAT_FACTOR`] of them); this isolate's phase in them, a share
    /// of the period from its ID, and when it first had a report to make.
    pace_ms: u64,
    heartbeat_ms: u64,
    phase: Option<f64>,
    born: Option<Millis>,
    /// When this isolate last answered without the model (a fallback or a refusal).
    noticed: Option<Millis>,
    /// How long before its last answer the one before it went out.
    gap_ms: u64,
    /// When it last looked whether a report was due.
    looked: Option<Millis>,
    /// Its region (its coordinator's), picked at its first request and kept.
    region: Option<Region>,
    /// When its first report falls due should no request carry it (handed to the driver
    /// once, [`Member::first_wake`]).
    wake: Option<Millis>,
    /// Reports failed in a row; until when they go to the global coordinator; whether the
    /// one in flight went there; whether the next goes at once ([`failover`]).
    streak: u32,
    failover_until: Option<Millis>,
    sent_global: bool,
    retry: bool,
    /// A watch failed: the next goes at once, held until then ([`Member::watch_again`]), up
    /// to [`watch::REWATCH_IN_A_ROW`] times in a row.
    rewatch: Option<Millis>,
    rewatched: u8,
}

impl Member {
    /// The member of `service`'s fleet running the policy whose source hashes to
    /// `policy_hash` ([`settings_hash`]).
    pub fn new(service: &str, policy_hash: &str, cfg: RateBreaker, fleet: FleetScope) -> Member {
        let credit = ProbeCredit::new(cfg.probe_fraction);
        Member {
            local: Rate::new(cfg.clone()),
            ledger: Ledger::new(cfg.window_ms),
            config: settings_hash(&cfg, policy_hash),
            cfg,
            fleet,
            service: service.to_string(),
            isolate: String::new(),
            seq: 0,
            heard: None,
            in_flight: None,
            last_report: None,
            credit,
            probe_failed: false,
            recovered: None,
            last_verdict: None,
            unreported_probe: false,
            held: Vec::new(),
            newest_watch: None,
            last_answer: None,
            watch_after: Millis(0),
            pushed: 0,
            health: Health::Unknown,
            failures: 0,
            last_error: None,
            mode: Mode::Healthy,
            log: Vec::new(),
            pace_ms: 0,
            heartbeat_ms: 0,
            phase: None,
            born: None,
            noticed: None,
            gap_ms: 0,
            looked: None,
            region: None,
            wake: None,
            streak: 0,
            failover_until: None,
            sent_global: false,
            retry: false,
            rewatch: None,
            rewatched: 0,
        }
    }

    /// Whether this isolate has picked its region (a driver reads the request's `cf` only
    /// until it has).
    pub fn located(&self) -> bool {
        self.region.is_some()
    }

    /// Picks this isolate's region from its request's `cf` (none: the default region), once:
    /// later calls change nothing ([`place`] says why).
    pub fn locate(&mut self, cf: Option<&Cf<'_>>) {
        self.region.get_or_insert_with(|| Region::pick(cf));
    }

    /// Its region (the default one until it is located).
    pub fn region(&self) -> Region {
        self.region.unwrap_or(place::DEFAULT_REGION)
    }

    /// Names this isolate to the coordinator (once: later calls change nothing).
    pub fn identify(&mut self, random: u64) {
        if self.isolate.is_empty() {
            self.isolate = format!("{random:016x}");
            // splitmix64's finaliser: seeds that differ little still spread over the period.
            let mut x = random.wrapping_add(0x9e37_79b9_7f4a_7c15);
            x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            let drawn = ((x ^ (x >> 31)) >> 11) as f64 / (1u64 << 53) as f64;
            self.phase.get_or_insert(drawn);
        }
    }

    /// Sets this isolate's phase in its report periods (a share, 0..1).
    #[cfg(test)]
    pub fn set_phase(&mut self, phase: f64) {
        self.phase = Some(phase);
    }

    pub fn settings(&self) -> &FleetScope {
        &self.fleet
    }

    /// The verdict in force at `now`, dropping an expired one. A verdict holds until the
    /// answer to the next report replaces it, or that report fails (the driver gives up
    /// after [`REPORT_TIMEOUT_MS`]), and past `verdict_ttl` only while that report is on its
    /// way. An isolate that sent no report since (it had no request) keeps it until its next
    /// request's report is answered — at most a window: an idle isolate's first request
    /// must not meet a model the fleet knows is down.
    fn verdict(&mut self, now: Millis) -> Option<&Heard> {
        if let Some(h) = &self.heard {
            let asked_since = self.last_report.is_some_and(|t| t > h.at);
            let awaiting = self
                .in_flight
                .is_some_and(|sent| sent > h.at && now.since(sent) < REPORT_TIMEOUT_MS);
            let limit = h.at.plus(self.cfg.window_ms.max(h.until.since(h.at)));
            let holds = (now < h.until || !asked_since || awaiting) && now < limit;
            if !holds {
                if h.verdict.mode != FleetMode::Closed {
                    self.health = Health::Expired;
                }
                self.heard = None;
            }
        }
        self.heard.as_ref()
    }

    fn lead(&mut self, now: Millis) -> Lead {
        let local_opened = self.local.opened_at(now);
        let probe_failed = self.probe_failed;
        let Some(h) = self.verdict(now) else {
            return Lead::Local;
        };
        match h.verdict.mode {
            // The fleet's evidence is this isolate's own, a report late: its breaker decides.
            _ if h.sole => Lead::Local,
            FleetMode::Closed => Lead::Local,
            FleetMode::Open => Lead::Fleet(Mode::Open),
            FleetMode::Probing if probe_failed => Lead::Fleet(Mode::Open),
            FleetMode::Probing => {
                let probing = h.local(h.verdict.probing_since.unwrap_or(h.verdict.issued_at));
                match local_opened {
                    // Fresh evidence of its own, after the fleet's probing began.
                    Some(opened) if opened > probing => Lead::Local,
                    _ => Lead::Fleet(Mode::Probing),
                }
            }
        }
    }

    /// The mode answers carry at `now` (its changes are logged).
    pub fn mode(&mut self, now: Millis) -> Mode {
        let (mode, evidence) = match self.lead(now) {
            Lead::Fleet(m) => (m, None),
            Lead::Local => {
                let m = self.local.mode(now);
                // Its own breaker leads: the change is its own, with the evidence it logged.
                let own = self.local.transitions().last().filter(|t| t.to == m);
                (m, own.and_then(|t| t.evidence))
            }
        };
        if mode != self.mode {
            log_transition(&mut self.log, now, self.mode, mode, evidence);
            self.mode = mode;
        }
        mode
    }

    pub fn admit(&mut self, now: Millis) -> Admission {
        let admission = match self.lead(now) {
            Lead::Fleet(Mode::Probing) if self.credit.take() => Admission::Probe,
            Lead::Fleet(Mode::Probing) => Admission::Reject,
            Lead::Fleet(_) => Admission::Reject,
            Lead::Local => self.local.admit(now),
        };
        self.mode(now);
        admission
    }

    pub fn record(&mut self, now: Millis, admission: Admission, outcome: Outcome) {
        if admission.calls_origin() {
            self.ledger
                .record(now, admission == Admission::Probe, outcome, &self.cfg);
            self.unreported_probe |= admission == Admission::Probe;
        }
        if admission == Admission::Probe {
            let ok = outcome.passes(self.cfg.slow_call_p95_ms);
            if !ok && matches!(self.lead(now), Lead::Fleet(Mode::Probing)) {
                // Seed 000: a failed probe aborts probing; the fleet hears it with the next
                // report, this isolate stops probing now.
                self.probe_failed = true;
            }
        }
        self.local.record(now, admission, outcome);
        self.mode(now);
    }

    pub fn release(&mut self, admission: Admission) {
        if admission == Admission::Probe {
            self.credit.next_probes();
        }
        self.local.release(admission);
    }

    /// Whether this isolate has anything to tell or to learn soon: a failure or slow call
    /// lately, a breaker or verdict not closed, a coordinator that stopped answering.
    fn abnormal(&mut self, now: Millis) -> bool {
        let verdict_open = self
            .verdict(now)
            .is_some_and(|h| h.verdict.mode != FleetMode::Closed);
        verdict_open
            || matches!(self.health, Health::Failing | Health::Expired)
            || self.ledger.troubled(now)
            || self
                .noticed
                .is_some_and(|t| now.since(t) < self.fleet.report_interval_ms.max(1))
            || self.local.mode(now) != Mode::Healthy
    }

    /// This isolate answered a request at `now` without the model (a fallback, a refusal):
    /// it has something to tell or to learn, whatever its breaker recorded.
    pub fn noticed(&mut self, now: Millis) {
        self.noticed = Some(now);
    }

    pub fn transitions(&self) -> &[Transition] {
        &self.log
    }

    /// The isolate's own breaker (its window, its transitions).
    pub fn local(&self) -> &Rate {
        &self.local
    }

    /// What the status endpoint shows of the fleet.
    pub fn status(&mut self, now: Millis) -> serde_json::Value {
        let lead = self.lead(now);
        let local = self.local.mode(now);
        let verdict = self.verdict(now).map(|h| {
            serde_json::json!({
                "mode": h.verdict.mode,
                "age_ms": now.since(h.at),
                "expires_in_ms": h.until.since(now),
                "isolates": h.verdict.isolates,
                "calls": h.verdict.calls,
                "failures": h.verdict.failures,
                "slow": h.verdict.slow,
                "probes": h.verdict.probes,
                "probe_ok": h.verdict.probe_ok,
            })
        });
        serde_json::json!({
            "scope": "fleet",
            "region": self.region().name(),
            "decided_by": if matches!(lead, Lead::Fleet(_)) { "fleet" } else { "isolate" },
            "isolate_mode": super::rate_name(local),
            "verdict": verdict,
            "coordinator": {
                "binding": self.fleet.coordinator,
                "health": self.health.name(),
                "failures": self.failures,
                "last_error": self.last_error,
                "reports": self.seq,
                "failover": self.failing_over(now),
                "watching": self.held.len(),
                "pushed": self.pushed,
            },
        })
    }

    /// Whether the fleet's verdict decides this isolate's answers at `now`.
    pub fn fleet_led(&mut self, now: Millis) -> bool {
        matches!(self.lead(now), Lead::Fleet(_))
    }

    pub fn health(&self) -> Health {
        self.health
    }
}

mod answers;
mod ask;
mod failover;
mod ledger;
mod report;
mod watch;
pub use failover::FAILOVER_AFTER;
pub use ledger::Ledger;
pub use watch::{MAX_WATCHES, THIN_GAP_MS};

#[cfg(test)]
mod tests;
