//! The checks judged against the witness's stalls, on synthetic runs: what a stall explains
//! is inconclusive, what it does not is blamed on the edge.
use super::super::observe::fixtures::{fallback, live};
use super::*;
use crate::witness::Stalls;
use understudy_core::policy::{Breaker, RateBreaker, Scope};

static NONE: Stalls = Stalls::NONE;

fn stopped(spans: &[(f64, f64)]) -> Stalls {
    Stalls::merge(
        spans
            .iter()
            .map(|&(a, b)| (a, b, "workerd stopped".to_string()))
            .collect(),
    )
}

/// A rate breaker (seed 000's shape) with a 40 ms probe bar.
fn rate_policy() -> Policy {
    let mut p = understudy_compiler::fixtures::sample_policy();
    p.breaker = Breaker::Rate(RateBreaker {
        window_ms: 30_000,
        failure_ratio: 0.15,
        min_calls: 20,
        slow_call_p95_ms: 45,
        hold_down_ms: 1_000,
        probe_fraction: 0.5,
        probe_min_calls: 5,
        probe_success_ratio: 0.995,
        probe_p95_ms: 40,
        failed_probe_hold_ms: 1_500,
        scope: Scope::Isolate,
    });
    p
}

fn cx<'a>(
    p: &'a Policy,
    limits: Limits,
    fault: Option<(f64, f64)>,
    tr: &'a [SeenTransition],
    stalls: &'a Stalls,
) -> Context<'a> {
    Context {
        policy: p,
        limits,
        fault,
        transitions: tr,
        breaker_visible: !tr.is_empty(),
        slack_ms: 10.0,
        user_probes: None,
        time_scale: 1.0,
        stalls,
        healthy_model_ms: 25.0,
        isolates: &[],
    }
}

fn verdict(v: Vec<Verdict>, name: &str) -> Verdict {
    v.into_iter().find(|x| x.name == name).expect("verdict")
}

fn t(at_ms: f64, from: &'static str, to: &'static str) -> SeenTransition {
    SeenTransition {
        at_ms,
        from,
        to,
        evidence: None,
    }
}

/// 100 live answers a 100 ms apart, five of them (sent 2000–2040 ms) taking 150 ms.
fn five_slow() -> Vec<Observed> {
    let mut obs: Vec<Observed> = (0..100).map(|i| live(i, i as f64 * 100.0, 20.0)).collect();
    for (k, i) in (20..25).enumerate() {
        obs[i] = live(i as u64, 2000.0 + k as f64 * 10.0, 150.0);
    }
    obs
}

#[test]
fn answers_over_the_budget_inside_a_stall_make_the_budget_inconclusive() {
    let p = understudy_compiler::fixtures::sample_policy();
    let obs = five_slow();
    let s = stopped(&[(2000.0, 2150.0)]);
    let v = verdict(
        check(
            &obs,
            &cx(&p, Limits::default(), None, &[], &s),
            &Recovery::default(),
        ),
        "LATENCY_BUDGET",
    );
    assert_eq!(v.ok, Some(false));
    assert!(v.inconclusive(), "{}", v.detail);
    assert_eq!(v.excused_count, 5);
    assert!(v.excused[0].stalls[0].2.contains("workerd stopped"));
}

#[test]
fn answers_over_the_budget_with_no_stall_are_blamed_by_name() {
    let p = understudy_compiler::fixtures::sample_policy();
    let obs = five_slow();
    let v = verdict(
        check(
            &obs,
            &cx(&p, Limits::default(), None, &[], &Stalls::NONE),
            &Recovery::default(),
        ),
        "LATENCY_BUDGET",
    );
    assert!(v.broken());
    assert_eq!(v.blamed.len(), 5);
    assert_eq!(v.blamed[0].index, Some(20));
    assert!(v.blamed[0]
        .what
        .starts_with("request 20 (HTTP 200, 150.0 ms"));
}

