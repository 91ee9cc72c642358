//! The invariants on synthetic observations.
use super::super::observe::fixtures::{fallback, live};
use super::invariants::recover_within;
use super::*;
use understudy_core::policy::TierKind;

static NO_STALLS: Stalls = Stalls::NONE;

fn policy() -> Policy {
    understudy_compiler::fixtures::sample_policy()
}

fn cx<'a>(
    p: &'a Policy,
    limits: Limits,
    fault: Option<(f64, f64)>,
    tr: &'a [SeenTransition],
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
        stalls: &NO_STALLS,
        healthy_model_ms: 25.0,
        isolates: &[],
    }
}

fn verdict<'v>(v: &'v [Verdict], name: &str) -> &'v Verdict {
    v.iter().find(|x| x.name == name).expect("verdict present")
}

#[test]
fn a_fallback_missing_any_disclosure_breaks_disclosed() {
    let p = policy();
    let mut bad = fallback(1, 0.0, 50.0);
    bad.headers.retry_after = None;
    bad.body_personalized = Some(true);
    let obs = vec![live(0, 0.0, 10.0), bad];
    let v = check(
        &obs,
        &cx(&p, Limits::default(), None, &[]),
        &Recovery::default(),
    );
    let d = verdict(&v, "DISCLOSED");
    assert!(d.broken());
    assert!(
        d.detail.contains("Retry-After") && d.detail.contains("is_personalized: false"),
        "{}",
        d.detail
    );
    // A "live" answer that says it came from a fallback is caught too.
    let mut liar = live(2, 0.0, 10.0);
    liar.headers.source = Some("fallback".into());
    let v = check(
        &[liar],
        &cx(&p, Limits::default(), None, &[]),
        &Recovery::default(),
    );
    assert!(verdict(&v, "DISCLOSED").broken());
}

#[test]
fn empty_answers_and_errors_break_not_empty_when_a_tier_could_answer() {
    let p = policy();
    let mut empty = fallback(0, 0.0, 50.0);
    empty.items = Some(0);
    let mut err = fallback(1, 0.0, 50.0);
    err.status = 504;
    let v = check(
        &[empty, err],
        &cx(&p, Limits::default(), None, &[]),
        &Recovery::default(),
    );
    let d = verdict(&v, "NOT_EMPTY");
    assert!(
        d.broken() && d.detail.contains("request 0") && d.detail.contains("request 1"),
        "{}",
        d.detail
    );
}

#[test]
fn latency_limits_use_p99_plus_slack_and_p95() {
    let p = policy();
    let budget = p.budget.total_ms as f64;
    let obs: Vec<Observed> = (0..100)
        .map(|i| live(i, i as f64, if i < 95 { 20.0 } else { budget + 30.0 }))
        .collect();
    let limits = Limits {
        p95_max_ms: Some(25),
        ..Limits::default()
    };
    let v = check(&obs, &cx(&p, limits, None, &[]), &Recovery::default());
    assert!(
        verdict(&v, "LATENCY_BUDGET").broken(),
        "p99 is budget + 30 > budget + 10"
    );
    assert_eq!(verdict(&v, "P95_MAX").ok, Some(true));
    let ok: Vec<Observed> = (0..100).map(|i| live(i, i as f64, budget + 5.0)).collect();
    let v = check(
        &ok,
        &cx(&p, Limits::default(), None, &[]),
        &Recovery::default(),
    );
    assert_eq!(verdict(&v, "LATENCY_BUDGET").ok, Some(true));
    assert_eq!(verdict(&v, "P95_MAX").ok, None);
}

/// Seed 000's recovery drill in miniature: fault 1–5 s, breaker degrades at 1.1 s and
/// is healthy at 6 s; answers live again from 6 s.
fn incident(healthy_at: f64) -> (Vec<Observed>, Vec<SeenTransition>) {
    let mut obs = Vec::new();
    for i in 0..120u64 {
        let t = i as f64 * 100.0;
        obs.push(if (1000.0..healthy_at).contains(&t) {
            fallback(i, t, 48.0)
        } else {
            live(i, t, 30.0)
        });
    }
    let tr = vec![
        SeenTransition {
            at_ms: 1100.0,
            from: "PRIMARY_HEALTHY",
            to: "DEGRADED_FALLBACK",
            evidence: None,
        },
        SeenTransition {
            at_ms: 2500.0,
            from: "DEGRADED_FALLBACK",
            to: "RECOVERING_PROBE",
            evidence: None,
        },
        SeenTransition {
            at_ms: healthy_at,
            from: "RECOVERING_PROBE",
            to: "PRIMARY_HEALTHY",
            evidence: None,
        },
    ];
    (obs, tr)
}

