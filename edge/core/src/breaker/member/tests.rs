//! An isolate in fleet scope: what a verdict does to it, when it reports, and what it does
//! when the coordinator is away.

use super::*;
use crate::breaker::fleet::{Coordinator, WATCH_MS};
use crate::testing::seed_rate_breaker;

fn scope() -> FleetScope {
    FleetScope {
        coordinator: "BREAKER_COORDINATOR".into(),
        report_interval_ms: 1_000,
        verdict_ttl_ms: 3_000,
    }
}

fn member() -> Member {
    let mut m = Member::new("svc", "", seed_rate_breaker(), scope());
    m.identify(7);
    // Its first report goes at once (a fleet's first reports spread over a heartbeat:
    // `a_healthy_isolates_first_report_goes_at_its_phase_of_a_heartbeat`).
    m.set_phase(0.0);
    m
}

fn verdict(mode: FleetMode, issued_at: u64) -> Verdict {
    Verdict {
        mode,
        calls: 100,
        failures: 100,
        slow: 100,
        probes: 0,
        probe_ok: 0,
        isolates: 300,
        issued_at,
        expires_at: issued_at + 3_000,
        opened_at: (mode != FleetMode::Closed).then_some(issued_at),
        probing_since: None,
        pace_ms: 0,
        heartbeat_ms: 0,
        sole: None,
    }
}

fn ok(ms: u64) -> Outcome {
    Outcome::success(ms)
}

#[test]
fn the_fleets_open_verdict_opens_a_healthy_isolate_which_keeps_it_when_the_verdict_expires() {
    let mut m = member();
    assert_eq!(m.admit(Millis(1_000)), Admission::Call);
    m.report_due(Millis(1_000))
        .expect("the first request reports");
    m.heard(Millis(1_010), verdict(FleetMode::Open, 1_005));
    assert_eq!(m.admit(Millis(1_020)), Admission::Reject);
    assert_eq!(m.mode(Millis(1_020)), Mode::Open);
    assert!(m.fleet_led(Millis(1_020)));
    // The next report goes out and is never answered: three seconds after the verdict
    // arrived, on this isolate's clock, it is gone…
    assert!(m.report_due(Millis(2_010)).is_some());
    assert!(m.fleet_led(Millis(4_009)));
    assert!(!m.fleet_led(Millis(4_010)));
    assert_eq!(m.health(), Health::Expired);
    // …and the isolate carries on as one that opened when the fleet did: open for its own
    // hold-down, then probing on its own.
    assert_eq!(m.admit(Millis(4_010)), Admission::Reject);
    assert_eq!(m.admit(Millis(31_009)), Admission::Reject);
    assert_eq!(m.admit(Millis(31_010)), Admission::Probe);
    let t = m.transitions();
    assert_eq!(
        (t[0].from, t[0].to, t[0].at),
        (Mode::Healthy, Mode::Open, Millis(1_010))
    );
    assert_eq!((t[1].to, t[1].at), (Mode::Probing, Millis(31_010)));
}

#[test]
fn a_verdict_is_timed_on_the_isolates_clock_not_the_coordinators() {
    let mut m = member();
    m.report_due(Millis(1_000)).unwrap();
    // The coordinator's clock is an hour ahead: its expiry (in its clock) means nothing
    // here; the verdict still holds three seconds from its arrival.
    let mut v = verdict(FleetMode::Open, 3_601_000);
    v.expires_at = 3_604_000;
    m.heard(Millis(1_000), v);
    assert!(m.report_due(Millis(2_000)).is_some());
    assert!(m.fleet_led(Millis(3_999)));
    assert!(!m.fleet_led(Millis(4_000)));
    // The adopted opening is dated on this isolate's clock too: its hold-down ends 30 s
    // after the verdict arrived, not an hour off.
    assert_eq!(m.admit(Millis(30_999)), Admission::Reject);
    assert_eq!(m.admit(Millis(31_000)), Admission::Probe);
}

#[test]
fn a_probing_fleet_makes_a_thin_isolate_probe_its_share_and_a_failed_probe_stops_it() {
    let mut m = member();
    m.report_due(Millis(0)).unwrap();
    m.heard(Millis(10), verdict(FleetMode::Open, 10));
    m.report_due(Millis(1_010)).unwrap();
    let mut v = verdict(FleetMode::Probing, 1_010);
    v.probing_since = Some(1_000);
    m.heard(Millis(1_010), v);
    let admissions: Vec<Admission> = (0..100).map(|i| m.admit(Millis(1_020 + i))).collect();
    let probes: Vec<usize> = admissions
        .iter()
        .enumerate()
        .filter(|(_, a)| **a == Admission::Probe)
        .map(|(i, _)| i)
        .collect();
    assert_eq!(
        probes,
        vec![0, 50],
        "2%: the first request, then one in fifty"
    );
    assert_eq!(m.mode(Millis(1_200)), Mode::Probing);
    m.record(Millis(1_200), Admission::Probe, Outcome::timeout(45));
    assert_eq!(
        m.mode(Millis(1_201)),
        Mode::Open,
        "seed 000: a failed probe aborts probing"
    );
    assert_eq!(m.admit(Millis(1_201)), Admission::Reject);
}

