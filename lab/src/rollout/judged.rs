//! [T-WITNESS] The rollout drill's checks of time, judged against the host's witness
//! (docs/rollout.md, "A red rollout drill means a broken promise"), with the drill's rule
//! ([`crate::drill::check::blame`]): an answer that broke a check is excused when the stalls
//! the witness saw over its span cover its lateness, and blamed on the edge otherwise.
//!
//! - `ROLLOUT_VERDICT`, a good release (`--expect advance`) rolled back: the new version's
//!   answers in the decisive judgement's window that counted against it are the offenders —
//!   over the p95 limit (late by what they are over it), a deadline missed (late by the slack
//!   a healthy model left: the deadline less its latency), answered while its breaker was open
//!   (excused together only when the misses before the first of them were, none blamed: the
//!   breaker opened on what the stalls did), or degraded otherwise (never excused). The
//!   judgement is made again on what the load saw in that window with the excused answers set
//!   aside: if it advances then (or holds, for a rollback on evidence), the verdict is
//!   inconclusive. A bad release that advanced is never excused: no stall makes a release
//!   better than the one it is judged against.
//! - `ROLLOUT_BASELINE`: on a healthy model the old version's degraded share stays within the
//!   SLO's degraded margin in every window the rollout judged — a rollout judged against a
//!   degraded baseline proves nothing about the new release. In a window over it, the old
//!   version's answers that were not live are the offenders, by the same rule, and the share
//!   is taken again without the excused ones.

use std::collections::HashSet;

use understudy_compiler::release::rollout::{judge, Figures, Histogram, Judgement, Slo};

use super::load::Seen;
use crate::drill::check::blame::{self, Excused, Offender};
use crate::witness::Stalls;

/// What the drill knows of time: how much slack a healthy model leaves each version's
/// deadline (its deadline less the model's latency; a deadline missed by a release whose
/// slack is not positive is the release's, never a stall's).
#[derive(Debug, Clone, Copy)]
pub struct Slack {
    pub old_ms: f64,
    pub new_ms: f64,
}

/// A check of time, judged.
#[derive(Debug, Default)]
pub struct Judged {
    pub blamed: Vec<Offender>,
    pub excused: Vec<Excused>,
    /// Whether the check holds with the excused offenders set aside.
    pub holds_without: bool,
}

/// An answer the front counted (every status but 4xx, answered at all).
fn counted(s: &Seen) -> bool {
    s.obs.status != 0 && !(400..500).contains(&s.obs.status)
}

fn unavailable(s: &Seen) -> bool {
    s.obs.status >= 500
}

fn degraded(s: &Seen) -> bool {
    unavailable(s) || s.obs.is_degraded()
}

fn breaker_open(s: &Seen) -> bool {
    s.obs.headers.reason.as_deref()
        == Some(understudy_core::classify::FailureReason::BreakerOpen.code())
}

/// When the answer ended, ms since the epoch (the front counts an answer when it ends).
fn ended(s: &Seen) -> f64 {
    s.sent_epoch_ms as f64 + s.obs.latency_ms
}

fn what(s: &Seen, why: &str) -> String {
    format!(
        "request {} (HTTP {}, {:.1} ms, {why})",
        s.obs.index, s.obs.status, s.obs.latency_ms
    )
}

