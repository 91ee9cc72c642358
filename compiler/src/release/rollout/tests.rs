//! The rollout controller on made-up windows: a good release advances, a bad one rolls back
//! at the first step, thin or shared trouble holds, a resumed rollout goes on where it was.

use super::*;

fn slo() -> Slo {
    Slo {
        steps: vec![10, 50, 100],
        dwell_ms: 1_000,
        min_answers: 500,
        max_holds: 2,
        ..Slo::default()
    }
}

/// `answers` whose latencies spread evenly up to `p95_ms / 0.95`: a p95 of `p95_ms`.
fn figures(answers: u64, degraded: u64, unavailable: u64, p95_ms: f64) -> Figures {
    let top = p95_ms / 0.95;
    Figures {
        answers,
        degraded,
        unavailable,
        latency: Histogram::of((1..=answers).map(|i| top * i as f64 / answers as f64)),
    }
}

fn ev(old: Figures, new: Figures) -> Evidence {
    Evidence {
        from: 0,
        to: 1,
        old,
        new,
    }
}

fn deploys(cmds: &[Command]) -> Vec<u8> {
    cmds.iter()
        .filter_map(|c| match c {
            Command::Deploy { new_percent } => Some(*new_percent),
            _ => None,
        })
        .collect()
}

/// Runs a rollout where every window gives `window(step)`; returns the percentages deployed.
fn play(slo: Slo, window: impl Fn(u8) -> Evidence) -> (Controller, Vec<u8>) {
    let (mut c, cmds) = Controller::start(slo);
    assert!(
        matches!(cmds[0], Command::Record(_)),
        "recorded before it acts"
    );
    let mut deployed = deploys(&cmds);
    let mut now = 0u64;
    for _ in 0..50 {
        if c.finished() {
            break;
        }
        now += 10;
        let cmds = if matches!(c.state().phase, Phase::Deploying | Phase::RollingBack) {
            c.deployed(Millis(now))
        } else {
            now += 1_000;
            match c.tick(Millis(now)).first() {
                Some(Command::Query { from, to }) => {
                    assert!(to - from >= 1_000, "a whole dwell");
                    let step = c.slo.steps[c.state().step];
                    c.evidence(Millis(now), window(step))
                }
                _ => Vec::new(),
            }
        };
        deployed.extend(deploys(&cmds));
    }
    (c, deployed)
}

#[test]
fn a_good_release_advances_through_every_step_to_all_of_the_traffic() {
    let (c, deployed) = play(slo(), |_| {
        ev(figures(5_000, 100, 0, 40.0), figures(5_000, 100, 0, 41.0))
    });
    assert_eq!(deployed, vec![10, 50, 100]);
    assert_eq!(c.state().phase, Phase::Done);
    assert!(c
        .state()
        .log
        .iter()
        .all(|l| matches!(l.judgement, Judgement::Advance { .. })));
}

#[test]
fn a_release_that_degrades_more_is_rolled_back_at_its_first_step() {
    // A wrong origin path: every answer of the new version is a fallback.
    let (c, deployed) = play(slo(), |_| {
        ev(figures(5_000, 100, 0, 40.0), figures(600, 600, 0, 45.0))
    });
    assert_eq!(deployed, vec![10, 0], "rolled back from 10%");
    assert_eq!(c.state().phase, Phase::RolledBack);
    let Judgement::RollBack { reasons } = &c.state().log[0].judgement else {
        panic!("{:?}", c.state().log)
    };
    assert!(
        reasons[0].starts_with("worse — degraded share"),
        "{reasons:?}"
    );
}

#[test]
fn a_slower_release_or_one_answering_5xx_is_rolled_back() {
    let slow = judge(
        &slo(),
        &ev(figures(5_000, 0, 0, 40.0), figures(5_000, 0, 0, 60.0)),
    );
    assert!(matches!(slow, Judgement::RollBack { .. }), "{slow:?}");
    // A thin window's p95 over the limit on six stragglers is no evidence: it holds.
    let mut stragglers = figures(100, 0, 0, 30.0);
    stragglers.latency = Histogram::of((0..100).map(|i| if i < 94 { 30.0 } else { 100.0 }));
    let noisy = judge(
        &Slo {
            min_answers: 100,
            ..slo()
        },
        &ev(figures(5_000, 0, 0, 40.0), stragglers),
    );
    let Judgement::Hold { reasons } = &noisy else {
        panic!("{noisy:?}")
    };
    assert!(reasons[2].starts_with("unsettled — p95"), "{reasons:?}");
    let unavailable = judge(
        &slo(),
        &ev(figures(5_000, 10, 0, 40.0), figures(5_000, 200, 150, 40.0)),
    );
    let Judgement::RollBack { reasons } = unavailable else {
        panic!()
    };
    assert!(
        reasons[1].starts_with("worse — no-tier 5xx share"),
        "{reasons:?}"
    );
}

#[test]
fn too_few_answers_or_trouble_both_versions_share_holds_and_holding_too_long_rolls_back() {
    let thin = judge(
        &slo(),
        &ev(figures(5_000, 0, 0, 40.0), figures(120, 0, 0, 40.0)),
    );
    assert!(matches!(thin, Judgement::Hold { .. }), "{thin:?}");
    // An origin incident during the rollout: both versions half degraded. The new one is no
    // worse, but 500 answers cannot show it is within 2 points either.
    let incident = judge(
        &slo(),
        &ev(figures(600, 300, 0, 45.0), figures(600, 310, 0, 45.0)),
    );
    assert!(matches!(incident, Judgement::Hold { .. }), "{incident:?}");
    let (c, deployed) = play(slo(), |_| {
        ev(figures(600, 300, 0, 45.0), figures(600, 310, 0, 45.0))
    });
    assert_eq!(deployed, vec![10, 0], "held twice, then rolled back");
    assert_eq!(c.state().log.len(), 3);
    assert_eq!(c.state().phase, Phase::RolledBack);
}