#[test]
fn a_stall_shorter_than_the_lateness_excuses_nothing() {
    // The same five answers, 80 ms over the ceiling, beside a 20 ms stall: the edge added
    // the rest (a late timer looks like this, stall or not).
    let p = understudy_compiler::fixtures::sample_policy();
    let s = stopped(&[(2000.0, 2020.0)]);
    let v = verdict(
        check(
            &five_slow(),
            &cx(&p, Limits::default(), None, &[], &s),
            &Recovery::default(),
        ),
        "LATENCY_BUDGET",
    );
    assert!(v.broken(), "{}", v.detail);
}

/// Seed 000 in miniature with a probing that failed after the fault's end (1–5 s): the
/// breaker degrades at 1.1 s, probes from 5.2 s, fails at 5.3 s on request 52's 80 ms
/// probe, probes again at 7.0 s and is healthy at `healthy_at`.
fn failed_probe(healthy_at: f64) -> (Vec<Observed>, Vec<SeenTransition>) {
    let mut obs = Vec::new();
    for i in 0..140u64 {
        let at = i as f64 * 100.0;
        obs.push(if (1000.0..healthy_at).contains(&at) {
            // The breaker open from 1.1 s: the answers it keeps from the model say so.
            let mut o = fallback(i, at, 5.0);
            if at > 1100.0 {
                o.headers.reason = Some("BREAKER_OPEN".into());
            }
            o
        } else {
            live(i, at, 30.0)
        });
    }
    obs[52] = live(52, 5200.0, 80.0);
    let tr = vec![
        t(1100.0, "PRIMARY_HEALTHY", "DEGRADED_FALLBACK"),
        t(5210.0, "DEGRADED_FALLBACK", "RECOVERING_PROBE"),
        t(5290.0, "RECOVERING_PROBE", "DEGRADED_FALLBACK"),
        t(7000.0, "DEGRADED_FALLBACK", "RECOVERING_PROBE"),
        t(healthy_at, "RECOVERING_PROBE", "PRIMARY_HEALTHY"),
    ];
    (obs, tr)
}

fn recover(limit_ms: u64) -> Limits {
    Limits {
        recover_within_ms: Some(limit_ms),
        stalled_after_ms: 60_000,
        ..Limits::default()
    }
}

#[test]
fn a_probe_slowed_by_a_stall_makes_a_late_recovery_inconclusive() {
    let p = rate_policy();
    let (obs, tr) = failed_probe(7400.0);
    let s = stopped(&[(5190.0, 5260.0)]);
    let c = cx(&p, recover(1500), Some((1000.0, 5000.0)), &tr, &s);
    let rec = recovery(&obs, &c);
    assert_eq!(rec.breaker_healthy_after_ms, Some(2400.0));
    let v = verdict(check(&obs, &c, &rec), "RECOVER_WITHIN");
    // Had the probing at 5.2 s passed, it would have closed 400 ms later (as the one at 7 s
    // did): 600 ms after the fault's end, within 1.5 s.
    assert!(v.inconclusive(), "{} {:?}", v.detail, v.blamed);
    assert_eq!(v.excused[0].offender.index, Some(52));
}

#[test]
fn the_same_slow_probe_with_no_stall_is_blamed() {
    let p = rate_policy();
    let (obs, tr) = failed_probe(7400.0);
    let c = cx(&p, recover(1500), Some((1000.0, 5000.0)), &tr, &NONE);
    let v = verdict(check(&obs, &c, &recovery(&obs, &c)), "RECOVER_WITHIN");
    assert!(v.broken());
    assert!(
        v.blamed[0]
            .what
            .contains("a probing that failed at 5290 ms: 80.0 ms, over the 40 ms bar"),
        "{:?}",
        v.blamed
    );
}

