//! From a scenario to what the simulated origin does, and how `--time-scale` shrinks a drill.
//!
//! Why time windows and not the origin's request numbers? A scenario's phases name the
//! *edge's* requests (0-based), but the origin numbers only the calls that reach it (from 1),
//! and those drift apart as soon as the breaker keeps a request from the model: in seed 002
//! the breaker skips six requests, so "origin request 17" is the edge's request 22. The
//! drill's arrivals follow a fixed schedule (request `i` leaves at `i × interval`), so a
//! request-index phase `[a, b]` is the window `[(a − ½)·interval, (b + ½)·interval)` on the
//! origin's clock, which the drill restarts at its first request. The half-interval guard
//! absorbs the edge's own delay before it calls out, as long as that delay stays under half
//! an interval (true for seed 002's 1 s spacing; at 2,400 req/s a phase edge blurs by a
//! request or two, which is what a real incident does too).
//!
//! Phases may overlap in a scenario (the earlier wins) but an origin script refuses
//! overlapping rules, so the windows are flattened into disjoint segments first.

use crate::origin::{Behavior, Fault, Rule, Script, TimeRange};
use understudy_compiler::simulate::scenario::{ModelFault, Scenario};

/// What the origin does for one scenario fault. The `Retry-After` of a `429` without one is
/// 1 s (the origin always sends the header).
pub fn behavior(f: ModelFault) -> Behavior {
    let with = |fault, delay_ms| Behavior { fault, delay_ms };
    match f {
        ModelFault::Ok { latency_ms } => with(Fault::Latency { ms: latency_ms }, 0),
        ModelFault::Status { code, latency_ms } => with(
            Fault::Status {
                code: u64::from(code),
            },
            latency_ms,
        ),
        ModelFault::RateLimited {
            retry_after_s,
            latency_ms,
        } => with(
            Fault::RateLimited {
                retry_after_s: retry_after_s.unwrap_or(1),
            },
            latency_ms,
        ),
        ModelFault::Hang => with(Fault::Hang, 0),
        ModelFault::Reset => with(Fault::Reset, 0),
        ModelFault::Malformed { latency_ms } => with(Fault::Malformed, latency_ms),
        ModelFault::Empty { latency_ms } => with(Fault::Empty, latency_ms),
        ModelFault::Bimodal {
            fast_ms,
            slow_ms,
            slow_ppm,
        } => with(
            Fault::Bimodal {
                fast_ms,
                slow_ms,
                slow_per_mille: u64::from(slow_ppm / 1000),
            },
            0,
        ),
    }
}

/// The origin script that plays `sc`'s model: disjoint time rules, earlier phases winning,
/// and the model's normal latency as the default.
pub fn origin_script(sc: &Scenario) -> Script {
    let windows: Vec<((u64, u64), ModelFault)> = sc
        .phases
        .iter()
        .map(|p| (sc.window_us(p), p.fault))
        .filter(|((a, b), _)| a < b)
        .collect();
    let mut cuts: Vec<u64> = windows.iter().flat_map(|((a, b), _)| [*a, *b]).collect();
    cuts.sort_unstable();
    cuts.dedup();
    let mut rules: Vec<Rule> = Vec::new();
    let mut last: Option<(u64, u64, ModelFault)> = None;
    let flush = |seg: Option<(u64, u64, ModelFault)>, rules: &mut Vec<Rule>| {
        if let Some((a, b, f)) = seg {
            rules.push(Rule {
                requests: None,
                seconds: Some(TimeRange {
                    from: a as f64 / 1e6,
                    to: (b != u64::MAX).then(|| b as f64 / 1e6),
                }),
                behavior: behavior(f),
            });
        }
    };
    for pair in cuts.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        let winner = windows
            .iter()
            .find(|((wa, wb), _)| *wa <= a && b <= *wb)
            .map(|(_, f)| *f);
        last = match (last, winner) {
            (Some((la, lb, lf)), Some(f)) if lb == a && lf == f => Some((la, b, lf)),
            (prev, Some(f)) => {
                flush(prev, &mut rules);
                Some((a, b, f))
            }
            (prev, None) => {
                flush(prev, &mut rules);
                None
            }
        };
    }
    flush(last, &mut rules);
    Script {
        default: behavior(ModelFault::Ok {
            latency_ms: sc.model_latency_ms,
        }),
        rules,
    }
}