#[test]
fn the_fleets_recovery_closes_an_isolate_that_opened_before_it_probed_and_no_other() {
    let cfg = seed_rate_breaker();
    // Two isolates open on their own evidence: one before the fleet's probing, one after.
    let mut early = member();
    let mut late = member();
    for (m, at) in [(&mut early, 1_000u64), (&mut late, 32_000)] {
        for i in 0..cfg.min_calls as u64 {
            let a = m.admit(Millis(at + i));
            m.record(Millis(at + i), a, Outcome::timeout(45));
        }
        assert_eq!(m.mode(Millis(at + 100)), Mode::Open);
    }
    let mut closed = verdict(FleetMode::Closed, 33_000);
    closed.opened_at = None;
    closed.probing_since = Some(31_500);
    for m in [&mut early, &mut late] {
        m.report_due(Millis(33_000)).unwrap();
        m.heard(Millis(33_000), closed.clone());
    }
    assert_eq!(early.mode(Millis(33_001)), Mode::Healthy);
    assert_eq!(early.admit(Millis(33_001)), Admission::Call);
    assert_eq!(
        late.mode(Millis(33_001)),
        Mode::Open,
        "its own evidence is newer"
    );
}

#[test]
fn a_failing_coordinator_puts_the_isolate_back_in_isolate_scope_at_once() {
    let mut m = member();
    m.report_due(Millis(0)).unwrap();
    m.heard(Millis(5), verdict(FleetMode::Open, 5));
    assert_eq!(m.admit(Millis(1_000)), Admission::Reject);
    assert!(m.report_due(Millis(1_005)).is_some());
    // One report lost: sent again at once, the verdict holding meanwhile.
    assert_eq!(m.failed(Millis(1_300), "no answer within 500 ms"), None);
    assert_eq!(m.health(), Health::Ok);
    assert!(m.fleet_led(Millis(1_300)));
    assert!(m.again(Millis(1_300)).is_some());
    // Two in a row: the coordinator is failing.
    let lost = m.failed(Millis(1_350), "HTTP 500 from the coordinator");
    assert_eq!(lost.map(|c| c.event), Some("lost"));
    assert_eq!(m.health(), Health::Failing);
    // Isolate scope: its own breaker, which adopted the fleet's opening — still open, and
    // probing by itself once its hold-down is over. Open, it does not hurry to the global
    // coordinator: its next report goes one interval after the last, not after the
    // heartbeat.
    assert!(!m.fleet_led(Millis(1_351)));
    assert_eq!(m.admit(Millis(1_351)), Admission::Reject);
    assert!(m.again(Millis(1_351)).is_none());
    assert!(m.report_due(Millis(2_299)).is_none());
    assert!(m.report_due(Millis(2_300)).is_some());
    let s = m.status(Millis(2_300));
    assert_eq!(s["coordinator"]["health"], "failing");
    assert_eq!(s["coordinator"]["failures"], 2);
    assert_eq!(s["decided_by"], "isolate");
    assert_eq!(s["isolate_mode"], "DEGRADED_FALLBACK");
    assert_eq!(m.admit(Millis(30_005)), Admission::Probe);
}

#[test]
fn reports_come_every_interval_when_troubled_every_ten_when_healthy_one_at_a_time() {
    let mut m = Member::new("svc", "", seed_rate_breaker(), scope());
    assert!(
        m.report_due(Millis(0)).is_none(),
        "an isolate without an ID does not report"
    );
    m.identify(1);
    m.identify(2);
    m.set_phase(0.0);
    assert!(m.report_due(Millis(0)).is_some());
    assert!(m.report_due(Millis(2_000)).is_none(), "one in flight");
    m.heard(Millis(20), verdict(FleetMode::Closed, 20));
    assert!(
        m.report_due(Millis(9_999)).is_none(),
        "healthy: every ten intervals"
    );
    assert!(m.report_due(Millis(10_000)).is_some());
    m.heard(Millis(10_010), verdict(FleetMode::Closed, 10_010));
    let a = m.admit(Millis(10_500));
    m.record(Millis(10_500), a, Outcome::failure(3));
    assert!(m.report_due(Millis(10_999)).is_none());
    assert!(
        m.report_due(Millis(11_000)).is_some(),
        "a failure: every interval"
    );
    // A report never answered counts as failed once a verdict would have expired (and is
    // sent again at once); the second in a row is a failing coordinator.
    assert!(m.report_due(Millis(13_999)).is_none());
    assert!(m.report_due(Millis(14_000)).is_some());
    assert_eq!(m.health(), Health::Ok);
    assert!(m.report_due(Millis(17_000)).is_some());
    assert_eq!(m.health(), Health::Failing);
}