#[test]
fn a_probing_too_slow_to_close_in_time_anyway_is_blamed_whatever_stalled() {
    // The probing that passed took 3 s (too few probes: an isolate's thin share): had the
    // first one passed, the breaker would still have closed 3.2 s after the fault's end.
    let p = rate_policy();
    let (obs, tr) = failed_probe(10_000.0);
    let s = stopped(&[(5190.0, 5260.0)]);
    let c = cx(&p, recover(1500), Some((1000.0, 5000.0)), &tr, &s);
    let v = verdict(check(&obs, &c, &recovery(&obs, &c)), "RECOVER_WITHIN");
    assert!(v.broken(), "{}", v.detail);
    assert!(
        v.blamed.iter().any(|o| o.what.contains("past the limit")),
        "{:?}",
        v.blamed
    );
}

#[test]
fn deadline_misses_after_the_close_inside_a_stall_are_excused() {
    // Healthy at 6 s (1 s after the fault's end); two deadline misses at 6.5 and 6.6 s leave
    // the answers normal only at 6.7 s, past the 1.5 s limit — unless a stall explains them.
    let p = rate_policy();
    let (mut obs, tr) = failed_probe(6000.0);
    obs[52] = fallback(52, 5200.0, 5.0);
    let tr: Vec<SeenTransition> = vec![
        tr[0].clone(),
        t(5210.0, "DEGRADED_FALLBACK", "RECOVERING_PROBE"),
        t(6000.0, "RECOVERING_PROBE", "PRIMARY_HEALTHY"),
    ];
    for i in [65usize, 66] {
        obs[i] = fallback(i as u64, i as f64 * 100.0, 48.0);
    }
    let s = stopped(&[(6480.0, 6650.0)]);
    let c = cx(&p, recover(1500), Some((1000.0, 5000.0)), &tr, &s);
    let rec = recovery(&obs, &c);
    assert_eq!(rec.recovered_after_ms, Some(1700.0));
    let v = verdict(check(&obs, &c, &rec), "RECOVER_WITHIN");
    assert!(v.inconclusive(), "{} {:?}", v.detail, v.blamed);
    let c = cx(&p, recover(1500), Some((1000.0, 5000.0)), &tr, &NONE);
    let v = verdict(check(&obs, &c, &rec), "RECOVER_WITHIN");
    assert!(v.broken());
    assert_eq!(v.blamed.len(), 2, "{:?}", v.blamed);
}

#[test]
fn a_trip_delayed_by_a_stall_is_excused_and_a_live_answer_in_the_fault_is_not() {
    let p = rate_policy();
    let (obs, mut tr) = failed_probe(6000.0);
    tr[0].at_ms = 1400.0; // degraded 400 ms after the onset, limit 300
    let limits = Limits {
        degrade_within_ms: Some(300),
        stalled_after_ms: 60_000,
        ..Limits::default()
    };
    let s = stopped(&[(1050.0, 1200.0)]);
    let c = cx(&p, limits, Some((1000.0, 5000.0)), &tr, &s);
    let v = verdict(check(&obs, &c, &recovery(&obs, &c)), "DEGRADE_WITHIN");
    assert!(v.inconclusive(), "{}", v.detail);
    // A live answer in the fault, 500 ms after it was sent: the deadline (45 ms) did not
    // cut it, and no stall covers 455 ms.
    let mut obs = obs;
    obs[30] = live(30, 3000.0, 500.0);
    let v = verdict(check(&obs, &c, &recovery(&obs, &c)), "DEGRADE_WITHIN");
    assert!(v.broken(), "{}", v.detail);
    assert_eq!(v.blamed[0].index, Some(30));
}