#[test]
fn a_resumed_rollout_goes_on_from_its_record_with_no_step_lost_or_repeated() {
    let good = |_| ev(figures(5_000, 100, 0, 40.0), figures(5_000, 100, 0, 40.0));
    let (mut c, _) = Controller::start(slo());
    c.deployed(Millis(0));
    let cmds = c.evidence(Millis(1_000), good(10));
    // Killed after recording the advance to 50%, before the deployment was confirmed.
    let Command::Record(recorded) = &cmds[0] else {
        panic!("{cmds:?}")
    };
    let text = serde_json::to_string(recorded).unwrap();
    let (mut again, cmds) = Controller::resume(slo(), serde_json::from_str(&text).unwrap());
    assert_eq!(
        deploys(&cmds),
        vec![50],
        "the step asked for again, not the one before"
    );
    again.deployed(Millis(1_100));
    assert!(again.tick(Millis(2_099)).is_empty());
    assert_eq!(
        again.tick(Millis(2_100)),
        vec![Command::Query {
            from: 1_100,
            to: 2_100
        }]
    );
    // Killed while watching: it watches on from the recorded start.
    let text = serde_json::to_string(again.state()).unwrap();
    let (resumed, cmds) = Controller::resume(slo(), serde_json::from_str(&text).unwrap());
    assert!(cmds.is_empty());
    assert_eq!(
        resumed.tick(Millis(2_100)),
        vec![Command::Query {
            from: 1_100,
            to: 2_100
        }]
    );
}

#[test]
fn the_default_minimum_lets_a_faultless_version_advance_at_once() {
    let s = Slo::default();
    let n = s.min_answers;
    let clean = judge(&s, &ev(figures(n * 99, 0, 0, 40.0), figures(n, 0, 0, 40.0)));
    assert!(matches!(clean, Judgement::Advance { .. }), "{clean:?}");
}

#[test]
fn abort_puts_the_old_version_back_and_bad_settings_are_named() {
    let (mut c, _) = Controller::start(slo());
    c.deployed(Millis(0));
    let cmds = c.abort();
    assert_eq!(deploys(&cmds), vec![0]);
    let Command::Record(recorded) = &cmds[0] else {
        panic!("{cmds:?}")
    };
    assert_eq!(
        recorded.phase,
        Phase::Aborting,
        "recorded as an operator's abort asked for, not as done nor as a judgement's rollback"
    );
    assert!(
        !c.finished(),
        "not finished until the old version is confirmed at 100%"
    );
    // Killed there: the rollback is asked for again.
    let (mut again, cmds) = Controller::resume(slo(), recorded.clone());
    assert_eq!(deploys(&cmds), vec![0]);
    again.deployed(Millis(5));
    assert!(again.finished());
    assert_eq!(again.state().phase, Phase::Aborted, "its own phase");
    let bad = Slo {
        steps: vec![50, 10],
        min_answers: 0,
        degraded_margin: 2.0,
        ..Slo::default()
    };
    let p: Vec<String> = bad
        .problems()
        .iter()
        .map(|x| x.render(&|k| format!("--{}", k.replace('_', "-"))))
        .collect();
    assert!(p.iter().any(|x| x.contains("ERR_ROLLOUT_STEPS")), "{p:?}");
    assert!(p.iter().any(|x| x.contains("increase to 100")), "{p:?}");
    assert!(
        p.iter().any(|x| x.contains("`--min-answers` is 0")),
        "{p:?}"
    );
    assert!(
        p.iter().any(|x| x.contains("`--degraded-margin` is 2")),
        "{p:?}"
    );
    assert!(Slo::default().problems().is_empty());
}

#[test]
fn the_exposure_of_a_bad_release_is_its_first_step_for_the_longer_of_dwell_and_gathering() {
    let s = Slo::default();
    // 1% of 2,400 req/s gathers 1,200 answers (1,282 expected, for 99%) in 53 s, under the
    // 5-minute dwell.
    assert_eq!(s.exposure_ms(2_400.0), 300_000.0);
    // 1% of 10 req/s: 12,820 s to gather them, 43 dwells.
    assert_eq!(s.exposure_ms(10.0), 43.0 * 300_000.0);
    // The drill's short form: 120 answers at 10% of 200 req/s (20/s) — 146 expected for 99%,
    // 7.3 s — judged every 2 s: 8 s.
    let short = Slo {
        steps: vec![10, 50, 100],
        dwell_ms: 2_000,
        min_answers: 120,
        ..Slo::default()
    };
    assert_eq!(short.exposure_ms(200.0), 8_000.0);
}

#[test]
fn the_answers_a_faultless_release_needs_follow_the_margin() {
    assert_eq!(answers_to_advance(0.0), None);
    let n = answers_to_advance(0.005).unwrap();
    assert!((1_070..=1_085).contains(&n), "{n}");
    assert!(
        Slo::default().min_answers >= n,
        "the defaults let a faultless release advance"
    );
    assert!(answers_to_advance(0.05).unwrap() < 110);
}