#[test]
fn the_coordinator_merges_what_a_member_reports() {
    let cfg = seed_rate_breaker();
    let config = settings_hash(&cfg, "");
    let mut c = Coordinator::new("svc", &config, cfg.clone(), 1_000);
    let mut m = member();
    // Located in western Europe at its first request; a later request's `cf` moves nothing.
    let cf = |continent, country| crate::breaker::fleet::place::Cf {
        continent: Some(continent),
        country: Some(country),
        longitude: None,
    };
    m.locate(Some(&cf("EU", "FR")));
    m.locate(Some(&cf("AS", "JP")));
    assert!(m.located());
    for i in 0..40u64 {
        let now = Millis(1_000 + i * 10);
        let a = m.admit(now);
        let outcome = if i == 30 || i == 35 {
            Outcome::timeout(45)
        } else {
            ok(20)
        };
        m.record(now, a, outcome);
    }
    let sent = m.report_due(Millis(1_500)).unwrap();
    assert_eq!(sent.binding, "BREAKER_COORDINATOR");
    assert_eq!(sent.object, format!("svc/{config}/weur"));
    assert_eq!(sent.hint, "weur");
    assert_eq!(sent.timeout_ms, REPORT_TIMEOUT_MS);
    let report = Coordinator::parse(&sent.body).expect("the coordinator reads a member's report");
    assert_eq!(report.config, config);
    assert_eq!(report.buckets.iter().map(|b| b.calls).sum::<u32>(), 40);
    assert_eq!(report.buckets.iter().map(|b| b.timeouts).sum::<u32>(), 2);
    assert_eq!(report.buckets.iter().map(|b| b.slow).sum::<u32>(), 2);
    let v = c.report(Millis(1_500), report).unwrap();
    assert_eq!(
        (v.mode, v.calls, v.failures, v.slow),
        (FleetMode::Closed, 40, 2, 2)
    );
    // Other settings (another release) are another coordinator's…
    let other = RateBreaker {
        min_calls: 21,
        ..cfg.clone()
    };
    assert_ne!(settings_hash(&other, ""), config);
    // …and so are the same settings in another policy (a canary that changes the deadline
    // alone): its isolates report to an object of their own, whose coordinator refuses the
    // other policy's reports.
    let mut canary = Member::new("svc", "canary", cfg.clone(), scope());
    canary.identify(8);
    canary.set_phase(0.0);
    let a = canary.admit(Millis(1_000));
    canary.record(Millis(1_000), a, ok(20));
    let sent = canary.report_due(Millis(1_500)).unwrap();
    assert_ne!(sent.object, format!("svc/{config}"));
    let refused = Coordinator::parse(&sent.body).and_then(|r| c.report(Millis(1_500), r));
    assert!(
        refused.is_err(),
        "a report of another policy is never merged"
    );
}

#[test]
fn an_idle_isolate_keeps_the_fleets_verdict_until_its_next_report_is_answered() {
    let mut m = member();
    m.report_due(Millis(0)).unwrap();
    m.heard(Millis(10), verdict(FleetMode::Open, 10));
    // No request for 20 s: no report was due, none was sent; the verdict still holds for
    // the first request after the gap (a window at most).
    assert_eq!(m.admit(Millis(20_000)), Admission::Reject);
    assert!(m.report_due(Millis(20_000)).is_some());
    assert!(m.fleet_led(Millis(20_499)), "its report is on its way");
    assert!(!m.fleet_led(Millis(20_500)), "unanswered: isolate scope");
    // Idle past a whole window: the verdict is gone, and the adopted opening's hold-down
    // too: the isolate probes on its own.
    let mut m = member();
    m.report_due(Millis(0)).unwrap();
    m.heard(Millis(10), verdict(FleetMode::Open, 10));
    assert!(!m.fleet_led(Millis(30_010)));
    assert_eq!(m.admit(Millis(30_010)), Admission::Probe);
}

#[test]
fn a_probes_outcome_is_reported_with_the_next_answer_whatever_the_interval() {
    let mut m = member();
    m.report_due(Millis(0)).unwrap();
    m.heard(Millis(10), verdict(FleetMode::Open, 10));
    assert!(m.report_due(Millis(1_010)).is_some());
    let mut v = verdict(FleetMode::Probing, 1_020);
    v.probing_since = Some(1_015);
    m.heard(Millis(1_020), v);
    assert_eq!(m.admit(Millis(1_030)), Admission::Probe);
    m.record(Millis(1_060), Admission::Probe, ok(25));
    let sent = m
        .report_due(Millis(1_061))
        .expect("50 ms after the last report: due at once");
    let r = Coordinator::parse(&sent.body).unwrap();
    assert_eq!(r.buckets.iter().map(|b| b.probe_ok).sum::<u32>(), 1);
    // Reported: back to the interval.
    m.heard(Millis(1_070), verdict(FleetMode::Probing, 1_070));
    assert!(m.report_due(Millis(1_100)).is_none());
}