/// The offenders among one version's `answers` (sorted by when they were sent) on the
/// drill's clock (ms after `start`), split by `stalls`. `slow_over`: the latency limit an
/// answer breaks (none: latency is not judged). The breaker's answers are judged by the
/// misses that came before the first of them in `all` (the version's whole run).
fn split(
    answers: &[&Seen],
    all: &[&Seen],
    slow_over: Option<f64>,
    slack_ms: f64,
    start: u64,
    stalls: &Stalls,
) -> (Vec<Excused>, Vec<Offender>) {
    let at = |s: &Seen| s.sent_epoch_ms.saturating_sub(start) as f64;
    let late = |s: &Seen, why: &str, late_ms: f64| {
        Offender::late(
            what(s, why),
            Some(s.obs.index),
            at(s),
            at(s) + s.obs.latency_ms,
            late_ms,
        )
    };
    let missed =
        |s: &Seen| s.obs.is_degraded() && blame::missed_deadline(s.obs.headers.reason.as_deref());
    let offender = |s: &Seen| -> Option<Offender> {
        if unavailable(s) {
            Some(Offender::not_timing(
                what(s, "no tier answered"),
                Some(s.obs.index),
                at(s),
            ))
        } else if missed(s) && slack_ms > 0.0 {
            Some(late(s, "a deadline missed", slack_ms))
        } else if degraded(s) {
            let reason = s.obs.headers.reason.as_deref().unwrap_or("-");
            Some(Offender::not_timing(
                what(s, &format!("degraded, {reason}")),
                Some(s.obs.index),
                at(s),
            ))
        } else {
            slow_over
                .filter(|limit| s.obs.latency_ms > *limit)
                .map(|limit| late(s, &format!("over {limit:.1} ms"), s.obs.latency_ms - limit))
        }
    };
    let (group, single): (Vec<&Seen>, Vec<&Seen>) =
        answers.iter().copied().partition(|s| breaker_open(s));
    let (mut excused, mut blamed) =
        blame::split(single.iter().filter_map(|s| offender(s)).collect(), stalls);
    if let Some(first) = group.iter().map(|s| s.sent_epoch_ms).min() {
        // The misses that opened the breaker: every one before its first shed answer.
        let (ok, not): (Vec<_>, Vec<_>) = blame::split(
            all.iter()
                .filter(|s| s.sent_epoch_ms < first && missed(s) && slack_ms > 0.0)
                .map(|s| late(s, "a deadline missed", slack_ms))
                .collect(),
            stalls,
        );
        let opened_on_stalls = !ok.is_empty() && not.is_empty();
        let stalls_of: Vec<(f64, f64, String)> =
            ok.iter().flat_map(|e| e.stalls.iter().cloned()).collect();
        for s in group {
            let o =
                Offender::not_timing(what(s, "shed: the breaker open"), Some(s.obs.index), at(s));
            if opened_on_stalls {
                excused.push(Excused {
                    offender: o,
                    covered_ms: 0.0,
                    stalls: stalls_of.clone(),
                });
            } else {
                blamed.push(o);
            }
        }
    }
    (excused, blamed)
}

/// One version's figures from what the load saw, over answers that ended in `[from, to]`,
/// without `aside`.
fn figures(answers: &[&Seen], from: u64, to: u64, aside: &HashSet<u64>) -> Figures {
    let mut f = Figures::default();
    let mut latency = Histogram::default();
    for s in answers {
        let end = ended(s);
        if end < from as f64 || end > to as f64 || aside.contains(&s.obs.index) {
            continue;
        }
        f.answers += 1;
        f.degraded += u64::from(degraded(s));
        f.unavailable += u64::from(unavailable(s));
        latency.add(s.obs.latency_ms);
    }
    f.latency = latency;
    f
}

/// `ROLLOUT_VERDICT` when a good release was rolled back (see the module's doc).
#[allow(clippy::too_many_arguments)]
pub fn good_rolled_back(
    slo: &Slo,
    log_last: Option<&understudy_compiler::release::rollout::Logged>,
    seen: &[Seen],
    old: &str,
    new: &str,
    slack: Slack,
    start: u64,
    stalls: &Stalls,
) -> Judged {
    let Some(last) = log_last.filter(|l| matches!(l.judgement, Judgement::RollBack { .. })) else {
        return Judged::default();
    };
    let version = |s: &Seen, v: &str| s.obs.headers.policy_version.as_deref() == Some(v);
    let of = |v: &str| -> Vec<&Seen> {
        seen.iter()
            .filter(|s| counted(s) && version(s, v))
            .collect()
    };
    let (olds, news) = (of(old), of(new));
    let (from, to) = (last.evidence.from, last.evidence.to);
    let inside: Vec<&Seen> = news
        .iter()
        .copied()
        .filter(|s| (from as f64..=to as f64).contains(&ended(s)))
        .collect();
    let none = HashSet::new();
    let old_figures = figures(&olds, from, to, &none);
    let limit = old_figures.p95_ms().map(|p| p * (1.0 + slo.p95_margin));
    let (excused, blamed) = split(&inside, &news, limit, slack.new_ms, start, stalls);
    let aside = blame::excused_requests(&excused);
    let again = understudy_compiler::release::rollout::Evidence {
        from,
        to,
        old: old_figures,
        new: figures(&news, from, to, &aside),
    };
    let for_holding = matches!(&last.judgement, Judgement::RollBack { reasons }
        if reasons.iter().any(|r| r.starts_with("held ")));
    let holds_without = match judge(slo, &again) {
        Judgement::Advance { .. } => true,
        Judgement::Hold { .. } => !for_holding,
        Judgement::RollBack { .. } => false,
    };
    Judged {
        blamed,
        excused,
        holds_without,
    }
}

/// The old version's degraded share over the answers that ended in `[from, to]`, without
/// `aside`: (degraded, answers).
fn degraded_share(olds: &[&Seen], from: u64, to: u64, aside: &HashSet<u64>) -> (u64, u64) {
    let f = figures(olds, from, to, aside);
    (f.degraded, f.answers)
}

