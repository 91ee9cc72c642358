//! [F-SCOPE] What the coordinator's answers do to an isolate (ADR 011, "How an isolate
//! applies it"): a verdict heard, and a report that failed.

use super::{fleet_mode_name, FleetChange, Health, Heard, Member};
use crate::breaker::fleet::{FleetMode, Verdict};
use crate::breaker::Evidence;
use crate::time::Millis;

impl Member {
    /// The coordinator answered the report in flight with `verdict` at `now`.
    pub fn heard(&mut self, now: Millis, verdict: Verdict) -> Option<FleetChange> {
        self.in_flight = None;
        self.streak = 0;
        self.probe_failed = false;
        self.apply(now, verdict)
    }

    pub(super) fn apply(&mut self, now: Millis, verdict: Verdict) -> Option<FleetChange> {
        if self
            .heard
            .as_ref()
            .is_some_and(|h| verdict.issued_at < h.verdict.issued_at)
        {
            // Older than the verdict applied (a report's answer and a watch's crossed):
            // the coordinator answered, but what it said then is superseded.
            self.health = Health::Ok;
            return None;
        }
        self.pace_ms = verdict.pace_ms;
        self.heartbeat_ms = verdict.heartbeat_ms;
        let regained = matches!(self.health, Health::Failing | Health::Expired);
        let moved = self.last_verdict != Some(verdict.mode);
        let change = (regained || moved).then_some(FleetChange {
            event: if regained { "regained" } else { "verdict" },
            verdict: fleet_mode_name(Some(verdict.mode)),
            calls: verdict.calls,
            isolates: verdict.isolates,
        });
        self.last_verdict = Some(verdict.mode);
        self.health = Health::Ok;
        let ttl = self
            .fleet
            .verdict_ttl_ms
            .min(verdict.expires_at.saturating_sub(verdict.issued_at));
        let h = Heard {
            until: now.plus(ttl),
            at: now,
            sole: verdict.sole.as_deref() == Some(self.isolate.as_str()),
            verdict,
        };
        // A verdict on this isolate's reports alone moves nothing its breaker has not
        // decided already (an opening it recovered from since, a recovery it made itself).
        let recovery = h
            .verdict
            .probing_since
            .filter(|_| h.verdict.mode == FleetMode::Closed && !h.sole);
        if recovery.is_some() && recovery != self.recovered {
            // A recovery this isolate has not applied yet: seed 000's fresh window, so the
            // outage's calls in it cannot trip it again on a model that is back.
            self.recovered = recovery;
            self.local.forget();
            if let (Some(probing), Some(opened)) = (recovery, self.local.opened_at(now)) {
                if opened < h.local(probing) {
                    let evidence = Evidence {
                        calls: h.verdict.probes,
                        failures: h.verdict.probes.saturating_sub(h.verdict.probe_ok),
                        timeouts: 0,
                        p95_ms: None,
                    };
                    self.local.recover(now, Some(evidence));
                }
            }
        }
        if let (FleetMode::Open | FleetMode::Probing, Some(opened), false) =
            (h.verdict.mode, h.verdict.opened_at, h.sole)
        {
            let evidence = Evidence {
                calls: h.verdict.calls,
                failures: h.verdict.failures,
                timeouts: 0,
                p95_ms: None,
            };
            self.local
                .adopt_open(h.local(opened).min(now), now, Some(evidence));
        }
        let was_probing = self
            .heard
            .as_ref()
            .is_some_and(|o| o.verdict.mode == FleetMode::Probing);
        if h.verdict.mode == FleetMode::Probing && !was_probing {
            // The first request of the fleet's probing probes at once, as in isolate scope.
            self.credit.next_probes();
        }
        self.heard = Some(h);
        self.mode(now);
        change
    }

    /// The report in flight failed (unreachable, over its timeout, erroring, refused, or a
    /// reply that is no verdict): sent again at once; failed twice in a row (or the global
    /// coordinator's, standing in), isolate scope from now on, until a report succeeds.
    pub fn failed(&mut self, now: Millis, why: &str) -> Option<FleetChange> {
        self.in_flight = None;
        self.failures += 1;
        self.last_error = Some(crate::classify::bounded(why));
        if !self.fail_over(now) {
            // One report lost is no coordinator lost: it goes again at once, and the verdict
            // heard holds as long as it would have (`failover`).
            return None;
        }
        let lost = !matches!(self.health, Health::Failing);
        self.last_verdict = None;
        self.heard = None;
        self.probe_failed = false;
        self.health = Health::Failing;
        self.mode(now);
        lost.then_some(FleetChange {
            event: "lost",
            verdict: fleet_mode_name(None),
            calls: 0,
            isolates: 0,
        })
    }
}
