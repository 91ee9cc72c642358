//! [F-SCOPE] An isolate's watches (ADR 011, "The verdict pushed"): requests the coordinator
//! holds until the fleet opens or closes, so the isolate learns it between its requests.

use super::{FleetChange, FleetReport, Health, Member, REPORT_TIMEOUT_MS};
use crate::breaker::fleet::{Verdict, Watch, WAIT_UNTIL_MS, WATCH_MS};
use crate::time::Millis;

/// Most watches a thin isolate keeps open at once (a busy one keeps one).
pub const MAX_WATCHES: u8 = 3;
/// An isolate whose requests come this far apart or more is thin: each renews its watch.
pub const THIN_GAP_MS: u64 = 2_000;
/// Watches sent again at once in a row after failures: on a network losing 30% of calls, one
/// retry left 9% of renewals lost (over 10,000 isolates, enough unwatched isolates at an
/// onset to keep 1.3% of a 250 ms slot's requests meeting a closed breaker); two leave 2.7%.
pub const REWATCH_IN_A_ROW: u8 = 2;

/// A watch in flight: when it was sent and until when the coordinator holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Held {
    sent: Millis,
    until: Millis,
}

impl Member {
    /// Until when the watches in flight are held, at the latest.
    pub(super) fn watch_until(&self) -> Option<Millis> {
        self.held.iter().map(|h| h.until).max()
    }

    /// Which watch in flight a failure at `now` ended: one whose answer had to begin by now
    /// (sent within [`REPORT_TIMEOUT_MS`] and a little), the newest of them; else the one
    /// held for the shortest time left (its hold ended, or its connection dropped).
    fn ended_by_failure(&mut self, now: Millis) -> Option<Held> {
        let fresh = self
            .held
            .iter()
            .rposition(|h| now.since(h.sent) <= REPORT_TIMEOUT_MS + REPORT_TIMEOUT_MS / 10);
        let i = fresh.or_else(|| self.soonest())?;
        Some(self.held.remove(i))
    }

    /// The watch in flight held for the shortest time left: the one a verdict answers (a
    /// hold ends in the order they end; news answers them all).
    fn soonest(&self) -> Option<usize> {
        (0..self.held.len()).min_by_key(|&i| self.held[i].until)
    }
}
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
    /// handed out with the answer that leaves it without one: a healthy isolate's first
    /// report waits for its phase of a heartbeat (a fleet that starts at once spreads
    /// them), and an isolate whose next request comes later than that — or never — would
    /// otherwise stay unknown to the coordinator and unwatched, and meet an opening it was
    /// never told of. A new isolate that is thin — no request after its first for
    /// [`THIN_GAP_MS`] — reports then, its phase of another [`THIN_GAP_MS`] on, not at its
    /// slot of a heartbeat: isolates are born no faster than requests come, and only the
    /// thin ones report early, so a fleet that starts at once still spreads its first
    /// reports over a heartbeat, while an isolate born in the seconds before an outage is
    /// watched when it begins. Its second request's answer moves the wake to its slot
    /// (handed out again; the earlier one then finds nothing to do). No later than the last
    /// moment its answer's `waitUntil` still leaves a third of [`WATCH_MS`] to watch in.
    pub fn first_wake(&mut self, now: Millis) -> Option<Millis> {
        if self.seq > 0 || self.isolate.is_empty() {
            return None;
        }
        let born = self.born?;
        let (_, _, heartbeat) = self.periods();
        let phase = self.phase.unwrap_or(0.0);
        let slot = born.plus((phase * heartbeat as f64) as u64);
        let thin = born.plus(THIN_GAP_MS + (phase * THIN_GAP_MS as f64) as u64);
        let at = if now == born { slot.min(thin) } else { slot };
        let latest = now.plus(WAIT_UNTIL_MS - REPORT_TIMEOUT_MS - WATCH_MS / 3);
        let at = at.max(now).min(latest);
        if self.wake.is_some_and(|w| w >= at) {
            return None;
        }
        self.wake = Some(at);
        Some(at)
    }

    /// The driver woke this isolate at `now` for the wake [`Member::first_wake`] named
    /// `asked`: its first report, and a watch held only as long as the answer's `waitUntil`
    /// still runs — unless a request carried the first report already, or a later answer
    /// moved the wake.
    pub fn wake(&mut self, now: Millis, asked: Millis) -> Vec<FleetReport> {
        if self.seq > 0 || self.wake != Some(asked) {
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
    /// its last request (all of it when its requests are further apart than that); a busy
    /// one as a thin one while its newest watch was held short (the wake's). None
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
            || now < self.watch_after
            || hold_ms == 0
        {
            return None;
        }
        if let Some(newest) = self.newest_watch {
            if now.since(newest) > 2 * (WATCH_MS + REPORT_TIMEOUT_MS) {
                // Every driver answers a watch within its timeout; one never heard of is gone.
                self.held.clear();
            }
            // A busy isolate renews as a thin one does while its newest watch was held short:
            // a lull in its requests must not leave it deaf when that watch ends.
            let short = self
                .held
                .iter()
                .max_by_key(|h| h.sent)
                .is_some_and(|h| h.until.since(h.sent) < WATCH_MS);
            let (cap, after) = if thin || short {
                (MAX_WATCHES, WATCH_MS / u64::from(MAX_WATCHES))
            } else {
                (1, 0)
            };
            // A thin isolate renews once what it holds covers less than a full watch sent a
            // third of WATCH_MS ago would: a watch held short (the wake's, within what was
            // left of its answer's `waitUntil`) is renewed sooner than one held in full.
            // Only the watches still in flight count: a failed one covers nothing.
            let covered = self.watch_until().map_or(0, |u| u.since(now));
            let watching = self.held.len();
            let fresh = watching > 0 && covered > WATCH_MS - after;
            if watching >= usize::from(cap) || (after > 0 && fresh) {
                return None;
            }
        }
        // A watch of its own: the next one that fails is sent again.
        self.rewatched = 0;
        self.watch_now(now, hold_ms)
    }

    /// A watch sent at `now`, held `hold_ms` at most.
    fn watch_now(&mut self, now: Millis, hold_ms: u64) -> Option<FleetReport> {
        let timeout_ms = hold_ms + REPORT_TIMEOUT_MS;
        self.newest_watch = Some(now);
        self.held.push(Held {
            sent: now,
            until: now.plus(hold_ms),
        });
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
    /// failed (`None`: sent again at once, [`Member::watch_again`], up to
    /// [`REWATCH_IN_A_ROW`] times in a row; after that, the next watch waits a report
    /// interval).
    pub fn watched(&mut self, now: Millis, verdict: Option<Verdict>) -> Option<FleetChange> {
        let Some(verdict) = verdict else {
            let failed = self.ended_by_failure(now);
            self.watch_after = now.plus(self.fleet.report_interval_ms);
            self.rewatch = failed
                .filter(|_| self.rewatched < REWATCH_IN_A_ROW)
                .map(|h| h.until);
            self.rewatched = self.rewatched.saturating_add(1);
            return None;
        };
        if let Some(i) = self.soonest() {
            self.held.remove(i);
        }
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
    /// it until its next request. Up to [`REWATCH_IN_A_ROW`] times in a row: a coordinator
    /// that keeps failing waits a report interval between watches.
    pub fn watch_again(&mut self, now: Millis) -> Option<FleetReport> {
        let until = self.rewatch.take()?;
        if self.health == Health::Failing {
            return None;
        }
        let hold_ms = until.since(now).min(WATCH_MS);
        if hold_ms == 0 {
            return None;
        }
        self.watch_now(now, hold_ms)
    }
}