#[test]
fn a_reopening_after_the_close_on_deadline_misses_a_stall_covers_is_inconclusive() {
    // Healthy at 6 s; two deadline misses at 6.2 and 6.3 s re-open it at 6.35 s and it
    // never closes again in the run. Without them it would have stayed closed from 6 s.
    let p = rate_policy();
    let (mut obs, tr) = failed_probe(6000.0);
    obs[52] = fallback(52, 5200.0, 5.0);
    for (i, o) in obs.iter_mut().enumerate().skip(62) {
        let at = i as f64 * 100.0;
        *o = fallback(i as u64, at, if i < 64 { 48.0 } else { 5.0 });
        if i >= 64 {
            o.headers.reason = Some("BREAKER_OPEN".into());
        }
    }
    let tr = vec![
        tr[0].clone(),
        t(5210.0, "DEGRADED_FALLBACK", "RECOVERING_PROBE"),
        t(6000.0, "RECOVERING_PROBE", "PRIMARY_HEALTHY"),
        t(6350.0, "PRIMARY_HEALTHY", "DEGRADED_FALLBACK"),
    ];
    let s = stopped(&[(6180.0, 6360.0)]);
    let c = cx(&p, recover(1500), Some((1000.0, 5000.0)), &tr, &s);
    let v = verdict(check(&obs, &c, &recovery(&obs, &c)), "RECOVER_WITHIN");
    assert!(v.inconclusive(), "{} {:?}", v.detail, v.blamed);
    assert_eq!(v.excused_count, 2);
    let c = cx(&p, recover(1500), Some((1000.0, 5000.0)), &tr, &NONE);
    let v = verdict(check(&obs, &c, &recovery(&obs, &c)), "RECOVER_WITHIN");
    assert!(v.broken());
    assert_eq!(
        v.blamed_count, 2,
        "the two misses, not the breaker's refusals: {:?}",
        v.blamed
    );
}

#[test]
fn a_breaker_never_closed_after_a_stalled_probe_is_inconclusive_and_blames_no_open_answer() {
    // The probing at 5.2 s failed on a probe a stall slowed, and the hold outlasted the run:
    // the answers after the fault's end, all open, are not offenders; the policy's
    // 5 probes at half of 10 req/s would have closed it 1.2 s after the fault's end.
    let p = rate_policy();
    let (obs, tr) = failed_probe(20_000.0);
    let tr = &tr[..3];
    let s = stopped(&[(5190.0, 5260.0)]);
    let c = cx(&p, recover(1500), Some((1000.0, 5000.0)), tr, &s);
    let rec = recovery(&obs, &c);
    assert_eq!(rec.breaker_healthy_after_ms, None);
    let v = verdict(check(&obs, &c, &rec), "RECOVER_WITHIN");
    assert!(v.inconclusive(), "{} {:?}", v.detail, v.blamed);
    assert_eq!(v.excused_count, 1);
    let c = cx(&p, recover(1500), Some((1000.0, 5000.0)), tr, &NONE);
    let v = verdict(check(&obs, &c, &recovery(&obs, &c)), "RECOVER_WITHIN");
    assert!(v.broken());
    assert_eq!(v.blamed_count, 1, "{:?}", v.blamed);
}

#[test]
fn a_breaker_open_before_the_onset_degraded_at_once() {
    // A stall of the host opened it in the healthy phase (0.5 s); it was still open at the
    // onset (1 s) and probed again only at 2.5 s: degraded at once, not 1.5 s late.
    let p = rate_policy();
    let (obs, mut tr) = failed_probe(6000.0);
    tr[0].at_ms = 500.0;
    let limits = Limits {
        degrade_within_ms: Some(300),
        stalled_after_ms: 60_000,
        ..Limits::default()
    };
    let c = cx(&p, limits, Some((1000.0, 5000.0)), &tr, &NONE);
    assert_eq!(recovery(&obs, &c).degraded_after_ms, Some(0.0));
}