/// The fault window of a scenario, in ms since the first arrival: from the first moment any
/// phase applies to the last (None when the model is never faulty).
pub fn fault_window_ms(sc: &Scenario) -> Option<(u64, u64)> {
    let w: Vec<(u64, u64)> = sc
        .phases
        .iter()
        .filter(|p| !matches!(p.fault, ModelFault::Ok { latency_ms } if latency_ms <= sc.model_latency_ms))
        .map(|p| sc.window_us(p))
        .filter(|(a, b)| a < b)
        .collect();
    // A phase through the last request lasts past the last arrival; the run ends there.
    let end_of_run = sc.requests.saturating_mul(sc.interval_us).max(1);
    let w: Vec<(u64, u64)> = w.into_iter().map(|(a, b)| (a, b.min(end_of_run))).collect();
    let from = w.iter().map(|x| x.0).min()?;
    let to = w.iter().map(|x| x.1).max()?;
    Some((from / 1000, to / 1000))
}

/// `--time-scale F` (0 < F ≤ 1) applied to a scenario: the run and its time phases shrink by
/// F; the arrival rate, latencies and KV ages do not (they are the physics of one request).
pub fn scale_scenario(sc: &Scenario, f: f64) -> Scenario {
    let mut out = sc.clone();
    if (f - 1.0).abs() < f64::EPSILON {
        return out;
    }
    let s = |x: u64| (x as f64 * f).round() as u64;
    out.requests = s(sc.requests).max(1);
    for p in &mut out.phases {
        if let Some((a, b)) = p.requests {
            let last = out.requests - 1;
            p.requests = Some((s(a).min(last), s(b).min(last).max(s(a).min(last))));
        }
        if let Some((a, b)) = p.time {
            p.time = Some((s(a), s(b).max(s(a) + 1)));
        }
    }
    out
}

/// The scenario's schedule slowed by `f` ≥ 1: arrivals further apart and time phases later
/// by the same factor, so request-index phases keep their requests (see `TIE_STRETCH`).
pub fn stretch(sc: &Scenario, f: f64) -> Scenario {
    let mut out = sc.clone();
    out.interval_us = (sc.interval_us as f64 * f).round() as u64;
    for p in &mut out.phases {
        if let Some((a, b)) = p.time {
            p.time = Some(((a as f64 * f).round() as u64, (b as f64 * f).round() as u64));
        }
    }
    out
}

pub use understudy_compiler::simulate::scale::scale_policy;

#[cfg(test)]
mod tests {
    use super::*;
    use understudy_compiler::simulate::scenario::Phase;
    use understudy_core::policy::Breaker;

    fn scenario(interval_ms: u64, requests: u64, phases: Vec<Phase>) -> Scenario {
        Scenario {
            name: "t".into(),
            description: String::new(),
            start_ms: 0,
            requests,
            interval_us: interval_ms * 1000,
            params: Default::default(),
            model_latency_ms: 150,
            phases,
            kv: Vec::new(),
            kv_latency_ms: 2,
            expect: None,
            fleet: None,
        }
    }

    fn secs(r: &Rule) -> (f64, f64) {
        let t = r.seconds.expect("time rule");
        (t.from, t.to.expect("bounded"))
    }

    /// Seed 002: down for requests 12–20, hangs on 5 and 25, one request a second.
    #[test]
    fn seed_002_phases_become_disjoint_windows_centred_on_their_requests() {
        let down = ModelFault::Status {
            code: 503,
            latency_ms: 0,
        };
        let sc = scenario(
            1000,
            30,
            vec![
                Phase {
                    requests: Some((12, 20)),
                    time: None,
                    fault: down,
                    regions: Vec::new(),
                },
                Phase {
                    requests: Some((5, 5)),
                    time: None,
                    fault: ModelFault::Hang,
                    regions: Vec::new(),
                },
                Phase {
                    requests: Some((25, 25)),
                    time: None,
                    fault: ModelFault::Hang,
                    regions: Vec::new(),
                },
            ],
        );
        let s = origin_script(&sc);
        assert_eq!(
            s.default,
            Behavior {
                fault: Fault::Latency { ms: 150 },
                delay_ms: 0
            }
        );
        let got: Vec<((f64, f64), &str)> = s
            .rules
            .iter()
            .map(|r| (secs(r), r.behavior.fault.kind()))
            .collect();
        assert_eq!(
            got,
            vec![
                ((4.5, 5.5), "hang"),
                ((11.5, 20.5), "status"),
                ((24.5, 25.5), "hang")
            ]
        );
        assert_eq!(fault_window_ms(&sc), Some((4500, 25500)));
    }

