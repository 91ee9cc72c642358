use super::*;
use crate::replay::line::{CallSeen, End};

/// A line arriving `at` ms after 0, answered `outcome` in `latency` ms, in `mode`.
pub(crate) fn line(at: u64, outcome: &str, latency: u64, mode: &str, calls: Vec<CallSeen>) -> Line {
    Line {
        at_ms: at,
        outcome: outcome.into(),
        status: if outcome == "unavailable" { 503 } else { 200 },
        tier: None,
        reason: None,
        tiers: Vec::new(),
        calls,
        latency_ms: latency,
        policy_version: "r-1".into(),
        breaker_mode: mode.into(),
        service: "s".into(),
        isolate: "a".into(),
    }
}

pub(crate) fn call(ms: u64, end: End, probe: bool) -> CallSeen {
    CallSeen {
        start_ms: 0,
        end_ms: ms,
        due_ms: Some(45),
        end,
        status: None,
        retry_after_s: None,
        probe,
        hedge: false,
    }
}

#[test]
fn shares_calls_probes_and_percentiles_are_counted_from_the_lines() {
    let lines = vec![
        line(
            0,
            "live",
            20,
            "PRIMARY_HEALTHY",
            vec![call(20, End::Ok, false)],
        ),
        line(
            100,
            "fallback",
            47,
            "PRIMARY_HEALTHY",
            vec![call(45, End::Censored { busy: false }, false)],
        ),
        line(200, "unavailable", 50, "DEGRADED_FALLBACK", vec![]),
        line(
            1_200,
            "fallback",
            3,
            "RECOVERING_PROBE",
            vec![call(45, End::Censored { busy: false }, true)],
        ),
    ];
    let f = figures(&lines, 0, &[], 1_000);
    assert_eq!((f.answers, f.live, f.degraded, f.unavailable), (4, 1, 2, 1));
    assert_eq!((f.model_calls, f.probes), (3, 1));
    assert_eq!((f.latency_p50_ms, f.latency_p95_ms), (20, 50));
    assert_eq!(f.windows.len(), 2);
    assert_eq!((f.windows[0].answers, f.windows[0].live), (3, 1));
    assert_eq!(f.windows[1].from_ms, 1_000);
    assert!((f.share(f.degraded) - 0.5).abs() < 1e-9);
}

#[test]
fn an_incident_is_degraded_when_the_breaker_opens_and_recovered_when_it_closes_and_answers_are_normal(
) {
    let inc = Incident {
        onset_ms: 1_000,
        last_bad_ms: 3_000,
        first_good_ms: Some(5_000),
        bad_calls: 10,
    };
    let mut lines = Vec::new();
    for t in (0..1_000).step_by(10) {
        lines.push(line(t, "live", 20, "PRIMARY_HEALTHY", vec![]));
    }
    for t in (1_000..1_300).step_by(10) {
        lines.push(line(t, "fallback", 47, "PRIMARY_HEALTHY", vec![]));
    }
    for t in (1_300..5_000).step_by(10) {
        lines.push(line(t, "fallback", 3, "DEGRADED_FALLBACK", vec![]));
    }
    for t in (5_000..8_000).step_by(10) {
        lines.push(line(t, "live", 20, "PRIMARY_HEALTHY", vec![]));
    }
    let f = figures(&lines, 0, &[inc], 1_000);
    let r = &f.incidents[0];
    assert_eq!(
        r.degraded_at_ms,
        Some(1_303),
        "the first answer showing the open breaker"
    );
    assert_eq!(r.breaker_healthy_at_ms, Some(5_020));
    assert_eq!(r.normal_at_ms, Some(5_000));
    assert_eq!(r.recovered_at_ms, Some(5_020));
    // Cut before the breaker closed: not recovered.
    let short: Vec<Line> = lines.iter().filter(|l| l.at_ms < 4_000).cloned().collect();
    assert_eq!(
        figures(&short, 0, &[inc], 1_000).incidents[0].recovered_at_ms,
        None
    );
}
