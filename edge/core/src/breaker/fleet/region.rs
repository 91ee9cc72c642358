//! [F-SCOPE] A regional coordinator and the global one (ADR 011, "Regions and the global
//! merge"). Once per report interval a region sends its window to the global coordinator as
//! a report of its own — the region is one member, its buckets the region's sums — and
//! heeds the global verdict it gets back. The global coordinator is a [`Coordinator`] like
//! any other; only a region follows.

use super::super::rate::{wilson, SLOW_SHARE};
use super::sample::MIN_REPORTS;
use super::{Coordinator, Counts, FleetMode, Report, State, Verdict, BUCKETS, MAX_BUCKETS};
use crate::time::Millis;

impl Coordinator {
    /// This region's window as a report to the global coordinator: `region` names it, `seq`
    /// numbers it (increasing), its buckets are the region's sums over the window — with
    /// calls, failures and slow calls as the recent sample estimates them when it holds
    /// enough reports to judge on (the sums lag an onset by a pace; probes go out at once,
    /// so their sums do not).
    pub fn window_report(&mut self, now: Millis, region: &str, seq: u64) -> Report {
        let current = now.0 / self.bucket_ms();
        self.recent.expire(now);
        let judged = self.recent.len() >= MIN_REPORTS.min(self.isolates.len()).max(1);
        let buckets: Vec<Counts> = self
            .sums
            .range(..=current + 1)
            .rev()
            .take(MAX_BUCKETS)
            .map(|(epoch, c)| {
                let w = self.recent.totals(*epoch, *epoch);
                if !judged || w.seen < 0.5 {
                    return *c;
                }
                let n = |x: f64| x.round().clamp(0.0, f64::from(u32::MAX)) as u32;
                Counts {
                    calls: n(w.calls),
                    failures: n(w.failures),
                    slow: n(w.slow),
                    ..*c
                }
            })
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        Report {
            service: self.service.clone(),
            config: self.config.clone(),
            isolate: format!("region:{region}"),
            seq,
            buckets,
            period_ms: self.report_interval_ms,
        }
    }

    /// Whether this region has anything to say to the global coordinator at `now`: it
    /// keeps an isolate heard within the window. A driver that merges on a timer (the
    /// Durable Object's alarm) stops when this is false and starts again with the next
    /// report.
    pub fn merging(&mut self, now: Millis) -> bool {
        self.forget_silent(now);
        !self.isolates.is_empty()
    }

    /// The global verdict arrived: kept until it expires. One that stands on a single
    /// region's window (`sole`: the global coordinator heard no other) is this region's
    /// own evidence a merge later, and is not heeded — a fleet in one region decides as
    /// one coordinator does.
    pub fn heed(&mut self, verdict: Verdict) {
        if verdict.sole.is_some() {
            return;
        }
        if self
            .global
            .as_ref()
            .is_none_or(|g| verdict.issued_at >= g.issued_at)
        {
            self.global = Some(verdict);
        }
    }

    /// The global verdict this region follows at `now`, its own fleet closed: an
    /// unexpired one that is not closed, unless the region's own recent reports show the
    /// model healthy here — `min_calls` calls or more, their slow share's upper bound under
    /// seed 000's 5% and their failures under its ratio. A region with no recent word
    /// follows; a model slow for another region does not open one whose isolates see it
    /// answer well.
    pub(super) fn followed(&mut self, now: Millis) -> Option<Verdict> {
        let g = self.global.as_ref()?;
        if now.0 >= g.expires_at || g.mode == FleetMode::Closed {
            return None;
        }
        let g = g.clone();
        (!self.healthy_here(now)).then_some(g)
    }

    /// Whether this region's evidence shows the model answering well: its recent reports
    /// when they are enough to judge on, else its window (a region whose isolates are
    /// healthy report at a heartbeat's pace, so a small one's recent sample is thin while
    /// its window holds every call). Either way `min_calls` calls or more, their slow
    /// share's upper bound under seed 000's 5% and their failures under its ratio.
    fn healthy_here(&mut self, now: Millis) -> bool {
        self.recent.expire(now);
        let current = now.0 / self.bucket_ms();
        let oldest = current
            .saturating_sub(BUCKETS as u64 - 1)
            .max(self.fresh_from);
        let min = f64::from(self.cfg.min_calls.max(1));
        let t = self.recent.totals(oldest, current + 1);
        if self.recent.len() >= MIN_REPORTS && t.seen >= min && t.calls > 0.0 {
            let seen = t.seen.round() as u32;
            let slow = (t.slow / t.calls * t.seen).round() as u32;
            return wilson(slow, seen).1 < SLOW_SHARE
                && t.failures < self.cfg.failure_ratio * t.calls;
        }
        let w = self.totals(now, self.fresh_from);
        f64::from(w.calls) >= min
            && wilson(w.slow, w.calls).1 < SLOW_SHARE
            && f64::from(w.failures) < self.cfg.failure_ratio * f64::from(w.calls)
    }