#[test]
fn degrade_and_recover_within_their_limits() {
    let p = policy();
    let (obs, tr) = incident(6000.0);
    let limits = Limits {
        degrade_within_ms: Some(300),
        recover_within_ms: Some(2000),
        stalled_after_ms: 3000,
        p95_max_ms: None,
    };
    let c = cx(&p, limits, Some((1000.0, 5000.0)), &tr);
    let rec = recovery(&obs, &c);
    assert_eq!(rec.degraded_after_ms, Some(100.0));
    assert_eq!(rec.breaker_healthy_after_ms, Some(1000.0));
    assert_eq!(rec.normalized_after_ms, Some(1000.0));
    assert!(rec.alerts.is_empty());
    let v = check(&obs, &c, &rec);
    assert_eq!(
        verdict(&v, "DEGRADE_WITHIN").ok,
        Some(true),
        "{}",
        verdict(&v, "DEGRADE_WITHIN").detail
    );
    assert_eq!(verdict(&v, "RECOVER_WITHIN").ok, Some(true));
}

#[test]
fn a_slow_recovery_breaks_recover_within_and_raises_the_stall_alert() {
    let p = policy();
    let (obs, tr) = incident(8500.0);
    let limits = Limits {
        degrade_within_ms: Some(50),
        recover_within_ms: Some(2000),
        stalled_after_ms: 3000,
        p95_max_ms: None,
    };
    let c = cx(&p, limits, Some((1000.0, 5000.0)), &tr);
    let rec = recovery(&obs, &c);
    assert_eq!(rec.recovered_after_ms, Some(3500.0));
    assert_eq!(rec.alerts, vec![ALERT_STALLED.to_string()]);
    let v = check(&obs, &c, &rec);
    assert!(verdict(&v, "RECOVER_WITHIN").broken());
    // At time scale 0.5 the 100 ms trip delay was not halved: 50 ms more are allowed,
    // still not enough for 3.5 s against 2 s.
    let mut half = cx(&p, limits, Some((1000.0, 5000.0)), &tr);
    half.time_scale = 0.5;
    assert_eq!(half.unscaled_ms(rec.degraded_after_ms), 50.0);
    assert!(verdict(&check(&obs, &half, &rec), "RECOVER_WITHIN").broken());
    let d = verdict(&v, "DEGRADE_WITHIN");
    assert!(
        d.broken() && d.detail.contains("100 ms after onset"),
        "{}",
        d.detail
    );
}

#[test]
fn a_live_answer_during_the_fault_breaks_degrade_within() {
    let p = policy();
    let (mut obs, tr) = incident(6000.0);
    obs[30] = live(30, 3000.0, 30.0);
    let limits = Limits {
        degrade_within_ms: Some(300),
        ..Limits::default()
    };
    let c = cx(&p, limits, Some((1000.0, 5000.0)), &tr);
    let v = check(&obs, &c, &recovery(&obs, &c));
    let d = verdict(&v, "DEGRADE_WITHIN");
    assert!(
        d.broken() && d.detail.contains("request 30"),
        "{}",
        d.detail
    );
}

#[test]
fn an_isolated_deadline_miss_after_recovery_does_not_delay_normalisation() {
    let (mut obs, _) = incident(6000.0);
    obs[80] = fallback(80, 8000.0, 48.0);
    let (head, tail) = obs.split_at(60);
    let mut many = head.to_vec();
    for i in 0..200u64 {
        let mut o = tail[(i as usize) % tail.len()].clone();
        o.index = 60 + i;
        o.scheduled_ms = 6000.0 + i as f64 * 10.0;
        o.sent_ms = o.scheduled_ms;
        many.push(if i == 50 {
            fallback(60 + i, o.sent_ms, 48.0)
        } else {
            live(60 + i, o.sent_ms, 30.0)
        });
    }
    assert_eq!(normalized_at(&many, 5000.0), Some(6000.0));
    // Mostly degraded after the end: not normal.
    let bad: Vec<Observed> = (0..100u64)
        .map(|i| {
            if i % 2 == 0 {
                live(i, 6000.0 + i as f64, 30.0)
            } else {
                fallback(i, 6000.0 + i as f64, 48.0)
            }
        })
        .collect();
    assert_eq!(normalized_at(&bad, 5000.0), None);
}

#[test]
fn one_miss_among_the_last_few_answers_is_judged_on_a_full_sample() {
    // 50 answers after the fault's end, all live but one near the end (an isolate's thin
    // tail): normal from the first, as 1 miss in 100 would be.
    let tail = |misses: &[u64]| -> Vec<Observed> {
        (0..50u64)
            .map(|i| {
                let t = 6000.0 + i as f64 * 10.0;
                if misses.contains(&i) {
                    fallback(i, t, 48.0)
                } else {
                    live(i, t, 30.0)
                }
            })
            .collect()
    };
    assert_eq!(normalized_at(&tail(&[45]), 5000.0), Some(6000.0));
    // Two misses in the last 50 are more than 1%: normal only after the first.
    assert_eq!(normalized_at(&tail(&[25, 45]), 5000.0), Some(6260.0));
    // Past 100 answers the share itself decides: 1 miss in 150 holds from the first answer;
    // with a second, normal from after the first (1 in 129).
    let long = |misses: &[u64]| -> Vec<Observed> {
        (0..150u64)
            .map(|i| {
                let t = 6000.0 + i as f64 * 10.0;
                if misses.contains(&i) {
                    fallback(i, t, 48.0)
                } else {
                    live(i, t, 30.0)
                }
            })
            .collect()
    };
    assert_eq!(normalized_at(&long(&[140]), 5000.0), Some(6000.0));
    assert_eq!(normalized_at(&long(&[20, 140]), 5000.0), Some(6210.0));
    // Fewer than 20 answers are not judged: live after the last miss but too few.
    assert_eq!(normalized_at(&long(&[135]), 5000.0), Some(6000.0));
    assert_eq!(normalized_at(&tail(&[40, 45]), 5000.0), None);
}

