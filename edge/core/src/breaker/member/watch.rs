//! [F-SCOPE] An isolate's watches (ADR 011, "The verdict pushed"): requests the coordinator
//! holds until the fleet opens or closes, so the isolate learns it between its requests.

use super::{FleetChange, FleetReport, Health, Member, REPORT_TIMEOUT_MS};
use crate::breaker::fleet::{Verdict, Watch, WAIT_UNTIL_MS, WATCH_MS};
use crate::time::Millis;

/// Most watches a thin isolate keeps open at once (a busy one keeps one).
pub const MAX_WATCHES: u8 = 3;
/// An isolate whose requests come this far apart or more is thin: each renews its watch.
pub const THIN_GAP_MS: u64 = 2_000;
impl Member {
    /// The report and the watch due at `now` (either, both or none).
    pub fn calls_due(&mut self, now: Millis) -> Vec<FleetReport> {
        let thin = self.last_answer.is_none_or(|t| now.since(t) >= THIN_GAP_MS);
        // The gap since the last answer: a first report may go a gap before its slot.
        self.gap_ms = self.last_answer.map_or(0, |t| now.since(t));
        self.last_answer = Some(now);
        let report = self.report_due(now);
        report
            .into_iter()
            .chain(self.watch_due(now, thin, WATCH_MS))
            .collect()
    }

    /// When the driver should wake this isolate for its first report ([`Member::wake`]),
    /// handed out once, with the answer that leaves it without one: a healthy isolate's
    /// first report waits for its phase of a heartbeat (a fleet that starts at once spreads
    /// them), and an isolate whose next request comes later than that — or never — would
    /// otherwise stay unknown to the coordinator and unwatched, and meet an opening it was
    /// never told of. No later than the last moment its answer's `waitUntil` still leaves
    /// a third of [`WATCH_MS`] to watch in.
    pub fn first_wake(&mut self, now: Millis) -> Option<Millis> {
        if self.seq > 0 || self.wake.is_some() || self.isolate.is_empty() {
            return None;
        }
        let born = self.born?;
        let (_, _, heartbeat) = self.periods();
        let at = born.plus((self.phase.unwrap_or(0.0) * heartbeat as f64) as u64);
        let latest = now.plus(WAIT_UNTIL_MS - REPORT_TIMEOUT_MS - WATCH_MS / 3);
        let at = at.max(now).min(latest);
        self.wake = Some(at);
        Some(at)
    }

    /// The driver woke this isolate as [`Member::first_wake`] asked, at `now`: its first
    /// report, and a watch held only as long as the answer's `waitUntil` still runs —
    /// unless a request carried the first report already.
    pub fn wake(&mut self, now: Millis) -> Vec<FleetReport> {
        if self.seq > 0 || self.wake.is_none() {
            return Vec::new();
        }
        let (_, _, heartbeat) = self.periods();
        let answered = self.last_answer.unwrap_or(now);
        let left = WAIT_UNTIL_MS.saturating_sub(now.since(answered) + REPORT_TIMEOUT_MS);
        let report = self.report_now(now, heartbeat);
        report
            .into_iter()
            .chain(self.watch_due(now, true, left.min(WATCH_MS)))
            .collect()
    }

