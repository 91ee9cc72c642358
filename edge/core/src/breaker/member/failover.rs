//! [F-SCOPE] Failing over (ADR 011, "Failing over"). A report that fails — lost on the way,
//! unanswered within [`super::REPORT_TIMEOUT_MS`], refused, erroring — is sent again at once,
//! and the verdict heard holds meanwhile as it would have: on a lossy network the isolate
//! that lost the one bringing it the fleet's opening (or its close) would otherwise wait a
//! report period (or its heartbeat) to hear it, and one lost report would put it in
//! isolate scope — over 10,000 isolates with 30% of reports lost, isolates in isolate scope
//! for a lost report were still probing on their own 40 s after the fault's end. Two in a
//! row is a coordinator failing: the isolate drops the verdict and runs in isolate scope. When its region's
//! coordinator fails [`FAILOVER_AFTER`] times in a row, the global coordinator stands in: its
//! reports go to `{service}/{settings}/global` for [`HEARTBEAT_FACTOR`] report intervals, the
//! retry first, and the global verdict (the regions' windows merged, and the reports of the
//! isolates it stands in for) decides for it as its region's would. Then it tries its
//! region again. The global one failing too sends it back to its region at its next report,
//! and it runs in isolate scope until one answers; the retries stop after the failover's
//! (no isolate sends more than [`FAILOVER_AFTER`] reports at once in a row, whatever fails).
//! Only an isolate that is not open retries at once — it has an opening to miss; one that
//! is open sends its next report when it falls due (over 10,000 isolates, a region hung
//! under the fleet's opening sent every isolate to the global coordinator within a second,
//! 1,076 requests, over its capacity).
//!
//! No watch goes to the global coordinator (it pushes nothing; the isolate it stands in for
//! hears its verdict with each report, every report interval while anything is abnormal).
//! Watches keep going to the region meanwhile: two reports lost in a row on a lossy network
//! say little of the region, whose watches most often still work (over 10,000 isolates with
//! 30% of reports lost, isolates that stopped watching for the ten intervals of a failover
//! met the opening unwarned); a hung one fails them within the report timeout, and the next
//! waits a report interval. The isolate's evidence already
//! in its region's window counts there too until the region forgets it (a window of silence)
//! or stops merging (a hung object runs no alarm): the same calls seen twice, failures and
//! successes alike, for at most a window.

use super::{FleetReport, Member, HEARTBEAT_FACTOR};
use crate::breaker::fleet::place::{global_name, object_name};
use crate::breaker::Mode;
use crate::time::Millis;

/// Reports to a region's coordinator that fail in a row before the global one stands in.
pub const FAILOVER_AFTER: u32 = 2;

impl Member {
    /// Whether the global coordinator stands in for this isolate's region at `now`.
    pub(super) fn failing_over(&self, now: Millis) -> bool {
        self.failover_until.is_some_and(|u| now < u)
    }

    /// The coordinator a call at `now` goes to: its object's name and location hint (none
    /// for the global one: it was created where the first region's merge reached it).
    pub(super) fn target(&self, now: Millis) -> (String, &'static str) {
        if self.failing_over(now) {
            return (global_name(&self.service, &self.config), "");
        }
        self.region_target()
    }

    /// This isolate's region's coordinator: its object's name and location hint.
    pub(super) fn region_target(&self) -> (String, &'static str) {
        let region = self.region();
        (
            object_name(&self.service, &self.config, region),
            region.name(),
        )
    }

    /// The report in flight failed at `now`: counts the failures in a row, fails over to the
    /// global coordinator after [`FAILOVER_AFTER`] of its region's (or back to the region
    /// after the global one's), and sends the next report at once while the streak is that
    /// short. Whether the coordinator counts as failing: [`FAILOVER_AFTER`] in a row, or the
    /// global one standing in.
    pub(super) fn fail_over(&mut self, now: Millis) -> bool {
        self.streak = self.streak.saturating_add(1);
        let failing = self.sent_global || self.streak >= FAILOVER_AFTER;
        if self.sent_global {
            self.failover_until = None;
        } else if self.streak >= FAILOVER_AFTER {
            let span = self.fleet.report_interval_ms.max(1) * HEARTBEAT_FACTOR;
            self.failover_until = Some(now.plus(span));
        }
        // The first retry goes to the same coordinator, whatever this isolate's mode (a lost
        // report is most often just that). The global one's goes at once only from an
        // isolate that is not open — it has an opening to miss; one that is open sends its
        // next report when it falls due, so that a region failing under a whole fleet does
        // not send every isolate to the global coordinator at once.
        self.retry = self.streak < FAILOVER_AFTER
            || (self.streak == FAILOVER_AFTER && self.local.mode(now) == Mode::Healthy);
        failing
    }

    /// The report to send again at once after a failure at `now` (the driver sends it from
    /// the failed one's callback, no request waiting), when one is due.
    pub fn again(&mut self, now: Millis) -> Option<FleetReport> {
        if !self.retry || self.in_flight.is_some() || self.isolate.is_empty() {
            return None;
        }
        let (_, pace, _) = self.periods();
        self.looked = Some(now);
        self.report_now(now, pace)
    }
}