#[test]
fn a_scaled_run_counts_the_settling_after_the_breakers_close_unscaled() {
    // The breaker is healthy 1 s after the fault's end; deadline misses 1.8 and 2.0 s after
    // it (the host settling) leave the answers normal only at 1.9 s.
    let p = policy();
    let (mut obs, tr) = incident(6000.0);
    for i in [68usize, 70] {
        obs[i] = fallback(i as u64, i as f64 * 100.0, 48.0);
    }
    let limits = Limits {
        recover_within_ms: Some(1500),
        stalled_after_ms: 3000,
        ..Limits::default()
    };
    let full = cx(&p, limits, Some((1000.0, 5000.0)), &tr);
    let rec = recovery(&obs, &full);
    assert_eq!(rec.breaker_healthy_after_ms, Some(1000.0));
    assert_eq!(rec.recovered_after_ms, Some(1900.0));
    // At full scale the settling is the recovery's own time: 1.9 s against 1.5 s.
    let v = recover_within(&obs, &full, &rec);
    assert!(v.broken(), "{}", v.detail);
    // At scale 0.1 the breaker's clocks shrank but the host's did not: 900 ms of settling
    // count as 90, and the trip delay's 100 ms as 10: 1,000 + 90 + 10 is within 1,500.
    let mut scaled = cx(&p, limits, Some((1000.0, 5000.0)), &tr);
    scaled.time_scale = 0.1;
    let v = recover_within(&obs, &scaled, &rec);
    assert_eq!(v.ok, Some(true), "{}", v.detail);
    assert!(
        v.detail
            .contains("+ 810 ms unscaled settling after the breaker's close"),
        "{}",
        v.detail
    );
    // A breaker that is healthy late is not settling: nothing is added for it.
    let late = Recovery {
        breaker_healthy_after_ms: Some(1900.0),
        ..rec.clone()
    };
    assert_eq!(
        scaled.unscaled_settle_ms(late.breaker_healthy_after_ms, late.recovered_after_ms),
        0.0
    );
    assert!(recover_within(&obs, &scaled, &late).broken());
}

#[test]
fn without_a_visible_breaker_recovery_is_read_from_the_answers() {
    let p = policy();
    let (obs, _) = incident(6000.0);
    let limits = Limits {
        recover_within_ms: Some(2000),
        ..Limits {
            stalled_after_ms: 60_000,
            ..Limits::default()
        }
    };
    let c = cx(&p, limits, Some((1000.0, 5000.0)), &[]);
    let rec = recovery(&obs, &c);
    assert_eq!(rec.recovered_after_ms, Some(1000.0));
    assert_eq!(rec.breaker_healthy_after_ms, None);
}

#[test]
fn user_tier_entries_must_be_newer_than_the_fault() {
    let mut p = policy();
    if let Some(TierKind::Kv(k)) = p
        .cascade
        .tiers
        .iter_mut()
        .map(|t| &mut t.kind)
        .find(|k| matches!(k, TierKind::Kv(_)))
    {
        k.write_through = true;
    }
    let Some(tier) = write_through_tier(&p) else {
        panic!("sample policy has a KV tier")
    };
    let (obs, tr) = incident(6000.0);
    let limits = Limits {
        recover_within_ms: Some(2000),
        stalled_after_ms: 3000,
        ..Limits::default()
    };
    let fresh = [UserProbe {
        user: "u1".into(),
        tier: Some(tier.clone()),
        age_s: Some(2),
        since_fault_end_ms: 3500.0,
        sent_ms: 8500.0,
        latency_ms: 50.0,
    }];
    let mut c = cx(&p, limits, Some((1000.0, 5000.0)), &tr);
    c.user_probes = Some(&fresh);
    let v = check(&obs, &c, &recovery(&obs, &c));
    assert_eq!(verdict(&v, "USER_TIER_REPOPULATED").ok, Some(true));
    let old = [UserProbe {
        user: "u1".into(),
        tier: Some(tier),
        age_s: Some(3600),
        since_fault_end_ms: 3500.0,
        sent_ms: 8500.0,
        latency_ms: 50.0,
    }];
    c.user_probes = Some(&old);
    let v = check(&obs, &c, &recovery(&obs, &c));
    assert!(verdict(&v, "USER_TIER_REPOPULATED").broken());
}
