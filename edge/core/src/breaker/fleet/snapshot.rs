//! [F-SCOPE] The coordinator's snapshot (ADR 011, "The coordinator is a dependency like any
//! other"): what a restarted object resumes from — the fleet's mode and its times (open
//! since and until, probing since, the last recovery), the window's fresh start, and the
//! last global verdict a region heard — written to the object's storage at most once per
//! [`SNAPSHOT_EVERY_MS`], when a decision in it changed (a healthy fleet writes nothing). The window's counts are not in it: every report
//! carries its isolate's whole window, so the first round of reports after a restart
//! rebuilds them, while a fleet that was open stays open through it instead of answering
//! `CLOSED` on an empty window (over 10,000 isolates with every region's coordinator reset
//! during seed 000's outage, isolates that had not heard the opening yet met a closed
//! fleet for seconds).

use serde::{Deserialize, Serialize};

use super::{Coordinator, State, Verdict};
use crate::time::Millis;

/// At most one snapshot write per this long.
pub const SNAPSHOT_EVERY_MS: u64 = 1_000;

/// What a coordinator writes to its storage, as JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// When it was taken (the coordinator's clock).
    pub at: Millis,
    state: State,
    fresh_from: u64,
    recovered_from: Option<Millis>,
    global: Option<Verdict>,
    following: Option<Option<u64>>,
    /// How many isolates it kept: a restarted coordinator whose fleet had several does not
    /// call the first isolate to report again alone (`Verdict::sole`).
    #[serde(default)]
    isolates: usize,
}

impl Snapshot {
    /// Whether `self`, taken at `now`, is to be written over `last` (the one in storage): when
    /// none is stored, or its decisions changed and the last write is [`SNAPSHOT_EVERY_MS`]
    /// old. The Durable Object asks after each call it answers, and writes.
    pub fn due(&self, last: Option<&Snapshot>, now: Millis) -> bool {
        last.is_none_or(|last| !last.same(self) && now.since(last.at) >= SNAPSHOT_EVERY_MS)
    }

    /// Whether `other` holds the same decisions: the same mode and times, and a global
    /// verdict of the same mode and times (its counts and issue time move with every merge;
    /// writing them would cost a storage write a second per region while nothing changes).
    pub fn same(&self, other: &Snapshot) -> bool {
        let g = |s: &Snapshot| {
            s.global
                .as_ref()
                .map(|v| (v.mode, v.opened_at, v.probing_since))
        };
        (
            self.state,
            self.fresh_from,
            self.recovered_from,
            self.following,
        ) == (
            other.state,
            other.fresh_from,
            other.recovered_from,
            other.following,
        ) && g(self) == g(other)
            && (self.isolates > 1) == (other.isolates > 1)
    }
}

impl Coordinator {
    /// What a restart must not forget, at `now`.
    pub fn snapshot(&self, now: Millis) -> Snapshot {
        Snapshot {
            at: now,
            state: self.state,
            fresh_from: self.fresh_from,
            recovered_from: self.recovered_from,
            global: self.global.clone(),
            following: self.following,
            isolates: self.isolates.len().max(self.resumed_fleet(now)),
        }
    }

    /// A coordinator that restarted resumes from `snap` (its window rebuilds from the next
    /// reports). A snapshot older than the window holds nothing the fleet still decides on
    /// and is ignored, so is one taken after `now` (another clock).
    pub fn restore(&mut self, now: Millis, snap: Snapshot) {
        if snap.at > now || now.since(snap.at) >= self.cfg.window_ms {
            return;
        }
        self.state = snap.state;
        self.fresh_from = snap.fresh_from;
        self.recovered_from = snap.recovered_from;
        self.global = snap.global;
        self.following = snap.following;
        self.closed = !matches!(self.state, State::Open { .. } | State::Probing { .. })
            && self.following.is_none();
        self.resumed_fleet = Some((now.plus(self.cfg.window_ms), snap.isolates));
    }

    /// How many isolates the fleet this coordinator resumed within the last window kept (0:
    /// none resumed): while several, the first of them to report again is not alone, and
    /// its own breaker does not decide for it on a window that has only begun to rebuild.
    pub(super) fn resumed_fleet(&self, now: Millis) -> usize {
        self.resumed_fleet
            .filter(|(until, _)| now < *until)
            .map_or(0, |(_, n)| n)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Counts, FleetMode, Report};
    use super::*;
    use crate::testing::seed_rate_breaker;

