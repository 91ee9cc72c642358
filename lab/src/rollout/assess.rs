//! [R-GRADUAL] What `drill --rollout` checks (docs/rollout.md): the verdict expected, the
//! steps in order with none lost or repeated, no verdict on thin evidence, a bad release's
//! exposure within the bound, every answer after the end from the final version.

use serde::Serialize;
use understudy_compiler::release::rollout::record::RolloutRecord;
use understudy_compiler::release::rollout::{Judgement, Phase};

use super::front::Deployment;
use super::judged::{self, Slack};
use super::load::Seen;
use crate::drill::check::blame::{self, Excused, Judgement as Judged, Offender};
use crate::witness::Stalls;

/// Answers sent this soon after the last deployment may still be on their way.
const SETTLE_MS: u64 = 300;
/// How far over the first step's share a rolled-back release's answers may be, in standard
/// deviations of the random split: one-sided 99.99%, so a correct split fails it about once
/// in 10,000 runs (at 99% it would be once in a hundred).
const EXPOSURE_Z: f64 = 3.719;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Expect {
    Advance,
    RollBack,
}

#[derive(Debug, Serialize)]
pub struct Check {
    pub name: &'static str,
    /// Whether it held as the run went (an inconclusive check did not).
    pub held: bool,
    /// `held`, `failed`, or `inconclusive`: broken only by answers that stalls of the host
    /// explain ([`super::judged`]).
    pub judgement: Judged,
    pub detail: String,
    /// The answers it blames on the edge, the first [`blame::LISTED`], and how many in all.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub blamed: Vec<Offender>,
    pub blamed_count: usize,
    /// The answers stalls excused, with the stalls, the first [`blame::LISTED`].
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub excused: Vec<Excused>,
    pub excused_count: usize,
}

impl Check {
    fn new(name: &'static str, held: bool, detail: String) -> Check {
        Check {
            name,
            held,
            judgement: if held { Judged::Held } else { Judged::Failed },
            detail,
            blamed: Vec::new(),
            blamed_count: 0,
            excused: Vec::new(),
            excused_count: 0,
        }
    }

    /// A broken check judged against the witness: inconclusive when stalls excused some of
    /// its offenders and it holds without them; failed otherwise, naming what it blames.
    fn judged(mut self, j: judged::Judged) -> Check {
        if self.held {
            return self;
        }
        self.excused_count = j.excused.len();
        self.blamed_count = j.blamed.len();
        if !j.excused.is_empty() && j.holds_without {
            self.judgement = Judged::Inconclusive;
            self.detail.push_str(&format!(
                "; inconclusive: {} answers that broke it are covered by stalls of the host, and without them it holds",
                j.excused.len()
            ));
        } else {
            self.judgement = Judged::Failed;
            if !j.blamed.is_empty() {
                self.detail.push_str(&format!(
                    "; {} answers blamed on the edge (first: {})",
                    j.blamed.len(),
                    j.blamed[0].what
                ));
            }
            if !j.excused.is_empty() {
                self.detail.push_str(&format!(
                    "; {} covered by stalls, and it breaks without them",
                    j.excused.len()
                ));
            }
        }
        self.blamed = j.blamed.into_iter().take(blame::LISTED).collect();
        self.excused = j.excused.into_iter().take(blame::LISTED).collect();
        self
    }
}

#[derive(Debug, Serialize)]
pub struct Exposure {
    /// From the first deployment of the new version to the rollback's.
    pub seconds: f64,
    pub bound_seconds: f64,
    pub answers: u64,
    pub new_answers: u64,
    pub share: f64,
    pub first_step_share: f64,
}