/// Watches: a thin isolate renews a third of WATCH_MS apart (up to three open), a busy one
/// keeps one; none before the first report or while reports fail, and a failed watch waits
/// a report interval.
#[test]
fn watches_are_renewed_by_requests_and_stop_while_the_coordinator_fails() {
    let mut m = member();
    let paths = |v: &[FleetReport]| v.iter().map(|f| f.path).collect::<Vec<_>>();
    assert_eq!(paths(&m.calls_due(Millis(1_000))), ["/report", "/watch"]);
    m.heard(Millis(1_010), verdict(FleetMode::Closed, 1_005));
    // Thin: a request 10 s later renews, one 3 s after that does not (a third of WATCH_MS
    // apart at least), one 10 s later does; the fourth waits for one to end.
    assert_eq!(paths(&m.calls_due(Millis(11_000))), ["/report", "/watch"]);
    m.heard(Millis(11_010), verdict(FleetMode::Closed, 11_005));
    assert!(
        m.watch_due(Millis(14_000), true, WATCH_MS).is_none(),
        "too soon"
    );
    assert!(m.watch_due(Millis(21_000), true, WATCH_MS).is_some());
    assert!(
        m.watch_due(Millis(31_000), true, WATCH_MS).is_none(),
        "three open"
    );
    assert_eq!(
        m.watched(Millis(30_000), Some(verdict(FleetMode::Closed, 29_990))),
        None
    );
    assert!(m.watch_due(Millis(31_100), true, WATCH_MS).is_some());
    // Busy: one open, renewed once it ended; none before the first report.
    let mut b = member();
    assert!(
        b.watch_due(Millis(0), false, WATCH_MS).is_none(),
        "no report yet"
    );
    b.report_due(Millis(0)).unwrap();
    b.heard(Millis(10), verdict(FleetMode::Closed, 10));
    assert!(b.watch_due(Millis(100), false, WATCH_MS).is_some());
    assert!(b.watch_due(Millis(200), false, WATCH_MS).is_none());
    assert!(
        b.watch_due(Millis(WATCH_MS / 2), false, WATCH_MS).is_none(),
        "one open"
    );
    // A watch that failed is sent again at once, holding what it covered, up to twice in a
    // row; the next one that fails waits a report interval, and a watch of its own resets
    // that.
    assert_eq!(b.watched(Millis(1_000), None), None);
    let again = b.watch_again(Millis(1_000)).expect("sent again at once");
    assert_eq!(again.path, "/watch");
    let w = Coordinator::parse_watch(&again.body).unwrap();
    assert_eq!(
        w.hold_ms(),
        100 + WATCH_MS - 1_000,
        "what the failed one covered"
    );
    assert!(b.watch_again(Millis(1_000)).is_none());
    assert_eq!(b.watched(Millis(1_500), None), None);
    assert!(b.watch_again(Millis(1_500)).is_some(), "twice in a row");
    assert_eq!(b.watched(Millis(2_000), None), None);
    assert!(b.watch_again(Millis(2_000)).is_none(), "not three times");
    assert!(
        b.watch_due(Millis(2_500), false, WATCH_MS).is_none(),
        "a report interval"
    );
    assert!(b.watch_due(Millis(3_000), false, WATCH_MS).is_some());
    assert_eq!(b.watched(Millis(3_100), None), None);
    assert!(
        b.watch_again(Millis(3_100)).is_some(),
        "its own watch reset the count"
    );
    // Reports failing (two in a row): no watch; a verdict a late watch brings is the
    // coordinator's word, and is applied.
    b.report_due(Millis(WATCH_MS + 2_000)).unwrap();
    b.failed(Millis(WATCH_MS + 2_500), "HTTP 500");
    b.again(Millis(WATCH_MS + 2_500)).unwrap();
    b.failed(Millis(WATCH_MS + 2_600), "HTTP 500");
    assert_eq!(b.health(), Health::Failing);
    assert!(b
        .watch_due(Millis(WATCH_MS + 20_000), true, WATCH_MS)
        .is_none());
    b.watched(
        Millis(WATCH_MS + 3_000),
        Some(verdict(FleetMode::Open, WATCH_MS + 2_990)),
    );
    assert!(b.fleet_led(Millis(WATCH_MS + 3_000)));
    assert_eq!(b.health(), Health::Ok);
}

/// A pushed opening reaches an isolate that has no request in flight, and it holds until its
/// next request's report is answered.
#[test]
fn a_pushed_opening_holds_until_the_next_report_is_answered() {
    let mut m = member();
    m.calls_due(Millis(1_000));
    m.heard(Millis(1_010), verdict(FleetMode::Closed, 1_005));
    assert!(m
        .watched(Millis(2_000), Some(verdict(FleetMode::Open, 1_990)))
        .is_some());
    assert_eq!(
        m.admit(Millis(9_000)),
        Admission::Reject,
        "seven seconds later, still open"
    );
    assert_eq!(m.status(Millis(9_000))["coordinator"]["pushed"], 1);
}

/// A report's answer and a watch's can cross: the older verdict is not applied over the newer.
#[test]
fn an_older_verdict_does_not_overwrite_a_newer_one() {
    let mut m = member();
    m.calls_due(Millis(1_000));
    m.heard(Millis(1_010), verdict(FleetMode::Closed, 1_005));
    m.report_due(Millis(11_000)).unwrap();
    // The fleet opened at 11_050: the watch brings it first, the report's older answer after.
    assert!(m
        .watched(Millis(11_060), Some(verdict(FleetMode::Open, 11_050)))
        .is_some());
    assert_eq!(
        m.heard(Millis(11_070), verdict(FleetMode::Closed, 11_040)),
        None
    );
    assert_eq!(m.admit(Millis(11_100)), Admission::Reject);
    assert_eq!(m.health(), Health::Ok);
}