#[test]
fn an_opening_before_the_fault_on_misses_a_stall_covers_leaves_the_recovery_unjudged() {
    // Two deadline misses on the healthy model (0.3 and 0.4 s) opened the breaker at 0.5 s;
    // its schedule then never brought it back in the run.
    let p = rate_policy();
    let (mut obs, _) = failed_probe(20_000.0);
    for i in [3usize, 4] {
        obs[i] = fallback(i as u64, i as f64 * 100.0, 48.0);
    }
    obs[52] = fallback(52, 5200.0, 5.0);
    obs[52].headers.reason = Some("BREAKER_OPEN".into());
    // Its probing came in the fault (3.5 s), failed on the slow model, and the hold it
    // re-armed outlasted the run.
    let tr = &[
        t(500.0, "PRIMARY_HEALTHY", "DEGRADED_FALLBACK"),
        t(3500.0, "DEGRADED_FALLBACK", "RECOVERING_PROBE"),
        t(3600.0, "RECOVERING_PROBE", "DEGRADED_FALLBACK"),
    ];
    let s = stopped(&[(280.0, 460.0)]);
    let c = cx(&p, recover(1500), Some((1000.0, 5000.0)), tr, &s);
    let v = verdict(check(&obs, &c, &recovery(&obs, &c)), "RECOVER_WITHIN");
    assert!(v.inconclusive(), "{} {:?}", v.detail, v.blamed);
    let c = cx(&p, recover(1500), Some((1000.0, 5000.0)), tr, &NONE);
    let v = verdict(check(&obs, &c, &recovery(&obs, &c)), "RECOVER_WITHIN");
    assert!(v.broken());
    assert!(
        v.blamed
            .iter()
            .any(|o| o.what.contains("an opening before the fault")),
        "{:?}",
        v.blamed
    );
}

#[test]
fn a_close_a_little_late_after_a_probing_the_host_stalled_is_excused() {
    // Probing from 5.2 s, healthy at 6.6 s: 1.6 s after the fault's end against 1.5 s. A
    // 100 ms stop of the runtime in the probing held back its arrivals (its probes).
    let p = rate_policy();
    let (mut obs, _) = failed_probe(6600.0);
    obs[52] = fallback(52, 5200.0, 5.0);
    obs[52].headers.reason = Some("BREAKER_OPEN".into());
    let tr = &[
        t(1100.0, "PRIMARY_HEALTHY", "DEGRADED_FALLBACK"),
        t(5200.0, "DEGRADED_FALLBACK", "RECOVERING_PROBE"),
        t(6600.0, "RECOVERING_PROBE", "PRIMARY_HEALTHY"),
    ];
    let s = stopped(&[(6000.0, 6100.0)]);
    let c = cx(&p, recover(1500), Some((1000.0, 5000.0)), tr, &s);
    let v = verdict(check(&obs, &c, &recovery(&obs, &c)), "RECOVER_WITHIN");
    assert!(v.inconclusive(), "{} {:?}", v.detail, v.blamed);
    let c = cx(&p, recover(1500), Some((1000.0, 5000.0)), tr, &NONE);
    let v = verdict(check(&obs, &c, &recovery(&obs, &c)), "RECOVER_WITHIN");
    assert!(v.broken());
    assert!(
        v.blamed[0].what.contains("after a probing from 5200 ms"),
        "{:?}",
        v.blamed
    );
}

#[test]
fn a_late_close_then_a_reopening_both_on_stalls_is_inconclusive() {
    // Probing from 5.2 s, healthy at 6.6 s (100 ms past the limit; a 100 ms stop in the
    // probing), re-opened at 6.95 s on two misses a second stop covers.
    let p = rate_policy();
    let (mut obs, _) = failed_probe(6600.0);
    obs[52] = fallback(52, 5200.0, 5.0);
    obs[52].headers.reason = Some("BREAKER_OPEN".into());
    for (i, o) in obs.iter_mut().enumerate().skip(68) {
        *o = fallback(i as u64, i as f64 * 100.0, if i < 70 { 48.0 } else { 5.0 });
        if i >= 70 {
            o.headers.reason = Some("BREAKER_OPEN".into());
        }
    }
    let tr = &[
        t(1100.0, "PRIMARY_HEALTHY", "DEGRADED_FALLBACK"),
        t(5200.0, "DEGRADED_FALLBACK", "RECOVERING_PROBE"),
        t(6600.0, "RECOVERING_PROBE", "PRIMARY_HEALTHY"),
        t(6950.0, "PRIMARY_HEALTHY", "DEGRADED_FALLBACK"),
    ];
    let s = stopped(&[(6000.0, 6100.0), (6780.0, 6960.0)]);
    let c = cx(&p, recover(1500), Some((1000.0, 5000.0)), tr, &s);
    let v = verdict(check(&obs, &c, &recovery(&obs, &c)), "RECOVER_WITHIN");
    assert!(v.inconclusive(), "{} {:?}", v.detail, v.blamed);
    let s = stopped(&[(6780.0, 6960.0)]);
    let c = cx(&p, recover(1500), Some((1000.0, 5000.0)), tr, &s);
    let v = verdict(check(&obs, &c, &recovery(&obs, &c)), "RECOVER_WITHIN");
    assert!(v.broken(), "the late close has no stall in its probing");
}