    fn restarted() -> Coordinator {
        Coordinator::new("svc", "cfg-1", seed_rate_breaker(), 1_000)
    }

    #[test]
    fn a_snapshot_is_written_when_none_is_stored_or_its_decisions_changed_a_second_on() {
        let c = restarted();
        let first = c.snapshot(Millis(10_000));
        assert!(first.due(None, Millis(10_000)));
        // The same decisions later: nothing to write.
        let again = c.snapshot(Millis(60_000));
        assert!(!again.due(Some(&first), Millis(60_000)));
        // Other decisions: written once the last write is a second old, not sooner.
        let mut moved = c.snapshot(Millis(10_500));
        moved.fresh_from += 1;
        assert!(!moved.due(Some(&first), Millis(10_500)));
        assert!(moved.due(Some(&first), Millis(10_000 + SNAPSHOT_EVERY_MS)));
    }

    #[test]
    fn a_restarted_coordinator_resumes_open_from_its_snapshot() {
        let mut c = restarted();
        let at = 1_000;
        // 30 isolates, one slow call each: the fleet opens.
        for k in 0..30 {
            let slow = Counts {
                epoch: at / 1_000,
                calls: 1,
                slow: 1,
                ..Counts::default()
            };
            let report = Report {
                service: "svc".into(),
                config: "cfg-1".into(),
                isolate: format!("iso-{k}"),
                seq: 1,
                buckets: vec![slow],
                period_ms: 0,
            };
            let _ = c.report(Millis(at), report);
        }
        let open = c.verdict(Millis(at));
        assert_eq!(open.mode, FleetMode::Open);
        let snap = c.snapshot(Millis(at));
        let text = serde_json::to_string(&snap).unwrap();
        // Restarted empty, it would answer closed; from the snapshot it is still open.
        assert_eq!(
            restarted().verdict(Millis(at + 500)).mode,
            FleetMode::Closed
        );
        let mut back = restarted();
        back.restore(Millis(at + 500), serde_json::from_str(&text).unwrap());
        let v = back.verdict(Millis(at + 500));
        assert_eq!((v.mode, v.opened_at), (FleetMode::Open, open.opened_at));
        assert!(snap.same(&back.snapshot(Millis(at + 900))));
        // The first isolate to report again, the model answering it well: the fleet it
        // resumed kept 30, so it is not alone (its own breaker does not decide).
        let healthy = Report {
            service: "svc".into(),
            config: "cfg-1".into(),
            isolate: "iso-new".into(),
            seq: 1,
            buckets: vec![Counts {
                epoch: (at + 1_000) / 1_000,
                calls: 1,
                ..Counts::default()
            }],
            period_ms: 0,
        };
        let _ = back.report(Millis(at + 1_000), healthy.clone());
        let v = back.verdict(Millis(at + 1_000));
        assert_eq!((v.mode, v.isolates, v.sole), (FleetMode::Open, 1, None));
        // Nor is it once the snapshot is taken again: the resumed fleet is in it.
        let mut again = restarted();
        again.restore(Millis(at + 1_200), back.snapshot(Millis(at + 1_100)));
        let _ = again.report(Millis(at + 1_300), healthy.clone());
        assert_eq!(again.verdict(Millis(at + 1_300)).sole, None);
        // A fleet of one resumed: its isolate alone again, its own breaker decides.
        let mut one = restarted();
        let _ = one.report(Millis(at), healthy.clone());
        let mut lone = restarted();
        lone.restore(Millis(at + 100), one.snapshot(Millis(at)));
        let _ = lone.report(Millis(at + 1_000), healthy);
        assert_eq!(
            lone.verdict(Millis(at + 1_000)).sole.as_deref(),
            Some("iso-new")
        );
        // A snapshot older than the window is no state to resume.
        let mut late = restarted();
        late.restore(Millis(at + 40_000), snap);
        assert_eq!(late.verdict(Millis(at + 40_000)).mode, FleetMode::Closed);
    }
}