#[derive(Debug, Serialize)]
pub struct Outcome {
    pub old: String,
    pub new: String,
    pub rate_rps: f64,
    pub phase: Phase,
    /// ms after the traffic started, and the new version's share.
    pub deployments: Vec<(f64, u8)>,
    /// What the record said when the controller was killed.
    pub killed_at: Option<String>,
    pub answers: u64,
    pub old_answers: u64,
    pub new_answers: u64,
    pub unanswered: u64,
    pub exposure: Option<Exposure>,
    pub record: RolloutRecord,
    /// The release the drill's scratch registry ended with as ACTIVE (the real registry is
    /// never changed).
    pub active_after: Option<String>,
    pub checks: Vec<Check>,
    /// [T-WITNESS] What the host's witness saw while the traffic ran (`Trace::report`).
    pub witness: serde_json::Value,
    /// When the traffic started (ms since the epoch): the clock of `deployments` and of the
    /// witness.
    pub traffic_started_at_ms: u64,
    /// The witness's stalls, for the picture (`witness.stalls` in the JSON).
    #[serde(skip)]
    pub stalls: Vec<crate::witness::Stall>,
}

impl Outcome {
    /// The checks that failed: the edge is to blame.
    pub fn broken(&self) -> Vec<&Check> {
        self.checks
            .iter()
            .filter(|c| c.judgement == Judged::Failed)
            .collect()
    }

    /// The checks broken only by answers that stalls of the host explain.
    pub fn inconclusive(&self) -> Vec<&Check> {
        self.checks
            .iter()
            .filter(|c| c.judgement == Judged::Inconclusive)
            .collect()
    }
}

/// What the drill knows of the host and of time: the witness's stalls, and the slack a
/// healthy model leaves each version (none: the scenario's model is not healthy throughout,
/// and the old version is not held to answering live).
pub struct Host<'a> {
    pub stalls: &'a Stalls,
    pub slack: Option<Slack>,
}