/// An idle isolate's verdict expires while the coordinator is fine: its first request back
/// still sends a watch (before, an expired verdict stopped watches as failing reports do, and
/// an isolate back during the fleet's probing learned the close only at its next request).
#[test]
fn an_isolate_back_from_idle_watches_and_the_close_reaches_it() {
    let mut m = member();
    m.calls_due(Millis(1_000));
    m.heard(Millis(1_010), verdict(FleetMode::Open, 1_005));
    m.admit(Millis(61_000));
    assert_eq!(m.health(), Health::Expired);
    let paths: Vec<_> = m.calls_due(Millis(61_000)).iter().map(|f| f.path).collect();
    assert_eq!(paths, ["/report", "/watch"]);
    let mut probing = verdict(FleetMode::Probing, 61_040);
    probing.opened_at = Some(1_005);
    probing.probing_since = Some(60_000);
    m.heard(Millis(61_050), probing.clone());
    assert_ne!(
        m.mode(Millis(61_100)),
        Mode::Healthy,
        "the fleet probes: not closed"
    );
    let closed = Verdict {
        mode: FleetMode::Closed,
        probes: 40,
        probe_ok: 40,
        issued_at: 63_990,
        expires_at: 66_990,
        opened_at: None,
        ..probing
    };
    assert!(m.watched(Millis(64_000), Some(closed)).is_some());
    assert_eq!(m.admit(Millis(64_100)), Admission::Call);
    assert_eq!(m.mode(Millis(64_100)), Mode::Healthy);
}

/// A fleet that starts at once spreads its first reports over a heartbeat: a healthy
/// isolate's first goes at its phase of one, a troubled one's at once.
#[test]
fn a_healthy_isolates_first_report_goes_at_its_phase_of_a_heartbeat() {
    let mut m = member();
    m.set_phase(0.4);
    assert!(m.report_due(Millis(1_000)).is_none(), "born at 1 s");
    assert!(m.report_due(Millis(4_999)).is_none());
    assert!(
        m.report_due(Millis(5_000)).is_some(),
        "0.4 of a 10 s heartbeat"
    );
    let mut t = member();
    t.set_phase(0.9);
    t.report_due(Millis(1_000));
    let a = t.admit(Millis(1_200));
    t.record(Millis(1_200), a, Outcome::failure(3));
    assert!(t.report_due(Millis(1_300)).is_some(), "troubled: at once");
}

/// When the coordinator asks for a longer period than the interval (many isolates share
/// it), reports go on this isolate's slots: a fleet turning abnormal together spreads.
#[test]
fn under_the_coordinators_pace_reports_go_on_the_isolates_slots() {
    let mut m = member();
    m.set_phase(0.5);
    m.report_due(Millis(0));
    assert!(m.report_due(Millis(5_000)).is_some());
    let mut v = verdict(FleetMode::Closed, 5_010);
    v.pace_ms = 8_000;
    v.heartbeat_ms = 20_000;
    m.heard(Millis(5_010), v);
    let a = m.admit(Millis(6_000));
    m.record(Millis(6_000), a, Outcome::failure(3));
    // Slots of 8 s, half a period in: 4 s, 12 s, 20 s…
    assert!(m.report_due(Millis(6_100)).is_none(), "not at once");
    assert!(m.report_due(Millis(11_999)).is_none());
    let a = m.admit(Millis(11_999));
    m.record(Millis(11_999), a, Outcome::failure(3));
    let r = m.report_due(Millis(12_000)).expect("its slot");
    assert!(r.body.contains("\"period_ms\":8000"), "{}", r.body);
}

/// A fleet of one: a verdict naming this isolate `sole` stands on its own reports, a report
/// late. Its own breaker decides — its hold-down ends, it probes and closes exactly when an
/// isolate-scope breaker fed the same calls does, though the verdict held says OPEN, then
/// PROBING; and the fleet's later CLOSED moves nothing.
#[test]
fn a_verdict_on_its_own_reports_alone_leaves_a_lone_isolate_to_its_own_breaker() {
    let cfg = seed_rate_breaker();
    let mut m = member();
    let mut alone = Rate::new(cfg.clone());
    let me = Some(format!("{:016x}", 7));
    fn call(m: &mut Member, alone: &mut Rate, at: u64, outcome: Outcome) {
        let (now, a) = (Millis(at), m.admit(Millis(at)));
        let b = alone.admit(now);
        assert_eq!(a, b, "at {at}");
        m.record(now, a, outcome);
        alone.record(now, b, outcome);
    }
    for i in 0..cfg.min_calls as u64 {
        call(&mut m, &mut alone, 1_000 + i, Outcome::timeout(45));
    }
    assert_eq!(m.mode(Millis(1_100)), Mode::Open);
    let mut open = verdict(FleetMode::Open, 1_500);
    open.isolates = 1;
    open.sole = me.clone();
    m.report_due(Millis(1_400)).unwrap();
    m.heard(Millis(1_520), open.clone());
    // Its own hold-down ends at 31,019 ms; the coordinator's, counted from the report that
    // opened it, 481 ms later.
    assert_eq!(m.admit(Millis(31_018)), Admission::Reject);
    assert_eq!(m.mode(Millis(31_019)), Mode::Probing);
    let mut probing = verdict(FleetMode::Probing, 31_600);
    probing.isolates = 1;
    probing.opened_at = Some(1_500);
    probing.probing_since = Some(31_600);
    probing.sole = me.clone();
    m.report_due(Millis(31_580)).unwrap();
    m.heard(Millis(31_620), probing);
    let mut t = 31_019;
    while alone.mode(Millis(t)) != Mode::Healthy {
        call(&mut m, &mut alone, t, ok(20));
        t += 10;
    }
    assert_eq!(m.mode(Millis(t)), Mode::Healthy, "closed on its own probes");
    assert!(!m.fleet_led(Millis(t)));
    let mut closed = verdict(FleetMode::Closed, t + 500);
    closed.isolates = 1;
    closed.opened_at = None;
    closed.probing_since = Some(31_600);
    closed.sole = me;
    m.report_due(Millis(t + 480)).unwrap();
    m.heard(Millis(t + 520), closed);
    call(&mut m, &mut alone, t + 530, ok(20));
    let steps = |ts: &[Transition]| ts.iter().map(|x| (x.at, x.to)).collect::<Vec<_>>();
    assert_eq!(steps(m.transitions()), steps(alone.transitions()));
    assert_eq!(steps(m.local().transitions()), steps(alone.transitions()));
}