/// `ROLLOUT_BASELINE`: in every window the rollout judged, the old version's degraded share
/// is at most the SLO's degraded margin — a comparison at that margin needs a baseline that
/// answers live. Returns the worst window's share and the check judged: its offenders are
/// the old version's answers that were not live in the windows over the margin.
pub fn baseline(
    seen: &[Seen],
    old: &str,
    windows: &[(u64, u64)],
    margin: f64,
    slack: Slack,
    start: u64,
    stalls: &Stalls,
) -> (Option<(u64, u64)>, Judged) {
    let olds: Vec<&Seen> = seen
        .iter()
        .filter(|s| counted(s) && s.obs.headers.policy_version.as_deref() == Some(old))
        .collect();
    let none = HashSet::new();
    let over = |(k, n): (u64, u64)| n > 0 && k as f64 > margin * n as f64;
    let shares: Vec<(u64, u64)> = windows
        .iter()
        .map(|&(from, to)| degraded_share(&olds, from, to, &none))
        .collect();
    let worst = shares.iter().copied().max_by(|a, b| {
        (a.0 as f64 / a.1.max(1) as f64).total_cmp(&(b.0 as f64 / b.1.max(1) as f64))
    });
    let broken: Vec<(u64, u64)> = windows
        .iter()
        .zip(&shares)
        .filter(|(_, sh)| over(**sh))
        .map(|(w, _)| *w)
        .collect();
    if broken.is_empty() {
        return (
            worst,
            Judged {
                holds_without: true,
                ..Judged::default()
            },
        );
    }
    let inside: Vec<&Seen> = olds
        .iter()
        .copied()
        .filter(|s| {
            broken
                .iter()
                .any(|&(f, t)| (f as f64..=t as f64).contains(&ended(s)))
        })
        .collect();
    let (excused, blamed) = split(&inside, &olds, None, slack.old_ms, start, stalls);
    let aside = blame::excused_requests(&excused);
    let holds_without = broken
        .iter()
        .all(|&(from, to)| !over(degraded_share(&olds, from, to, &aside)));
    (
        worst,
        Judged {
            blamed,
            excused,
            holds_without,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::drill::observe::{Disclosed, Observed};
    use understudy_compiler::release::rollout::{Evidence, Logged};

    const OLD: &str = "r-old";
    const NEW: &str = "r-new";
    const SLACK: Slack = Slack {
        old_ms: 25.0,
        new_ms: 25.0,
    };

    /// Request `i` of `version`, sent at `at` ms, answered in `ms`; `reason`: degraded.
    fn seen(i: u64, version: &str, at: u64, ms: f64, reason: Option<&str>) -> Seen {
        Seen {
            sent_epoch_ms: at,
            obs: Observed {
                index: i,
                latency_ms: ms,
                status: 200,
                headers: Disclosed {
                    degraded: reason.map(|_| "true".into()),
                    reason: reason.map(Into::into),
                    source: Some(
                        if reason.is_some() {
                            "fallback"
                        } else {
                            "origin"
                        }
                        .into(),
                    ),
                    policy_version: Some(version.into()),
                    ..Disclosed::default()
                },
                ..Observed::default()
            },
        }
    }

    /// 1,000 old answers (22 ms) and 200 new ones over [0, 10 s); the new ones sent in
    /// [4000, 5500) take 90 ms.
    fn run() -> Vec<Seen> {
        (0..1_200u64)
            .map(|i| {
                if i < 1_000 {
                    seen(i, OLD, i * 10, 22.0, None)
                } else {
                    let at = (i - 1_000) * 50;
                    let slow = (4_000..5_500).contains(&at);
                    seen(i, NEW, at, if slow { 90.0 } else { 22.0 }, None)
                }
            })
            .collect()
    }

    fn rolled_back(reason: &str) -> Logged {
        Logged {
            step: 10,
            at: 10_100,
            evidence: Evidence {
                from: 0,
                to: 10_100,
                old: Figures::default(),
                new: Figures::default(),
            },
            judgement: Judgement::RollBack {
                reasons: vec![reason.into()],
            },
        }
    }

    fn slo() -> Slo {
        Slo {
            min_answers: 120,
            ..Slo::default()
        }
    }

    fn stopped(from: f64, to: f64) -> Stalls {
        Stalls::merge(vec![(from, to, "workerd stopped".into())])
    }

    #[test]
    fn a_good_release_rolled_back_on_answers_a_stall_slowed_is_inconclusive() {
        let seen = run();
        let last = rolled_back("worse — p95");
        let judge = |stalls: &Stalls| {
            good_rolled_back(&slo(), Some(&last), &seen, OLD, NEW, SLACK, 0, stalls)
        };
        // The new version's 30 slow answers of 200 are over the limit (15%: its p95 is
        // 90 ms): that is what rolled it back.
        let stalls = stopped(3_990.0, 5_580.0);
        let j = judge(&stalls);
        assert!(j.blamed.is_empty(), "{:?}", j.blamed);
        assert_eq!(j.excused.len(), 30);
        assert!(
            j.holds_without,
            "set aside, the new version's p95 is the old's"
        );
        // No stall: the same answers are blamed on the edge.
        let j = judge(&Stalls::NONE);
        assert_eq!(j.blamed.len(), 30);
        assert!(j.blamed[0].what.contains("over "), "{}", j.blamed[0].what);
        assert!(!j.holds_without);
        // A stall far shorter than the answers' lateness (68 ms over) excuses none.
        let j = judge(&stopped(4_000.0, 4_010.0));
        assert!(!j.holds_without);
        assert!(!j.blamed.is_empty());
    }

    #[test]
    fn a_rollback_for_holding_needs_the_judgement_to_advance_without_the_excused() {
        let mut seen = run();
        // Too few new answers to advance even without the slow ones.
        seen.retain(|s| {
            s.obs.headers.policy_version.as_deref() == Some(OLD) || s.obs.index < 1_140
        });
        let last = rolled_back("held 6 times at 10%: a rollout does not stay half-deployed");
        let j = good_rolled_back(
            &slo(),
            Some(&last),
            &seen,
            OLD,
            NEW,
            SLACK,
            0,
            &stopped(3_990.0, 5_580.0),
        );
        assert!(!j.excused.is_empty());
        assert!(
            !j.holds_without,
            "it would have held again: the rollback for holding stands"
        );
    }

    #[test]
    fn the_baseline_breaks_on_a_degraded_window_and_excuses_a_breaker_opened_on_stalled_misses() {
        let miss = FailureReason::MlTimeout.code();
        let shed = FailureReason::BreakerOpen.code();
        let mut seen = vec![
            seen(0, OLD, 100, 22.0, None),
            seen(1, OLD, 200, 46.0, Some(miss)),
            seen(2, OLD, 210, 46.0, Some(miss)),
            seen(3, OLD, 300, 1.0, Some(shed)),
            seen(4, OLD, 400, 1.0, Some(shed)),
        ];
        let window = [(0, 1_000)];
        let stalls = stopped(180.0, 260.0);
        let (worst, j) = baseline(&seen, OLD, &window, 0.05, SLACK, 0, &stalls);
        assert_eq!(worst, Some((4, 5)));
        assert!(j.blamed.is_empty(), "{:?}", j.blamed);
        assert_eq!(j.excused.len(), 4);
        assert!(j.holds_without);
        // No stall: the misses and the breaker's answers are the edge's.
        let (_, j) = baseline(&seen, OLD, &window, 0.05, SLACK, 0, &Stalls::NONE);
        assert_eq!(j.blamed.len(), 4);
        assert!(!j.holds_without);
        // A breaker open with no miss before it is never a stall's.
        seen.drain(1..3);
        let (_, j) = baseline(&seen, OLD, &window, 0.05, SLACK, 0, &stalls);
        assert_eq!(j.blamed.len(), 2);
        // A deadline missed by a release a healthy model cannot meet is the release's.
        let seen = vec![seen_miss()];
        let (_, j) = baseline(
            &seen,
            OLD,
            &window,
            0.05,
            Slack {
                old_ms: -12.0,
                new_ms: 0.0,
            },
            0,
            &stalls,
        );
        assert_eq!((j.blamed.len(), j.excused.len()), (1, 0));
    }

    #[test]
    fn a_few_stray_misses_under_the_margin_leave_the_baseline_whole() {
        // 2 misses in 100 answers, no stall: 2% is under a 5% margin.
        let seen: Vec<Seen> = (0..100u64)
            .map(|i| {
                seen(
                    i,
                    OLD,
                    i * 10,
                    if i < 2 { 46.0 } else { 22.0 },
                    (i < 2).then(|| FailureReason::MlTimeout.code()),
                )
            })
            .collect();
        let (worst, j) = baseline(&seen, OLD, &[(0, 2_000)], 0.05, SLACK, 0, &Stalls::NONE);
        assert_eq!(worst, Some((2, 100)));
        assert!(j.blamed.is_empty() && j.excused.is_empty() && j.holds_without);
    }

    fn seen_miss() -> Seen {
        seen(9, OLD, 200, 9.0, Some(FailureReason::MlTimeout.code()))
    }

    use understudy_core::classify::FailureReason;
}