#[allow(clippy::too_many_arguments)]
pub fn assess(
    expect: Option<Expect>,
    old: &str,
    new: &str,
    rate_rps: f64,
    start_epoch: u64,
    seen: &[Seen],
    deployments: &[Deployment],
    rec: RolloutRecord,
    killed: Option<RolloutRecord>,
    host: Host<'_>,
) -> Outcome {
    let slo = &rec.slo;
    let version = |s: &Seen| s.obs.headers.policy_version.clone().unwrap_or_default();
    let count = |v: &str| seen.iter().filter(|s| version(s) == v).count() as u64;
    let unanswered = seen.iter().filter(|s| s.obs.status == 0).count() as u64;
    let mut checks = Vec::new();

    if let Some(e) = expect {
        let got = rec.state.phase;
        let want = match e {
            Expect::Advance => Phase::Done,
            Expect::RollBack => Phase::RolledBack,
        };
        let mut c = Check::new(
            "ROLLOUT_VERDICT",
            got == want,
            format!("expected {}, the rollout ended {}", want.word(), got.word()),
        );
        if let (Expect::Advance, Some(slack)) = (e, host.slack) {
            c = c.judged(judged::good_rolled_back(
                slo,
                rec.state.log.last(),
                seen,
                old,
                new,
                slack,
                start_epoch,
                host.stalls,
            ));
        }
        checks.push(c);
    }

    // The baseline: on a healthy model the old version's degraded share stays within the
    // margin the comparison works at, in every window the rollout judged.
    if let Some(slack) = host.slack {
        let windows: Vec<(u64, u64)> = rec
            .state
            .log
            .iter()
            .map(|l| (l.evidence.from, l.evidence.to))
            .collect();
        let margin = slo.degraded_margin;
        let (worst, j) =
            judged::baseline(seen, old, &windows, margin, slack, start_epoch, host.stalls);
        let shown = worst.map_or("no window judged".to_string(), |(k, n)| {
            format!(
                "worst window {:.2}% degraded ({k} of {n})",
                100.0 * k as f64 / n.max(1) as f64
            )
        });
        let broken = worst.is_some_and(|(k, n)| n > 0 && k as f64 > margin * n as f64);
        checks.push(
            Check::new(
                "ROLLOUT_BASELINE",
                !broken,
                format!(
                    "the old version's degraded share at most the {:.0}% margin in every judged window on a healthy model: {shown}",
                    100.0 * margin
                ),
            )
            .judged(j),
        );
    }

    // The steps: the front's deployments (a repeat of the same split — a deployment asked
    // again after a kill — is one step) against the judgements the record keeps.
    let mut distinct: Vec<u8> = deployments.iter().map(|d| d.new_percent).collect();
    distinct.dedup();
    let last_step = rec.state.step;
    let mut want: Vec<u8> = slo.steps[..=last_step.min(slo.steps.len() - 1)].to_vec();
    if rec.state.phase == Phase::RolledBack {
        want.push(0);
    }
    let advances: Vec<u8> = rec
        .state
        .log
        .iter()
        .filter(|l| matches!(l.judgement, Judgement::Advance { .. }))
        .map(|l| l.step)
        .collect();
    let once = advances.windows(2).all(|w| w[0] < w[1]);
    checks.push(Check::new(
        "ROLLOUT_STEPS",
        distinct == want && once,
        format!(
            "deployed {distinct:?}% (expected {want:?}%), advanced from {advances:?}%{}",
            killed.as_ref().map_or(String::new(), |k| format!(
                "; killed at step {} ({}) and resumed",
                slo.steps[k.state.step.min(slo.steps.len() - 1)],
                k.state.phase.word()
            ))
        ),
    ));

    // No verdict on evidence the run did not have: an advance or a rollback on a judgement
    // needs `min_answers` from each version; a rollback for holding too long is made on thin
    // evidence by design, but never on none — a window without a single answer from either
    // version judged nothing (a dwell too short for the traffic, a front not reached).
    let mut held_out_on = Vec::new();
    let thin: Vec<String> = rec
        .state
        .log
        .iter()
        .filter(|l| {
            let (o, n) = (l.evidence.old.answers, l.evidence.new.answers);
            match &l.judgement {
                Judgement::Hold { .. } => false,
                Judgement::RollBack { reasons }
                    if reasons.iter().any(|r| r.starts_with("held ")) =>
                {
                    held_out_on.push(format!("old {o} / new {n}"));
                    o == 0 || n == 0
                }
                _ => o < slo.min_answers || n < slo.min_answers,
            }
        })
        .map(|l| {
            format!(
                "at {}%: old {}, new {}",
                l.step, l.evidence.old.answers, l.evidence.new.answers
            )
        })
        .collect();
    checks.push(Check::new(
            "ROLLOUT_EVIDENCE",
            thin.is_empty(),
        if thin.is_empty() {
            let mut d = format!(
                "every advance and rollback on a judgement had at least {} answers from each version",
                slo.min_answers
            );
            if !held_out_on.is_empty() {
                d.push_str(&format!(
                    "; the rollback for holding too long came on {} answers",
                    held_out_on.join(", ")
                ));
            }
            d
        } else {
            format!("verdicts on evidence the run did not have: {}", thin.join("; "))
        },
    ));

    // A bad release's exposure: from its first deployment to the rollback's.
    let mut exposure = None;
    let first = deployments.iter().find(|d| d.new_percent > 0);
    let back = deployments.iter().rev().find(|d| d.new_percent == 0);
    if let (Phase::RolledBack, Some(first), Some(back), 0) =
        (rec.state.phase, first, back, last_step)
    {
        let inside: Vec<_> = seen
            .iter()
            .filter(|s| s.sent_epoch_ms >= first.at && s.sent_epoch_ms < back.at)
            .collect();
        let n = inside.len() as u64;
        let k = inside.iter().filter(|s| version(s) == new).count() as u64;
        let share = f64::from(slo.steps[0]) / 100.0;
        let tick = (slo.dwell_ms / 10).clamp(50, 5_000) as f64;
        // A release rolled back on worse figures is held to the bound of a bad release; one
        // rolled back for holding too long (a window the answers could not settle — a loaded
        // host, thin traffic) was never judged bad, and the controller keeps it up to a dwell
        // per hold allowed, and one more.
        let for_holding = rec.state.log.last().is_some_and(|l| {
            matches!(&l.judgement, Judgement::RollBack { reasons } if reasons.iter().any(|r| r.starts_with("held ")))
        });
        let holding_ms = f64::from(slo.max_holds + 1) * slo.dwell_ms as f64;
        let bound = if for_holding {
            slo.exposure_ms(rate_rps).max(holding_ms)
        } else {
            slo.exposure_ms(rate_rps)
        } + 2.0 * tick
            + 1_000.0;
        let seconds = back.at.saturating_sub(first.at) as f64 / 1000.0;
        // The front splits each request at random: k of n is binomial around the step's
        // share. More than [`EXPOSURE_Z`] standard deviations over it is no chance.
        let over =
            (k as f64 - n as f64 * share) / (n as f64 * share * (1.0 - share)).sqrt().max(1e-9);
        checks.push(Check::new(
            "ROLLOUT_EXPOSURE",
            seconds * 1000.0 <= bound && over <= EXPOSURE_Z,
            format!(
                "the rolled-back release was deployed {seconds:.2} s (bound {:.2} s) and answered {k} of {n} requests ({:.1}%, first step {:.0}%)",
                bound / 1000.0,
                100.0 * k as f64 / n.max(1) as f64,
                100.0 * share
            ),
        ));
        exposure = Some(Exposure {
            seconds,
            bound_seconds: bound / 1000.0,
            answers: n,
            new_answers: k,
            share: k as f64 / n.max(1) as f64,
            first_step_share: share,
        });
    }

    // After the end, every answer from the version it ended on.
    if let Some(last) = deployments.last() {
        let on = if rec.state.phase == Phase::Done {
            new
        } else {
            old
        };
        let after: Vec<_> = seen
            .iter()
            .filter(|s| s.sent_epoch_ms >= last.at + SETTLE_MS && s.obs.status != 0)
            .collect();
        let off = after.iter().filter(|s| version(s) != on).count();
        checks.push(Check::new(
            "ROLLOUT_AFTER",
            !after.is_empty() && off == 0,
            format!(
                "{} answers after the rollout ended, {off} not from {on}",
                after.len()
            ),
        ));
    }
    checks.push(Check::new(
        "ROLLOUT_ANSWERED",
        unanswered == 0,
        format!("{unanswered} of {} requests without an answer", seen.len()),
    ));

    Outcome {
        old: old.into(),
        new: new.into(),
        rate_rps,
        phase: rec.state.phase,
        deployments: deployments
            .iter()
            .map(|d| (d.at as f64 - start_epoch as f64, d.new_percent))
            .collect(),
        killed_at: killed.map(|k| k.summary()),
        answers: seen.len() as u64,
        old_answers: count(old),
        new_answers: count(new),
        unanswered,
        exposure,
        record: rec,
        active_after: None,
        checks,
        witness: serde_json::Value::Null,
        traffic_started_at_ms: start_epoch,
        stalls: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use understudy_compiler::release::rollout::{Controller, Evidence, Figures, Logged, Slo};

    const NO_HOST: Host<'static> = Host {
        stalls: &Stalls::NONE,
        slack: None,
    };

    fn record(log: Vec<Logged>, phase: Phase) -> RolloutRecord {
        let slo = Slo {
            steps: vec![10, 50, 100],
            dwell_ms: 2_000,
            min_answers: 120,
            ..Slo::default()
        };
        let (c, _) = Controller::start(slo.clone());
        let mut state = c.state().clone();
        state.log = log;
        state.phase = phase;
        RolloutRecord {
            format: understudy_compiler::release::rollout::record::FORMAT,
            service: "svc".into(),
            old: "r-000000000001".into(),
            new: "r-000000000002".into(),
            driver: "local".into(),
            slo,
            state,
            started_at_ms: 0,
            updated_at_ms: 0,
            replay: None,
        }
    }

    fn logged(old: u64, new: u64, judgement: Judgement) -> Logged {
        let f = |n| Figures {
            answers: n,
            ..Figures::default()
        };
        Logged {
            step: 10,
            at: 1,
            evidence: Evidence {
                from: 0,
                to: 1,
                old: f(old),
                new: f(new),
            },
            judgement,
        }
    }

    fn evidence_check(rec: RolloutRecord) -> Check {
        let o = assess(
            None,
            "r-000000000001",
            "r-000000000002",
            200.0,
            0,
            &[],
            &[],
            rec,
            None,
            NO_HOST,
        );
        o.checks
            .into_iter()
            .find(|c| c.name == "ROLLOUT_EVIDENCE")
            .expect("checked")
    }

    /// `drill --rollout … --dwell 0s` rolled a good release back after six holds on windows
    /// with no answers at all, and ROLLOUT_EVIDENCE passed ("every verdict had at least 120
    /// answers"): a verdict on a window without a single answer is evidence the run never had.
    #[test]
    fn a_rollback_on_a_window_without_answers_fails_the_evidence_check() {
        let held = |o, n| {
            logged(
                o,
                n,
                Judgement::RollBack {
                    reasons: vec!["too few answers".into(), "held 6 times at 10%: …".into()],
                },
            )
        };
        let c = evidence_check(record(vec![held(41, 0)], Phase::RolledBack));
        assert!(!c.held, "{}", c.detail);
        assert!(c.detail.contains("old 41, new 0"), "{}", c.detail);
        // Thin but not empty (20 req/s: a service too thin for its min_answers): held.
        let c = evidence_check(record(vec![held(37, 4)], Phase::RolledBack));
        assert!(c.held, "{}", c.detail);
        assert!(c.detail.contains("old 37 / new 4"), "{}", c.detail);
        // An advance on fewer than min_answers: broken.
        let adv = logged(500, 100, Judgement::Advance { reasons: vec![] });
        assert!(!evidence_check(record(vec![adv], Phase::Done)).held);
    }

    /// A good release rolled back for holding too long on a loaded host was held to a bad
    /// release's exposure bound (9.4 s at 200 req/s) and failed it after six holds (14 s):
    /// the controller keeps such a release up to a dwell per hold allowed, and one more.
    #[test]
    fn a_rollback_for_holding_is_held_to_the_holds_bound_and_one_on_worse_figures_to_the_bad_release_bound(
    ) {
        let exposure = |reason: &str| {
            let back = logged(
                900,
                100,
                Judgement::RollBack {
                    reasons: vec![reason.into()],
                },
            );
            let deployments = [
                Deployment {
                    at: 0,
                    new_percent: 10,
                },
                Deployment {
                    at: 14_000,
                    new_percent: 0,
                },
            ];
            let o = assess(
                None,
                "r-000000000001",
                "r-000000000002",
                200.0,
                0,
                &[],
                &deployments,
                record(vec![back], Phase::RolledBack),
                None,
                NO_HOST,
            );
            o.checks
                .into_iter()
                .find(|c| c.name == "ROLLOUT_EXPOSURE")
                .expect("checked")
        };
        let c = exposure("held 6 times at 10%: a rollout does not stay half-deployed");
        assert!(c.held, "{}", c.detail);
        let c = exposure("worse — degraded share: …");
        assert!(!c.held, "{}", c.detail);
        assert!(c.detail.contains("bound 9.40 s"), "{}", c.detail);
    }

    #[test]
    fn the_verdict_check_speaks_in_operators_words() {
        let o = assess(
            Some(Expect::Advance),
            "r-000000000001",
            "r-000000000002",
            200.0,
            0,
            &[],
            &[],
            record(vec![], Phase::RolledBack),
            None,
            NO_HOST,
        );
        let c = &o.checks[0];
        assert_eq!(
            c.detail,
            "expected advanced to 100%, the rollout ended rolled back"
        );
    }

    #[test]
    fn the_picture_of_a_drill_draws_the_witness_stalls_and_a_real_rollout_none() {
        let rec = record(
            vec![logged(200, 200, Judgement::Advance { reasons: vec![] })],
            Phase::Done,
        );
        let stalls = [crate::witness::Stall {
            from_ms: 100.0,
            to_ms: 180.0,
            seen_by: vec!["workerd stopped".into()],
        }];
        let host = crate::rollout::plot::Host {
            traffic_started_at_ms: 0,
            stalls: &stalls,
        };
        let svg = crate::rollout::plot::render(&rec, Some(&host)).unwrap();
        assert!(svg.contains("host stalls seen by the witness (1)"), "{svg}");
        let svg = crate::rollout::plot::render(&rec, None).unwrap();
        assert!(!svg.contains("host stalls"));
    }
}
