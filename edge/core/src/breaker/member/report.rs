//! [F-SCOPE] When an isolate reports, and to which coordinator (ADR 011, "The report and the
//! verdict"; "Capacity": the pace, the heartbeat and this isolate's slot in them).

use super::{FleetReport, Member, HEARTBEAT_FACTOR, REPORT_TIMEOUT_MS};
use crate::breaker::fleet::Report;
use crate::time::Millis;

impl Member {
    /// The report to send now, as JSON, when one is due: at most one in flight (one that
    /// was never answered counts as failed after `verdict_ttl`), every report interval while
    /// anything is abnormal, every [`HEARTBEAT_FACTOR`] intervals otherwise.
    pub fn report_due(&mut self, now: Millis) -> Option<FleetReport> {
        if self.isolate.is_empty() {
            return None;
        }
        if let Some(sent) = self.in_flight {
            if now.since(sent) < self.fleet.verdict_ttl_ms {
                return None;
            }
            let _ = self.failed(now, "the last report was never answered");
        }
        let (interval, pace, heartbeat) = self.periods();
        // A probe's outcome goes out at once (one report in flight still): the fleet decides
        // to close on the probes it has heard, and probes are 2% of the traffic at most.
        let abnormal = self.abnormal(now);
        let every = if self.unreported_probe || self.retry {
            0
        } else if abnormal {
            pace
        } else {
            heartbeat
        };
        let born = *self.born.get_or_insert(now);
        // The first report goes at once with something to tell.
        let first_at_once = abnormal && self.last_report.is_none();
        let due = first_at_once || self.due(now, born, every, self.pace_ms > interval);
        self.looked = Some(now);
        if !due {
            return None;
        }
        self.report_now(now, if every == 0 { pace } else { every })
    }

    /// The report interval, the period the coordinator asked for and the heartbeat.
    pub(super) fn periods(&self) -> (u64, u64, u64) {
        let interval = self.fleet.report_interval_ms.max(1);
        let pace = self.pace_ms.max(interval);
        let heartbeat = if self.heartbeat_ms == 0 {
            interval * HEARTBEAT_FACTOR
        } else {
            self.heartbeat_ms.max(pace)
        };
        (interval, pace, heartbeat)
    }

    /// The report, sent now, covering `period_ms`.
    pub(super) fn report_now(&mut self, now: Millis, period_ms: u64) -> Option<FleetReport> {
        self.seq += 1;
        self.unreported_probe = false;
        self.retry = false;
        self.sent_global = self.failing_over(now);
        self.in_flight = Some(now);
        self.last_report = Some(now);
        let report = Report {
            service: self.service.clone(),
            config: self.config.clone(),
            isolate: self.isolate.clone(),
            seq: self.seq,
            buckets: self.ledger.buckets(now),
            period_ms,
        };
        self.call(now, super::REPORT_PATH, &report, REPORT_TIMEOUT_MS)
    }

    /// Whether a report `every` ms is due at `now`. The first goes `phase` of a period
    /// after this isolate first had one to make, or with the last answer before that
    /// moment when requests come as far apart as the last two (at once when it has
    /// something to tell): a fleet that starts at once spreads its first reports over a
    /// heartbeat, and a thin isolate is not left without one for a gap. On `slots` —
    /// when the coordinator asks for a longer period than the policy's interval (many
    /// isolates share it) — each goes at this isolate's next slot, `phase` of a period past
    /// a multiple of it: a fleet that turns abnormal at once spreads its reports over the
    /// period instead of sending them in the same second.
    pub(super) fn due(&self, now: Millis, born: Millis, every: u64, slots: bool) -> bool {
        let last = self.last_report;
        if every == 0 {
            return true;
        }
        let phase = self.phase.unwrap_or(0.0);
        if last.is_none() {
            // Its next request may come a gap like the last after this one: it goes now
            // if its phase would pass before then (a thin isolate's slot falls in a gap).
            return (now.since(born) + self.gap_ms) as f64 >= phase * every as f64;
        }
        if !slots {
            return last.is_none_or(|t| now.since(t) >= every);
        }
        // A slot's start passed since this isolate last looked: a fleet turning abnormal
        // together (its last reports a heartbeat back) still waits for its slots.
        let offset = (phase * every as f64) as u64;
        let slot = |t: Millis| (t.0 + every - offset) / every;
        let looked = last.max(self.looked).unwrap_or(born);
        slot(now) > slot(looked)
    }

    /// A call at `now` to this isolate's coordinator at `path` with `body` as JSON: a report
    /// to its region's, or to the global one while it stands in ([`failover`]); a watch
    /// always to its region's (only a region pushes).
    pub(super) fn call(
        &self,
        now: Millis,
        path: &'static str,
        body: &impl serde::Serialize,
        timeout_ms: u64,
    ) -> Option<FleetReport> {
        let (object, hint) = if path == super::WATCH_PATH {
            self.region_target()
        } else {
            self.target(now)
        };
        Some(FleetReport {
            path,
            binding: self.fleet.coordinator.clone(),
            object,
            hint,
            body: serde_json::to_string(body).ok()?,
            timeout_ms,
        })
    }
}
