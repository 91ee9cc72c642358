//! [F-SCOPE] Asking first (ADR 011, "Asking first"). An isolate that nothing could have told
//! of a change in the fleet lately — no verdict in force, no watch held for it, no report on
//! its way — may be meeting an opening or a close it never heard of: it was idle longer than
//! a watch is held (a Worker's `waitUntil` ends 30 s after its answer). Its request sends the
//! report *with* its first model call rather than after its answer, and
//! heeds the answer if it comes while the call is still out: if the fleet opened, the call is
//! cut and the request goes to the cascade at once — an answer in an outage waits one
//! coordinator round trip instead of the model's deadline, and the coordinator hears of this
//! isolate before its answer rather than after.
//!
//! Asking changes no admission. An isolate in the dark that holds an opening — a verdict
//! held past its time for want of a report, or the opening its breaker adopted from one —
//! keeps it for this request, and its answer (a fallback) does not wait: a call to a model
//! the fleet found down costs that model load in the outage (over 10,000 Zipf isolates, a
//! probe on every such request more than doubled the calls made during seed 000's outage),
//! while the close, if it came, reaches the isolate with this answer for its next request.
//! No request of an isolate that is watched, heard a verdict lately or reported within its
//! heartbeat asks — an ask is the report its heartbeat would send, sent early: over 10,000
//! isolates at 12,000 req/s, isolates between a watch answered at once and the next (news
//! spreads renewals over a third of `WATCH_MS`) asked every time their verdict lapsed, 1,875
//! requests in a second to enam's coordinator, over its capacity. Nor does a new
//! isolate's (one that never reported): a fleet that starts at once would ask all at once — over
//! 3,000 isolates, 1,094 asks in the first second to the busiest region's coordinator, over its
//! capacity — so a new isolate's first report keeps its phase of a heartbeat (or the wake).

use super::{FleetReport, Health, Lead, Member, REPORT_TIMEOUT_MS};
use crate::breaker::Mode;
use crate::time::Millis;

impl Member {
    /// Whether nothing could tell this isolate of a change in the fleet at `now`: it has
    /// reported before but not within its heartbeat, reports are not failing, no report is on
    /// its way, no watch is held for it (none unanswered, or their holds ended) and no
    /// verdict it heard is in force.
    pub fn in_the_dark(&self, now: Millis) -> bool {
        let watched = self
            .watch_until()
            .is_some_and(|t| now < t.plus(REPORT_TIMEOUT_MS));
        let heard = self.heard.as_ref().is_some_and(|h| now < h.until);
        // It reported within its heartbeat: in touch, whatever it heard since (an ask is its
        // report sent early, never one more than its heartbeat makes).
        let (_, _, heartbeat) = self.periods();
        let reported = self.last_report.is_some_and(|t| now.since(t) < heartbeat);
        self.seq > 0
            && !reported
            && self.in_flight.is_none()
            && self.health != Health::Failing
            && !watched
            && !heard
    }

    /// The report a request sends with its first model call when this isolate is in the dark
    /// ([`Member::in_the_dark`]); it is this isolate's report, answered as any other
    /// ([`Member::heard`]).
    pub fn ask(&mut self, now: Millis) -> Option<FleetReport> {
        if !self.in_the_dark(now) {
            return None;
        }
        self.born.get_or_insert(now);
        let (_, pace, heartbeat) = self.periods();
        let every = if self.abnormal(now) { pace } else { heartbeat };
        self.looked = Some(now);
        self.report_now(now, every)
    }

    /// Whether the fleet's verdict opens this isolate at `now` (a call a request made while
    /// asking is cut then).
    pub fn fleet_opened(&mut self, now: Millis) -> bool {
        matches!(self.lead(now), Lead::Fleet(Mode::Open))
    }
}