    /// The watch to send now, when one is due: the coordinator answers it when the fleet
    /// opens or closes (or after [`WATCH_MS`]), so this isolate learns it between its
    /// requests. A watch lives only as long as the request that sent it may (its
    /// `waitUntil`), so requests renew it: a busy isolate keeps one open (a new one with its
    /// first request after the last ended), a `thin` one — [`THIN_GAP_MS`] or more
    /// since its last answer — up to [`MAX_WATCHES`], a new one when the newest is a third
    /// of [`WATCH_MS`] old, so it stays watched at least two thirds of [`WATCH_MS`] after
    /// its last request (all of it when its requests are further apart than that). None
    /// before this isolate's first report (a fleet that starts at once spreads its first
    /// reports over a heartbeat, and its watches with them), while reports fail (an expired
    /// verdict is no failure), within a report interval of a failed watch, nor within this
    /// isolate's share of a third of [`WATCH_MS`] after news (every watch the coordinator
    /// held was answered at once: their renewals spread instead of arriving together).
    /// The coordinator holds it `hold_ms` at most ([`WATCH_MS`] unless less is left of the
    /// request's `waitUntil`).
    pub fn watch_due(&mut self, now: Millis, thin: bool, hold_ms: u64) -> Option<FleetReport> {
        // Failing reports stop watches; an expired verdict does not (an idle isolate's
        // verdict expires while the coordinator is fine, and its first request back is when
        // a watch matters most: the fleet may be probing, and only a watch brings the close).
        if self.isolate.is_empty()
            || self.seq == 0
            || self.health == Health::Failing
            || self.failing_over(now)
            || now < self.watch_after
            || hold_ms == 0
        {
            return None;
        }
        if let Some(newest) = self.newest_watch {
            if now.since(newest) > 2 * (WATCH_MS + REPORT_TIMEOUT_MS) {
                // Every driver answers a watch within its timeout; one never heard of is gone.
                self.watching = 0;
            }
            let (cap, after) = if thin {
                (MAX_WATCHES, WATCH_MS / u64::from(MAX_WATCHES))
            } else {
                (1, 0)
            };
            // A thin isolate renews once what it holds covers less than a full watch sent a
            // third of WATCH_MS ago would: a watch held short (the wake's, within what was
            // left of its answer's `waitUntil`) is renewed sooner than one held in full.
            let covered = self.watch_until.map_or(0, |u| u.since(now));
            let fresh = self.watching > 0 && covered > WATCH_MS - after;
            if self.watching >= cap || (after > 0 && fresh) {
                return None;
            }
        }
        // A watch of its own: the next one that fails is sent again.
        self.rewatched = false;
        self.watch_now(now, hold_ms)
    }

    /// A watch sent at `now`, held `hold_ms` at most.
    fn watch_now(&mut self, now: Millis, hold_ms: u64) -> Option<FleetReport> {
        let timeout_ms = hold_ms + REPORT_TIMEOUT_MS;
        self.watching += 1;
        self.newest_watch = Some(now);
        self.watch_until = Some(
            self.watch_until
                .map_or(now, |u| u.max(now))
                .max(now.plus(hold_ms)),
        );
        let watch = Watch {
            service: self.service.clone(),
            config: self.config.clone(),
            isolate: self.isolate.clone(),
            seen: self.last_verdict,
            hold_ms: (hold_ms < WATCH_MS).then_some(hold_ms),
        };
        self.call(now, super::WATCH_PATH, &watch, timeout_ms)
    }

    /// The watch in flight ended at `now`: answered with `verdict` (applied as a report's
    /// answer is, unless reports are failing: isolate scope holds until one succeeds), or
    /// failed (`None`: sent again at once the first time, [`Member::watch_again`]; after
    /// that, the next watch waits a report interval).
    pub fn watched(&mut self, now: Millis, verdict: Option<Verdict>) -> Option<FleetChange> {
        self.watching = self.watching.saturating_sub(1);
        let Some(verdict) = verdict else {
            self.watch_after = now.plus(self.fleet.report_interval_ms);
            self.rewatch = !self.rewatched;
            self.rewatched = true;
            return None;
        };
        // While reports fail, a verdict pushed is still the coordinator's word: it answered.
        if self.last_verdict != Some(verdict.mode) {
            // News (the fleet opened or closed): counted. A failed probe the coordinator
            // has not heard yet keeps this isolate open only while the fleet still probes.
            self.pushed += 1;
            self.probe_failed = false;
            let spread = (self.phase.unwrap_or(0.0) * (WATCH_MS / 3) as f64) as u64;
            self.watch_after = self.watch_after.max(now.plus(spread));
        }
        self.apply(now, verdict)
    }

    /// The watch to send again at once after one failed at `now` (lost on the way, its
    /// answer not begun within [`REPORT_TIMEOUT_MS`], refused), held for what the failed one
    /// still covered: a watch lost just before an opening would leave a thin isolate deaf to
    /// it until its next request. Once in a row: a coordinator that keeps failing waits a
    /// report interval between watches.
    pub fn watch_again(&mut self, now: Millis) -> Option<FleetReport> {
        if !std::mem::take(&mut self.rewatch)
            || self.health == Health::Failing
            || self.failing_over(now)
        {
            return None;
        }
        let hold_ms = self.watch_until.map_or(0, |u| u.since(now)).min(WATCH_MS);
        if hold_ms == 0 {
            return None;
        }
        self.watch_now(now, hold_ms)
    }
}
