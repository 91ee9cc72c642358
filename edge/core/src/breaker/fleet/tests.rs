//! The coordinator against seed 000's numbers: thin isolates, pooled evidence, expiry.

use std::collections::BTreeMap;

use super::*;
use crate::testing::seed_rate_breaker;

fn coordinator() -> Coordinator {
    Coordinator::new("svc", "cfg-1", seed_rate_breaker(), 1_000)
}

/// One isolate as the coordinator sees it: its counts per bucket, and its reports.
struct Sim {
    id: String,
    seq: u64,
    buckets: BTreeMap<u64, Counts>,
}

impl Sim {
    fn new(i: usize) -> Sim {
        Sim {
            id: format!("iso-{i}"),
            seq: 0,
            buckets: BTreeMap::new(),
        }
    }

    fn bucket(&mut self, now: Millis) -> &mut Counts {
        let epoch = now.0 / 3_000;
        self.buckets.entry(epoch).or_insert(Counts {
            epoch,
            ..Counts::default()
        })
    }

    fn call(&mut self, now: Millis, ok: bool, latency_ms: u64) {
        let b = self.bucket(now);
        b.calls += 1;
        b.failures += u32::from(!ok);
        b.slow += u32::from(latency_ms > 45);
    }

    fn probe(&mut self, now: Millis, ok: bool, latency_ms: u64) {
        let b = self.bucket(now);
        b.probes += 1;
        b.probe_ok += u32::from(ok && latency_ms <= 45);
        b.probe_slow += u32::from(latency_ms > 40);
    }

    fn report(&mut self, now: Millis) -> Report {
        self.seq += 1;
        let oldest = (now.0 / 3_000).saturating_sub(9);
        self.buckets.retain(|e, _| *e >= oldest);
        Report {
            service: "svc".into(),
            config: "cfg-1".into(),
            isolate: self.id.clone(),
            seq: self.seq,
            buckets: self.buckets.values().copied().collect(),
            period_ms: 0,
        }
    }
}

/// `n` isolates sharing `rate` requests a second, each reporting every second, from `from`
/// to `to` (ms); the model fails from `fail_from` until `fail_to`. Isolates follow the
/// fleet's verdict (no call while it is open, `probe_fraction` of requests as probes while
/// it probes). Returns the instants the verdict changed mode, with the mode.
fn run(n: usize, rate: f64, to: u64, fail: (u64, u64)) -> Vec<(u64, FleetMode)> {
    let mut c = coordinator();
    let mut sims: Vec<Sim> = (0..n).map(Sim::new).collect();
    let mut mode = FleetMode::Closed;
    let mut changes = Vec::new();
    let mut credit = 0.0;
    let step_ms = 10u64;
    let per_step = rate * step_ms as f64 / 1_000.0;
    let mut carry = 0.0;
    let mut next = 0usize;
    for t in (0..to).step_by(step_ms as usize) {
        let now = Millis(t);
        let failing = t >= fail.0 && t < fail.1;
        carry += per_step;
        while carry >= 1.0 {
            carry -= 1.0;
            let s = &mut sims[next % n];
            next += 1;
            match mode {
                // The fault: seed 000's model, slow past the deadline (a timeout).
                FleetMode::Closed => s.call(now, !failing, if failing { 800 } else { 25 }),
                FleetMode::Open => {}
                FleetMode::Probing => {
                    credit += 0.02;
                    if credit >= 1.0 {
                        credit -= 1.0;
                        s.probe(now, !failing, if failing { 800 } else { 25 });
                    }
                }
            }
        }
        // Each isolate reports once a second, staggered.
        for (i, s) in sims.iter_mut().enumerate() {
            if (t + i as u64 * 7) % 1_000 < step_ms {
                let v = c.report(now, s.report(now)).expect("merged");
                if v.mode != mode {
                    mode = v.mode;
                    changes.push((t, mode));
                }
            }
        }
    }
    changes
}