    /// A region that passed on the global opening follows it no more: the global fleet
    /// closed (a recovery from its probing) or this region's own evidence shows the model
    /// healthy (from `now`). Its isolates adopted the opening; the recovery its closed
    /// verdict names lets them close with a fresh window rather than probe alone.
    pub(super) fn let_go(&mut self, now: Millis) {
        let Some(probing) = self.following.take() else {
            return;
        };
        let closed = self.global.as_ref().filter(|g| g.mode == FleetMode::Closed);
        let from = closed.and_then(|g| g.probing_since).or(probing);
        self.recovered_from = Some(Millis(from.unwrap_or(now.0)));
    }

    /// A region open on its own evidence recovers with the global fleet: the global
    /// verdict is a close after probing that began after this region opened, and none of
    /// the region's own probes since failed.
    pub(super) fn recover_with_global(&mut self, now: Millis) {
        let Some(g) = self.global.as_ref().filter(|g| now.0 < g.expires_at) else {
            return;
        };
        let (FleetMode::Closed, Some(probing)) = (g.mode, g.probing_since) else {
            return;
        };
        let opened = match self.state {
            State::Open { since, .. } | State::Probing { opened: since, .. } => since,
            State::Closed => return,
        };
        if opened.0 > probing {
            return;
        }
        let t = self.totals(now, Millis(probing).0 / self.bucket_ms());
        if t.probes > t.probe_ok || t.probe_slow > 0 {
            return;
        }
        self.state = State::Closed;
        self.recovered_from = Some(Millis(probing));
        self.fresh_from = now.0 / self.bucket_ms() + 1;
        self.recent.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::seed_rate_breaker;

    fn coordinator() -> Coordinator {
        Coordinator::new("svc", "cfg-1", seed_rate_breaker(), 1_000)
    }

    /// Isolate `k`'s report at `at` ms: `calls` calls in its bucket, all slow or none.
    fn slow_report(k: usize, at: u64, calls: u32, slow: bool) -> Report {
        Report {
            service: "svc".into(),
            config: "cfg-1".into(),
            isolate: format!("iso-{k}"),
            seq: 1,
            buckets: vec![Counts {
                epoch: at / 3_000,
                calls,
                slow: if slow { calls } else { 0 },
                ..Counts::default()
            }],
            period_ms: 0,
        }
    }

    #[test]
    fn a_thin_region_follows_the_global_opening_and_one_with_evidence_does_not() {
        let mut global = coordinator();
        let mut busy = coordinator();
        let mut thin = coordinator();
        let mut healthy = coordinator();
        // The busy region's isolates: every call slow.
        for k in 0..40 {
            busy.report(Millis(1_000), slow_report(k, 1_000, 10, true))
                .unwrap();
        }
        assert_eq!(busy.verdict(Millis(1_000)).mode, FleetMode::Open);
        // The healthy region has evidence: 400 calls, none slow.
        for k in 0..40 {
            healthy
                .report(Millis(1_000), slow_report(k, 1_000, 10, false))
                .unwrap();
        }
        // The thin one: 4 calls, fine.
        thin.report(Millis(1_000), slow_report(0, 1_000, 4, false))
            .unwrap();
        for (i, r) in [&mut busy, &mut healthy, &mut thin].into_iter().enumerate() {
            global
                .report(
                    Millis(1_100),
                    r.window_report(Millis(1_100), &format!("r{i}"), 1),
                )
                .unwrap();
        }
        let g = global.verdict(Millis(1_100));
        assert_eq!(
            g.mode,
            FleetMode::Open,
            "400 slow of 804: the fleet is slow"
        );
        healthy.heed(g.clone());
        thin.heed(g.clone());
        assert_eq!(healthy.verdict(Millis(1_200)).mode, FleetMode::Closed);
        assert_eq!(thin.verdict(Millis(1_200)).mode, FleetMode::Open);
        assert!(thin.moved(), "the thin region's watches hear it");
        // Expired: the thin region decides on its own again.
        assert_eq!(thin.verdict(Millis(g.expires_at)).mode, FleetMode::Closed);
    }

    /// A fleet in one region: the global coordinator hears that region alone and names it
    /// `sole`; the region does not follow that verdict (its own evidence a merge later), so
    /// it decides as a single coordinator does. A region merges while it keeps an isolate.
    #[test]
    fn a_region_alone_ignores_the_global_verdict_on_its_own_window_and_merges_while_it_keeps_isolates(
    ) {
        let mut global = coordinator();
        let mut region = coordinator();
        assert!(
            !region.merging(Millis(1_000)),
            "nothing heard: nothing to say"
        );
        for k in 0..40 {
            region
                .report(Millis(1_000), slow_report(k, 1_000, 10, true))
                .unwrap();
        }
        assert!(region.merging(Millis(1_000)));
        let g = global
            .report(
                Millis(1_100),
                region.window_report(Millis(1_100), "enam", 1),
            )
            .unwrap();
        assert_eq!(g.mode, FleetMode::Open);
        assert_eq!(g.sole.as_deref(), Some("region:enam"));
        region.heed(g);
        assert!(region.global.is_none(), "a sole verdict is not heeded");
        // Silent for a whole window: nothing left to merge.
        assert!(!region.merging(Millis(1_000 + 30_000)));
    }

    /// A region that passed the global opening on, then sees the model healthy here,
    /// closes with a recovery named in its verdict: its isolates adopted the opening, and
    /// let it go with a fresh window rather than probe alone.
    #[test]
    fn a_region_that_stops_following_names_a_recovery_for_its_isolates() {
        let mut region = coordinator();
        region
            .report(Millis(1_000), slow_report(0, 1_000, 4, false))
            .unwrap();
        let mut open = region.verdict(Millis(1_000));
        open.mode = FleetMode::Open;
        open.opened_at = Some(900);
        open.issued_at = 1_000;
        open.expires_at = 60_000;
        open.sole = None;
        region.heed(open);
        let v = region.verdict(Millis(1_100));
        assert_eq!(
            v.mode,
            FleetMode::Open,
            "4 calls: too thin to judge, it follows"
        );
        assert_eq!(v.probing_since, None);
        // Its isolates' reports come in: 400 calls, none slow — the model answers well here.
        for k in 1..41 {
            region
                .report(Millis(2_000), slow_report(k, 2_000, 10, false))
                .unwrap();
        }
        let v = region.verdict(Millis(2_000));
        assert_eq!(v.mode, FleetMode::Closed);
        assert_eq!(v.probing_since, Some(2_000), "a recovery from now");
        assert!(region.moved(), "the watches hear it");
        // Named once: later verdicts carry the same recovery.
        assert_eq!(region.verdict(Millis(2_500)).probing_since, Some(2_000));
    }

    /// A region that opened on its own recovers with the global fleet's close, when the
    /// global probing began after it opened — not on a close from before its opening.
    #[test]
    fn a_region_recovers_with_the_global_close_that_followed_its_opening() {
        let mut region = coordinator();
        for k in 0..40 {
            region
                .report(Millis(1_000), slow_report(k, 1_000, 10, true))
                .unwrap();
        }
        assert_eq!(region.verdict(Millis(1_000)).mode, FleetMode::Open);
        let closed = |probing: u64, at: u64| Verdict {
            mode: FleetMode::Closed,
            calls: 0,
            failures: 0,
            slow: 0,
            probes: 40,
            probe_ok: 40,
            isolates: 9,
            issued_at: at,
            expires_at: at + 3_000,
            opened_at: None,
            probing_since: Some(probing),
            pace_ms: 0,
            heartbeat_ms: 0,
            sole: None,
        };
        region.heed(closed(500, 5_000));
        assert_eq!(
            region.verdict(Millis(5_000)).mode,
            FleetMode::Open,
            "older probing"
        );
        region.heed(closed(4_000, 5_100));
        let v = region.verdict(Millis(5_100));
        assert_eq!(v.mode, FleetMode::Closed);
        assert_eq!(v.probing_since, Some(4_000));
        assert!(region.moved());
    }
}