/// A fleet that turns abnormal together waits for its slots even though its last reports
/// (heartbeats) are periods back: no burst of reports at the onset.
#[test]
fn an_isolate_turning_abnormal_waits_for_its_next_slot_not_its_last_report() {
    let mut m = member();
    m.set_phase(0.5);
    m.report_due(Millis(0));
    assert!(m.report_due(Millis(5_000)).is_some());
    let mut v = verdict(FleetMode::Closed, 5_010);
    v.pace_ms = 8_000;
    v.heartbeat_ms = 20_000;
    m.heard(Millis(5_010), v.clone());
    let mut reported = Vec::new();
    for t in (6_000..=27_000).step_by(1_000) {
        if t == 25_000 {
            let a = m.admit(Millis(t));
            m.record(Millis(t), a, Outcome::failure(3));
        }
        if m.report_due(Millis(t)).is_some() {
            reported.push(t);
            v.issued_at = t + 10;
            v.expires_at = t + 3_010;
            m.heard(Millis(t + 10), v.clone());
        }
    }
    // The heartbeat's slot at 10 s; troubled from 25 s, its next 8 s slot is at 28 s.
    assert_eq!(reported, [10_000]);
    let a = m.admit(Millis(27_900));
    m.record(Millis(27_900), a, Outcome::failure(3));
    assert!(m.report_due(Millis(28_000)).is_some(), "its slot");
}

#[test]
fn a_change_its_own_breaker_leads_is_logged_with_its_own_evidence_and_the_fleets_without() {
    // No verdict heard: its own breaker leads, and opens on 20 timeouts.
    let mut m = member();
    for i in 0..20u64 {
        let at = Millis(1_000 + i);
        let a = m.admit(at);
        m.record(at, a, Outcome::timeout(45));
    }
    assert_eq!(m.mode(Millis(1_100)), Mode::Open);
    let opened = *m.transitions().last().unwrap();
    assert_eq!((opened.from, opened.to), (Mode::Healthy, Mode::Open));
    let e = opened
        .evidence
        .expect("its own opening carries its evidence");
    assert_eq!((e.calls, e.failures, e.timeouts), (20, 20, 20));
    // A change the fleet leads carries none of this isolate's evidence.
    let mut f = member();
    f.report_due(Millis(0)).unwrap();
    f.heard(Millis(5), verdict(FleetMode::Open, 5));
    assert_eq!(f.mode(Millis(10)), Mode::Open);
    assert_eq!(f.transitions().last().unwrap().evidence, None);
}