#[test]
fn thin_isolates_degrade_and_recover_within_seed_000s_bounds_on_the_fleets_evidence() {
    // Seed 000's 2,400 req/s over 300 isolates: 8 a second each. Fault from 60 s to 120 s.
    let changes = run(300, 2_400.0, 200_000, (60_000, 120_000));
    eprintln!("fault 60–120 s: {changes:?}");
    let opened = changes
        .iter()
        .find(|(_, m)| *m == FleetMode::Open)
        .expect("opened")
        .0;
    // As fast as one isolate seeing all the traffic (the window's evidence, ~1.6 s at this
    // rate) plus at most one report interval: inside seed 000's 3 s.
    assert!(
        (60_000..=63_000).contains(&opened),
        "degraded {} ms after the onset: {changes:?}",
        opened - 60_000
    );
    let closed = changes
        .iter()
        .rfind(|(_, m)| *m == FleetMode::Closed)
        .expect("closed again")
        .0;
    // The hold-down expires inside the fault, the first probe fails and holds the fleet open
    // 60 s more; the next probing, after the fault's end, closes it within seed 000's 45 s.
    assert!(closed > 120_000, "{changes:?}");
    assert!(
        closed - 120_000 <= 45_000,
        "recovered {} ms after the fault's end: {changes:?}",
        closed - 120_000
    );
}

#[test]
fn pooled_probes_decide_in_under_a_second_where_one_thin_isolate_would_take_minutes() {
    // A fault shorter than the hold-down: probing starts after the fault has ended.
    let changes = run(300, 2_400.0, 120_000, (10_000, 20_000));
    eprintln!("fault 10–20 s: {changes:?}");
    let probing = changes
        .iter()
        .find(|(_, m)| *m == FleetMode::Probing)
        .expect("probed")
        .0;
    let closed = changes
        .iter()
        .rfind(|(_, m)| *m == FleetMode::Closed)
        .expect("closed")
        .0;
    assert!(closed > probing, "{changes:?}");
    // 2% of 2,400 req/s is 48 probes a second: 20 probes in ~0.4 s, reported within 1 s.
    assert!(
        closed - probing <= 2_000,
        "probing took {} ms: {changes:?}",
        closed - probing
    );
    // Recovered within seed 000's 45 s of the fault's end.
    assert!(closed - 20_000 <= 45_000, "{changes:?}");
}

#[test]
fn a_failed_probe_anywhere_reopens_the_fleet_for_the_failed_probe_hold() {
    let mut c = coordinator();
    let mut s = Sim::new(1);
    for i in 0..40 {
        s.call(Millis(1_000 + i), false, 45);
    }
    assert_eq!(
        c.report(Millis(2_000), s.report(Millis(2_000)))
            .unwrap()
            .mode,
        FleetMode::Open
    );
    let v = c.verdict(Millis(32_000));
    assert_eq!(v.mode, FleetMode::Probing);
    s.probe(Millis(32_100), false, 45);
    let v = c.report(Millis(32_200), s.report(Millis(32_200))).unwrap();
    assert_eq!(v.mode, FleetMode::Open);
    assert_eq!(c.verdict(Millis(92_100)).mode, FleetMode::Open, "60 s more");
    assert_eq!(c.verdict(Millis(92_300)).mode, FleetMode::Probing);
}

#[test]
fn a_report_counts_once_however_often_it_arrives_and_a_late_one_not_at_all() {
    let mut c = coordinator();
    let mut s = Sim::new(1);
    for i in 0..15 {
        s.call(Millis(1_000 + i), false, 45);
    }
    let first = s.report(Millis(1_500));
    for _ in 0..5 {
        let v = c.report(Millis(1_500), first.clone()).unwrap();
        assert_eq!(
            (v.calls, v.mode),
            (15, FleetMode::Closed),
            "15 calls, not 75"
        );
    }
    s.call(Millis(1_600), true, 25);
    let second = s.report(Millis(1_700));
    assert_eq!(c.report(Millis(1_700), second).unwrap().calls, 16);
    let late = Report { seq: 1, ..first };
    assert_eq!(
        c.report(Millis(1_800), late).unwrap().calls,
        16,
        "an older report is ignored"
    );
}