    #[test]
    fn overlapping_phases_are_flattened_and_the_earlier_wins() {
        let sc = scenario(
            100,
            100,
            vec![
                Phase {
                    requests: None,
                    time: Some((2000, 4000)),
                    fault: ModelFault::Hang,
                    regions: Vec::new(),
                },
                Phase {
                    requests: None,
                    time: Some((0, 6000)),
                    fault: ModelFault::Ok { latency_ms: 500 },
                    regions: Vec::new(),
                },
            ],
        );
        let s = origin_script(&sc);
        let got: Vec<((f64, f64), u64)> = s
            .rules
            .iter()
            .map(|r| {
                (
                    secs(r),
                    if let Fault::Latency { ms } = r.behavior.fault {
                        ms
                    } else {
                        0
                    },
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![((0.0, 2.0), 500), ((2.0, 4.0), 0), ((4.0, 6.0), 500)]
        );
        assert_eq!(s.rules[1].behavior.fault, Fault::Hang);
        // The script the origin receives passes its own validation (no overlaps).
        let json = serde_json::json!({
            "rules": s.rules.iter().map(|r| serde_json::json!({
                "seconds": {"from": secs(r).0, "to": secs(r).1},
                "fault": r.behavior.fault, "delay_ms": r.behavior.delay_ms
            })).collect::<Vec<_>>()
        });
        Script::parse(&json.to_string(), "derived").expect("valid script");
    }

    #[test]
    fn every_scenario_fault_maps_to_an_origin_fault() {
        assert_eq!(
            behavior(ModelFault::Ok { latency_ms: 25 }).fault,
            Fault::Latency { ms: 25 }
        );
        assert_eq!(
            behavior(ModelFault::Status {
                code: 503,
                latency_ms: 0
            })
            .fault,
            Fault::Status { code: 503 }
        );
        let rl = behavior(ModelFault::RateLimited {
            retry_after_s: Some(7),
            latency_ms: 5,
        });
        assert_eq!(
            (rl.fault, rl.delay_ms),
            (Fault::RateLimited { retry_after_s: 7 }, 5)
        );
        assert_eq!(behavior(ModelFault::Hang).fault, Fault::Hang);
        assert_eq!(behavior(ModelFault::Reset).fault, Fault::Reset);
        assert_eq!(
            behavior(ModelFault::Malformed { latency_ms: 3 }).fault,
            Fault::Malformed
        );
        assert_eq!(
            behavior(ModelFault::Empty { latency_ms: 3 }).fault,
            Fault::Empty
        );
    }

    #[test]
    fn time_scale_shrinks_the_run_and_the_breaker_clocks_but_not_latencies() {
        let sc = scenario(
            10,
            18_000,
            vec![Phase {
                requests: None,
                time: Some((0, 120_000)),
                fault: ModelFault::Ok { latency_ms: 500 },
                regions: Vec::new(),
            }],
        );
        let small = scale_scenario(&sc, 0.05);
        assert_eq!(small.requests, 900);
        assert_eq!(small.phases[0].time, Some((0, 6000)));
        assert_eq!(small.phases[0].fault, ModelFault::Ok { latency_ms: 500 });
        assert_eq!(small.interval_us, sc.interval_us);

        let mut p = understudy_compiler::fixtures::sample_policy();
        p.breaker = Breaker::Rate(understudy_core::testing::seed_rate_breaker());
        let Breaker::Rate(r) = scale_policy(&p, 0.05).breaker else {
            panic!("rate")
        };
        assert_eq!(
            (r.window_ms, r.hold_down_ms, r.failed_probe_hold_ms),
            (1500, 1500, 3000)
        );
        assert!((r.probe_fraction - 0.4).abs() < 1e-9);
        assert_eq!(
            (r.min_calls, r.probe_min_calls, r.slow_call_p95_ms),
            (20, 20, 45)
        );
    }
}