/// A healthy isolate's first request reports only at its phase of a heartbeat, so its
/// answer asks the driver to wake it: a thin new isolate — no second request within
/// THIN_GAP_MS — at its phase of another THIN_GAP_MS after that, so that it is watched when
/// an outage begins seconds after its birth; the wake sends the first report and a watch held
/// no longer than the answer's `waitUntil` leaves. A second request's answer moves the wake to
/// the isolate's slot of a heartbeat (the earlier wake then sends nothing); a request that
/// carried the first report leaves every wake nothing to send.
#[test]
fn a_first_answer_asks_to_be_woken_for_the_first_report_and_a_watch() {
    let paths = |v: &[FleetReport]| v.iter().map(|f| f.path).collect::<Vec<_>>();
    let mut m = member();
    m.set_phase(0.5);
    assert!(m.calls_due(Millis(1_000)).is_empty(), "its phase is 5 s on");
    // Thin: 1 s + THIN_GAP_MS + half of another THIN_GAP_MS, before its slot at 6 s.
    assert_eq!(m.first_wake(Millis(1_000)), Some(Millis(4_000)));
    assert_eq!(m.first_wake(Millis(1_000)), None, "handed out once");
    assert!(
        m.wake(Millis(4_000), Millis(6_000)).is_empty(),
        "not a wake it asked for"
    );
    let calls = m.wake(Millis(4_000), Millis(4_000));
    assert_eq!(paths(&calls), ["/report", "/watch"]);
    let w = Coordinator::parse_watch(&calls[1].body).unwrap();
    assert_eq!(w.hold_ms(), 30_000 - 3_000 - REPORT_TIMEOUT_MS);
    assert_eq!(calls[1].timeout_ms, 30_000 - 3_000);
    assert!(m.wake(Millis(4_100), Millis(4_000)).is_empty(), "once");
    // A second request within THIN_GAP_MS: not thin, its wake moves to its slot.
    let mut s = member();
    s.set_phase(0.5);
    assert!(s.calls_due(Millis(1_000)).is_empty());
    assert_eq!(s.first_wake(Millis(1_000)), Some(Millis(4_000)));
    assert!(s.calls_due(Millis(1_500)).is_empty(), "its slot is 6 s");
    assert_eq!(s.first_wake(Millis(1_500)), Some(Millis(6_000)), "moved");
    assert_eq!(s.first_wake(Millis(1_600)), None);
    assert!(
        s.wake(Millis(4_000), Millis(4_000)).is_empty(),
        "moved past"
    );
    assert_eq!(
        paths(&s.wake(Millis(6_000), Millis(6_000))),
        ["/report", "/watch"]
    );
    // A phase whose slot comes before the thin wake: the slot.
    let mut e = member();
    e.set_phase(0.1);
    assert!(e.calls_due(Millis(1_000)).is_empty());
    assert_eq!(e.first_wake(Millis(1_000)), Some(Millis(2_000)));
    // A busy isolate: its next request carries the first report (a gap like the last would
    // pass its phase), and no wake finds anything to send.
    let mut b = member();
    b.set_phase(0.5);
    assert!(b.calls_due(Millis(1_000)).is_empty());
    assert_eq!(b.first_wake(Millis(1_000)), Some(Millis(4_000)));
    let carried = b.calls_due(Millis(3_900));
    assert_eq!(paths(&carried), ["/report", "/watch"]);
    assert_eq!(b.first_wake(Millis(3_900)), None);
    assert!(b.wake(Millis(4_000), Millis(4_000)).is_empty());
    // A request's watch asks for no hold of its own: the coordinator holds it WATCH_MS.
    let w = Coordinator::parse_watch(&carried[1].body).unwrap();
    assert_eq!((w.hold_ms, w.hold_ms()), (None, WATCH_MS));
}

/// An isolate asks with its request's call only in the dark: it reported before, and holds
/// no verdict in force, no watch and no report on its way; never while reports fail, nor
/// when new (its first report keeps its phase).
#[test]
fn an_isolate_asks_with_its_call_only_when_nothing_could_tell_it_of_the_fleet() {
    let mut m = member();
    assert!(
        m.ask(Millis(1_000)).is_none(),
        "a new isolate's first report keeps its phase"
    );
    m.report_due(Millis(1_000)).expect("its first report");
    m.heard(Millis(1_040), verdict(FleetMode::Closed, 1_030));
    assert!(m.ask(Millis(2_000)).is_none(), "a verdict in force");
    // The answer sends a watch, held 29 s: watched, it does not ask.
    assert!(m.watch_due(Millis(2_000), true, WATCH_MS).is_some());
    assert!(m.ask(Millis(20_000)).is_none(), "watched");
    // The watch ended (the driver answered it at its hold's end) and the verdict lapsed.
    m.watched(Millis(31_000), Some(verdict(FleetMode::Closed, 30_990)));
    assert!(
        m.ask(Millis(31_010)).is_none(),
        "the watch's verdict is in force"
    );
    let asked = m
        .ask(Millis(40_000))
        .expect("idle past its watch: in the dark");
    assert_eq!(asked.path, "/report");
    assert!(m.ask(Millis(40_001)).is_none(), "its report is on its way");
    assert!(
        m.report_due(Millis(40_002)).is_none(),
        "the answer does not report again"
    );
    m.failed(Millis(40_500), "no answer within 500 ms");
    m.again(Millis(40_500)).expect("sent again at once");
    m.failed(Millis(41_000), "no answer within 500 ms");
    assert!(m.ask(Millis(60_000)).is_none(), "reports fail: no asking");
}

/// A thin isolate renews its watch by what it still covers, not by when it was sent: a watch
/// held short (the wake's, within what is left of its answer's `waitUntil`) is renewed by the
/// next request, where a full one sent as recently is not.
#[test]
fn a_watch_held_short_is_renewed_sooner_than_one_held_in_full() {
    let mut full = member();
    full.report_due(Millis(0)).unwrap();
    full.heard(Millis(10), verdict(FleetMode::Closed, 5));
    assert!(full.watch_due(Millis(1_000), true, WATCH_MS).is_some());
    assert!(full.watch_due(Millis(2_000), true, WATCH_MS).is_none());
    let mut short = member();
    short.report_due(Millis(0)).unwrap();
    short.heard(Millis(10), verdict(FleetMode::Closed, 5));
    assert!(short.watch_due(Millis(1_000), true, 20_000).is_some());
    let renewed = short.watch_due(Millis(2_000), true, WATCH_MS);
    assert!(
        renewed.is_some(),
        "it covers 19 s, under two thirds of a watch"
    );
    assert!(short.watch_due(Millis(3_000), true, WATCH_MS).is_none());
    // A busy isolate (its requests under THIN_GAP_MS apart) keeps one full watch, but renews
    // a short one as a thin isolate does: a lull after it must not leave it deaf.
    let mut busy = member();
    busy.report_due(Millis(0)).unwrap();
    busy.heard(Millis(10), verdict(FleetMode::Closed, 5));
    assert!(busy.watch_due(Millis(1_000), true, 20_000).is_some());
    assert!(
        busy.watch_due(Millis(2_000), false, WATCH_MS).is_some(),
        "short: renewed"
    );
    assert!(
        busy.watch_due(Millis(2_500), false, WATCH_MS).is_none(),
        "full: one is enough"
    );
    let mut held = member();
    held.report_due(Millis(0)).unwrap();
    held.heard(Millis(10), verdict(FleetMode::Closed, 5));
    assert!(held.watch_due(Millis(1_000), false, WATCH_MS).is_some());
    assert!(
        held.watch_due(Millis(15_000), false, WATCH_MS).is_none(),
        "a full one held"
    );
}