#[test]
fn reports_of_another_service_or_settings_or_unreadable_are_refused() {
    let mut c = coordinator();
    let mut s = Sim::new(1);
    let r = s.report(Millis(1));
    assert_eq!(
        c.report(
            Millis(1),
            Report {
                service: "other".into(),
                ..r.clone()
            }
        ),
        Err(Refusal::OtherService("other".into()))
    );
    assert_eq!(
        c.report(
            Millis(1),
            Report {
                config: "cfg-2".into(),
                ..r.clone()
            }
        ),
        Err(Refusal::OtherConfig("cfg-2".into()))
    );
    let many = Report {
        buckets: vec![Counts::default(); 12],
        ..r
    };
    assert_eq!(c.report(Millis(1), many), Err(Refusal::TooManyBuckets(12)));
    match Coordinator::parse(
        r#"{"service":"svc","config":"cfg-1","isolate":"a","seq":1,"buckets":[],"extra":1}"#,
    ) {
        Err(Refusal::Malformed(m)) => assert!(m.contains("extra"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        Coordinator::parse("{"),
        Err(Refusal::Malformed(_))
    ));
    let ok = Coordinator::parse(
        r#"{"service":"svc","config":"cfg-1","isolate":"a","seq":1,"buckets":[]}"#,
    );
    assert!(ok.is_ok(), "{ok:?}");
}

#[test]
fn a_verdict_expires_three_report_intervals_after_it_was_issued() {
    let mut c = coordinator();
    let v = c
        .report(Millis(5_000), Sim::new(1).report(Millis(5_000)))
        .unwrap();
    assert_eq!((v.issued_at, v.expires_at), (5_000, 8_000));
}

#[test]
fn an_isolate_silent_for_a_window_no_longer_counts() {
    let mut c = coordinator();
    let mut a = Sim::new(1);
    for i in 0..10 {
        a.call(Millis(1_000 + i), true, 25);
    }
    c.report(Millis(1_500), a.report(Millis(1_500))).unwrap();
    let mut b = Sim::new(2);
    let v = c.report(Millis(20_000), b.report(Millis(20_000))).unwrap();
    assert_eq!(v.isolates, 2);
    let v = c.report(Millis(32_000), b.report(Millis(32_000))).unwrap();
    assert_eq!((v.isolates, v.calls), (1, 0), "{v:?}");
}

/// Watches are answered when the fleet opens or closes, not when it starts probing; a watch
/// from an isolate that heard otherwise is answered at once; another service is refused.
#[test]
fn watches_move_on_opening_and_closing_only() {
    let cfg = seed_rate_breaker();
    let mut c = Coordinator::new("svc", "cfg-1", cfg.clone(), 1_000);
    let w = |seen| Watch {
        service: "svc".into(),
        config: "cfg-1".into(),
        isolate: "a".into(),
        seen,
        hold_ms: None,
    };
    assert_eq!(
        c.watch(Millis(1_000), &w(Some(FleetMode::Closed))),
        Ok(None)
    );
    assert_eq!(c.watch(Millis(1_000), &w(None)), Ok(None));
    let answered = c.watch(Millis(1_000), &w(Some(FleetMode::Open))).unwrap();
    assert_eq!(answered.map(|v| v.mode), Some(FleetMode::Closed));
    let other = Watch {
        service: "other".into(),
        ..w(None)
    };
    assert!(matches!(
        c.watch(Millis(1_000), &other),
        Err(Refusal::OtherService(_))
    ));
    assert!(!c.moved());
    let mut a = Sim::new(0);
    for t in (0..3_000).step_by(100) {
        a.call(Millis(t), false, 500);
    }
    let v = c.report(Millis(3_000), a.report(Millis(3_000))).unwrap();
    assert_eq!(v.mode, FleetMode::Open);
    assert!(c.moved());
    assert!(!c.moved(), "once");
    // The hold-down ends: probing is no move for the watches.
    let v = c.verdict(Millis(3_000 + cfg.hold_down_ms));
    assert_eq!(v.mode, FleetMode::Probing);
    assert!(!c.moved());
    assert_eq!(
        c.watch(Millis(3_000 + cfg.hold_down_ms), &w(Some(FleetMode::Open))),
        Ok(None)
    );
}

use super::sample::MIN_REPORTS;

/// The recent sample trips the fleet when the full window still lags: 600 isolates that
/// report every 8 s, a quarter of them heard since the onset, all slow since then.
#[test]
fn the_recent_sample_trips_before_the_lagging_window_does() {
    let mut c = coordinator();
    let mut sims: Vec<Sim> = (0..600).map(Sim::new).collect();
    // 30 s of healthy calls, one a second each, every isolate heard once at its slot.
    for t in (0..30_000u64).step_by(1_000) {
        for s in sims.iter_mut() {
            s.call(Millis(t), true, 25);
        }
    }
    for (k, s) in sims.iter_mut().enumerate() {
        let at = Millis(22_000 + (k as u64 % 8) * 1_000);
        let mut r = s.report(at);
        r.period_ms = 8_000;
        c.report(at, r).unwrap();
    }
    // From 30 s every call is slow; 150 isolates report in the next second.
    for t in [30_000u64, 30_500, 31_000, 31_500] {
        for s in sims.iter_mut() {
            s.call(Millis(t), true, 500);
        }
    }
    let mut open = None;
    for (k, s) in sims.iter_mut().enumerate().take(150) {
        let at = Millis(31_500 + k as u64 * 5);
        let mut r = s.report(at);
        r.period_ms = 8_000;
        let v = c.report(at, r).unwrap();
        if v.mode == FleetMode::Open && open.is_none() {
            open = Some(k);
        }
    }
    // The window alone holds 600 slow calls of ~18,600 — 3% of the fleet's window, under
    // the p95 rule's 5% — the sample, a quarter of the fleet's reports weighted alike, 13%.
    let k = open.expect("the sample trips within 150 reports");
    assert!(
        k + 1 >= MIN_REPORTS,
        "not on a handful: opened after {k} reports"
    );
    assert!(
        c.pace_ms() > 1_000,
        "600 isolates: a pace of {} ms",
        c.pace_ms()
    );
}

/// A fleet of one: the verdict names the isolate whose reports alone make the window, and a
/// second isolate (or none) names nobody. While the fleet probes, the lone isolate's own
/// breaker decides for it (`Verdict::sole`): once that closed, its calls count as probes and
/// the fleet closes with it instead of probing on probes nobody sends.
#[test]
fn a_lone_isolate_is_named_sole_and_its_calls_close_the_fleets_probing() {
    let mut c = coordinator();
    let mut a = Sim::new(0);
    for i in 0..40u64 {
        a.call(Millis(1_000 + i * 10), false, 500);
    }
    let v = c.report(Millis(1_500), a.report(Millis(1_500))).unwrap();
    assert_eq!(v.mode, FleetMode::Open);
    assert_eq!(v.sole.as_deref(), Some("iso-0"));
    let v = c.verdict(Millis(31_600));
    assert_eq!(
        (v.mode, v.sole.as_deref()),
        (FleetMode::Probing, Some("iso-0"))
    );
    // Its own breaker closed on its own probes: it calls the model again, and reports it.
    for i in 0..30u64 {
        a.call(Millis(33_000 + i * 10), true, 20);
    }
    let v = c.report(Millis(33_500), a.report(Millis(33_500))).unwrap();
    assert_eq!(v.mode, FleetMode::Closed, "{v:?}");
    // A region of one that hears the global verdict: the other regions' evidence may move
    // it, and it names nobody.
    let mut global = c.verdict(Millis(34_000));
    global.sole = None;
    c.heed(global);
    assert_eq!(c.verdict(Millis(34_100)).sole, None);

    // Two isolates: neither is sole, and calls while probing are no probes.
    let mut c = coordinator();
    let (mut a, mut b) = (Sim::new(0), Sim::new(1));
    for i in 0..40u64 {
        a.call(Millis(1_000 + i * 10), false, 500);
    }
    b.call(Millis(1_000), true, 20);
    c.report(Millis(1_400), b.report(Millis(1_400))).unwrap();
    let v = c.report(Millis(1_500), a.report(Millis(1_500))).unwrap();
    assert_eq!((v.mode, v.sole), (FleetMode::Open, None));
    assert_eq!(c.verdict(Millis(31_600)).mode, FleetMode::Probing);
    for i in 0..30u64 {
        a.call(Millis(33_000 + i * 10), true, 20);
    }
    c.report(Millis(33_400), b.report(Millis(33_400))).unwrap();
    let v = c.report(Millis(33_500), a.report(Millis(33_500))).unwrap();
    assert_eq!((v.mode, v.sole), (FleetMode::Probing, None));
}