/// 100 answers 100 ms apart: live in 20 ms but `late` deadline answers (`ML_TIMEOUT`) among
/// the first 20, each taking `ms`.
fn deadline_answers(n: usize, late: &[usize], ms: f64) -> Vec<Observed> {
    (0..100)
        .map(|i| {
            let at = i as f64 * 100.0;
            match i {
                i if late.contains(&i) => fallback(i as u64, at, ms),
                i if i < n => fallback(i as u64, at, 47.0),
                _ => live(i as u64, at, 20.0),
            }
        })
        .collect()
}

#[test]
fn a_timer_that_fires_late_is_blamed_by_the_deadline_answers_a_stall_did_not_cover() {
    // Every one of the 10 deadline answers came 60 ms after the 45 ms deadline; a stop of
    // the runtime covers three of them. The tail (LATENCY_BUDGET's p99) may be the host's;
    // the middle of the deadline answers is not.
    let p = understudy_compiler::fixtures::sample_policy();
    let late: Vec<usize> = (0..10).collect();
    let obs = deadline_answers(10, &late, 105.0);
    let s = stopped(&[(0.0, 250.0)]);
    let c = cx(&p, Limits::default(), None, &[], &s);
    let v = verdict(check(&obs, &c, &Recovery::default()), "DEADLINE_KEPT");
    assert!(v.broken(), "{} {:?}", v.detail, v.excused);
    assert_eq!((v.excused_count, v.blamed_count), (3, 7));
    assert_eq!(v.blamed[0].index, Some(3));
    assert!(v
        .detail
        .starts_with("the 10 answers that missed the model's deadline: median 105.0 ms"));
}

#[test]
fn deadline_answers_a_stall_delayed_leave_the_others_at_the_deadline() {
    let p = understudy_compiler::fixtures::sample_policy();
    // Four of twelve late: the median is at the deadline, the check holds.
    let obs = deadline_answers(12, &[4, 5, 6, 7], 150.0);
    let c = cx(&p, Limits::default(), None, &[], &NONE);
    let v = verdict(check(&obs, &c, &Recovery::default()), "DEADLINE_KEPT");
    assert_eq!(v.ok, Some(true), "{}", v.detail);
    // Eight of twelve late, inside a stop: inconclusive — the four left answered at the
    // deadline.
    let late: Vec<usize> = (2..10).collect();
    let obs = deadline_answers(12, &late, 150.0);
    let s = stopped(&[(150.0, 1160.0)]);
    let c = cx(&p, Limits::default(), None, &[], &s);
    let v = verdict(check(&obs, &c, &Recovery::default()), "DEADLINE_KEPT");
    assert!(v.inconclusive(), "{} {:?}", v.detail, v.blamed);
    // The same with no stall: blamed, all eight.
    let c = cx(&p, Limits::default(), None, &[], &NONE);
    let v = verdict(check(&obs, &c, &Recovery::default()), "DEADLINE_KEPT");
    assert!(v.broken());
    assert_eq!(v.blamed_count, 8);
}

#[test]
fn a_run_with_no_deadline_missed_does_not_check_it() {
    let p = understudy_compiler::fixtures::sample_policy();
    let c = cx(&p, Limits::default(), None, &[], &NONE);
    let v = verdict(
        check(&five_slow(), &c, &Recovery::default()),
        "DEADLINE_KEPT",
    );
    assert_eq!(v.ok, None);
}