/// A watch that failed covers nothing: a thin isolate whose renewal was lost (and lost again
/// when sent again at once) renews with its next request by what the watch still held
/// covers, not by what the lost ones would have.
#[test]
fn a_failed_watch_covers_nothing_and_the_next_request_renews() {
    let mut m = member();
    m.report_due(Millis(0)).unwrap();
    m.heard(Millis(10), verdict(FleetMode::Closed, 5));
    assert!(
        m.watch_due(Millis(100), true, WATCH_MS).is_some(),
        "held until 29.1 s"
    );
    assert!(
        m.watch_due(Millis(13_700), true, WATCH_MS).is_some(),
        "renewed: it covers 15.4 s"
    );
    assert_eq!(m.watched(Millis(14_200), None), None);
    let again = m.watch_again(Millis(14_200)).expect("sent again at once");
    let w = Coordinator::parse_watch(&again.body).unwrap();
    assert_eq!(
        w.hold_ms(),
        42_700 - 14_200,
        "for what the lost one covered"
    );
    assert_eq!(m.watched(Millis(14_700), None), None);
    assert!(m.watch_again(Millis(14_700)).is_some(), "twice in a row");
    assert_eq!(m.watched(Millis(15_200), None), None);
    assert!(m.watch_again(Millis(15_200)).is_none(), "not three times");
    // The first watch still holds until 29.1 s: 9.6 s left, under two thirds of a watch.
    assert!(m.watch_due(Millis(19_441), true, WATCH_MS).is_some());
    assert!(
        m.watch_due(Millis(20_000), true, WATCH_MS).is_none(),
        "fresh"
    );
    assert_eq!(m.watch_until(), Some(Millis(48_441)));
    // The answer at the first one's hold end takes that one, not the new one.
    assert_eq!(
        m.watched(Millis(29_100), Some(verdict(FleetMode::Closed, 29_100))),
        None
    );
    assert_eq!(m.watch_until(), Some(Millis(48_441)));
    assert_eq!(m.status(Millis(29_100))["coordinator"]["watching"], 1);
}

/// A failed report is sent again at once; after its region's coordinator failed twice in a
/// row the global one stands in for a heartbeat, and a failing global one sends it back.
#[test]
fn a_failed_report_goes_again_at_once_and_the_global_coordinator_stands_in_for_a_failing_region() {
    let mut m = member();
    let first = m.report_due(Millis(1_000)).unwrap();
    assert!(first.object.ends_with("/enam") && first.hint == "enam");
    m.failed(Millis(1_500), "no answer within 500 ms");
    let retry = m.again(Millis(1_500)).expect("sent again at once");
    assert!(retry.object.ends_with("/enam"));
    assert!(m.again(Millis(1_500)).is_none(), "one in flight");
    m.failed(Millis(2_000), "no answer within 500 ms");
    let global = m.again(Millis(2_000)).expect("the global one, at once");
    assert!(global.object.ends_with("/global") && global.hint.is_empty());
    assert!(m.status(Millis(2_000))["coordinator"]["failover"] == true);
    // No watch goes to the global coordinator: watches still go to the region (two reports
    // lost in a row say little of it; a hung one fails the watch within the timeout).
    m.heard(Millis(2_100), verdict(FleetMode::Open, 2_090));
    assert!(m.fleet_led(Millis(2_100)));
    let watch = m.watch_due(Millis(2_200), true, WATCH_MS).expect("a watch");
    assert!(
        watch.object.ends_with("/enam") && watch.hint == "enam",
        "{}",
        watch.object
    );
    // Within the heartbeat, reports go to the global one; after it, to the region again.
    assert!(m
        .report_due(Millis(3_100))
        .unwrap()
        .object
        .ends_with("/global"));
    m.heard(Millis(3_150), verdict(FleetMode::Open, 3_140));
    let back = m.report_due(Millis(12_100)).unwrap();
    assert!(back.object.ends_with("/enam"), "{}", back.object);
    // The global one failing: back to the region, and no more reports at once.
    let mut g = member();
    g.report_due(Millis(1_000)).unwrap();
    g.failed(Millis(1_500), "HTTP 500");
    g.again(Millis(1_500)).unwrap();
    g.failed(Millis(1_600), "HTTP 500");
    assert!(g.again(Millis(1_600)).unwrap().object.ends_with("/global"));
    g.failed(Millis(1_700), "HTTP 500");
    assert_eq!(g.health(), Health::Failing);
    assert!(g.again(Millis(1_700)).is_none(), "no more at once");
    assert!(g
        .report_due(Millis(2_700))
        .unwrap()
        .object
        .ends_with("/enam"));
}
