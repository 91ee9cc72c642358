//! [T-WITNESS] Verdicts that say why: a check that broke names the answers that broke it
//! (its offenders) and, for each, whether the edge is to blame or a stall of the host that
//! the witness saw ([`crate::witness`]) explains it.
//!
//! Why not replay a red run until it passes? Because a regression that fails only some of
//! the time then passes too, and a red that may be the host's is a red nobody reads. Jepsen's
//! checkers say why a history is invalid; this says which answers broke a promise and what
//! the host was doing meanwhile.
//!
//! The rule (docs/scenarios.md, "Verdicts that say why"):
//! - an offender has a span on the drill's clock (an answer's: from sending it to the last
//!   byte of its answer) and a lateness: how much later than its limit it came. An offender
//!   that is not a matter of time (an answer missing, undisclosed, empty, from the wrong
//!   source; a breaker that never moved) has none and is never excused;
//! - it is **excused** when the stalls the witness saw from [`DRAIN_MS`] before its span to
//!   its end cover at least [`MIN_COVER_MS`], and its lateness is at most what they cover
//!   plus [`MARGIN_MS`];
//! - a check that broke is judged again with its excused offenders set aside. If it still
//!   breaks, it **fails** and blames its offenders that no stall covers; if it holds then,
//!   it is **inconclusive**, and names the stalls that excused each.
//!
//! A run with a failed check is red; a run whose only broken checks are inconclusive is
//! neither red nor green (`drill` exits 3).

use serde::Serialize;

use crate::witness::Stalls;

use super::Verdict;

/// Stalls up to this long before an offender's span count for it: what queued during a
/// stall is handled after it ends.
pub const DRAIN_MS: f64 = 50.0;
/// The witness's resolution: a wake is read every 1 ms, a process every 4 ms.
pub const MARGIN_MS: f64 = 5.0;
/// At least this much of a stall must touch an offender's span (one late wake's threshold).
pub const MIN_COVER_MS: f64 = 2.0;
/// Most offenders listed per verdict (each list), the rest counted.
pub const LISTED: usize = 20;

/// An answer (or a move of the breaker) that broke a check.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Offender {
    /// What it is: `request 812 (HTTP 200, 93.1 ms)`, `the breaker's close`.
    pub what: String,
    /// The request's index, when it is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub index: Option<u64>,
    pub from_ms: f64,
    pub to_ms: f64,
    /// How much later than its limit it came; `None`: not a matter of time.
    pub late_ms: Option<f64>,
}

impl Offender {
    /// An answer over a limit of time: `late_ms` past it.
    pub fn late(
        what: impl Into<String>,
        index: Option<u64>,
        from_ms: f64,
        to_ms: f64,
        late_ms: f64,
    ) -> Offender {
        Offender {
            what: what.into(),
            index,
            from_ms,
            to_ms,
            late_ms: Some(late_ms.max(0.0)),
        }
    }

    /// Not a matter of time: never excused.
    pub fn not_timing(what: impl Into<String>, index: Option<u64>, at_ms: f64) -> Offender {
        Offender {
            what: what.into(),
            index,
            from_ms: at_ms,
            to_ms: at_ms,
            late_ms: None,
        }
    }
}

/// An offender a stall explains, with what covered it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Excused {
    #[serde(flatten)]
    pub offender: Offender,
    /// ms of stall within its span (and the drain before it).
    pub covered_ms: f64,
    /// The stalls: `[from_ms, to_ms]`, with what saw them.
    pub stalls: Vec<(f64, f64, String)>,
}

/// How a verdict came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Judgement {
    Held,
    /// Broken, and the edge is to blame.
    Failed,
    /// Broken only by answers that witnessed stalls explain.
    Inconclusive,
    NotChecked,
}

/// `Some(excuse)` when a stall covers `o` (the rule above).
pub fn excuse(o: &Offender, stalls: &Stalls) -> Option<Excused> {
    let late = o.late_ms?;
    let (from, to) = (o.from_ms - DRAIN_MS, o.to_ms.max(o.from_ms));
    let covered = stalls.covered(from, to);
    (covered >= MIN_COVER_MS && late <= covered + MARGIN_MS).then(|| Excused {
        offender: o.clone(),
        covered_ms: covered,
        stalls: stalls
            .overlapping(from, to)
            .map(|s| (s.from_ms, s.to_ms, s.seen_by.join(", ")))
            .collect(),
    })
}

/// Whether an answer's `X-Degraded-Reason` is a deadline missed: the model's answer did not
/// reach the isolate before its timer (`ML_TIMEOUT`), or the timer fired well after it was
/// due (`EDGE_OVERLOADED`). On a healthy model both are a matter of time.
pub fn missed_deadline(reason: Option<&str>) -> bool {
    use understudy_core::classify::FailureReason;
    [FailureReason::MlTimeout, FailureReason::EdgeOverloaded]
        .iter()
        .any(|r| reason == Some(r.code()))
}

/// The requests among `e` (their indices).
pub fn excused_requests(e: &[Excused]) -> std::collections::HashSet<u64> {
    e.iter().filter_map(|e| e.offender.index).collect()
}

/// The offenders of a broken check, split: (excused, not excused).
pub fn split(offenders: Vec<Offender>, stalls: &Stalls) -> (Vec<Excused>, Vec<Offender>) {
    let mut excused = Vec::new();
    let mut blamed = Vec::new();
    for o in offenders {
        match excuse(&o, stalls) {
            Some(e) => excused.push(e),
            None => blamed.push(o),
        }
    }
    (excused, blamed)
}

impl Verdict {
    /// Judges a broken verdict: `offenders` split by `stalls`, and `holds_without(excused)`
    /// — the check judged again with the excused offenders set aside. A verdict that held
    /// (or was not checked) is returned as it is.
    pub fn judged(
        mut self,
        offenders: Vec<Offender>,
        stalls: &Stalls,
        holds_without: impl FnOnce(&[Excused]) -> bool,
    ) -> Verdict {
        if self.ok != Some(false) {
            return self;
        }
        // An answer is one offender, whichever of the check's reasons named it first.
        let mut seen = std::collections::HashSet::new();
        let offenders: Vec<Offender> = offenders
            .into_iter()
            .filter(|o| o.index.is_none_or(|i| seen.insert(i)))
            .collect();
        let (excused, blamed) = split(offenders, stalls);
        let holds = !excused.is_empty() && holds_without(&excused);
        self.excused_count = excused.len();
        if holds {
            self.judgement = Judgement::Inconclusive;
            self.detail.push_str(&format!(
                "; inconclusive: {} {} that broke it {} covered by stalls of the host",
                excused.len(),
                if excused.len() == 1 {
                    "answer"
                } else {
                    "answers"
                },
                if excused.len() == 1 { "is" } else { "are" }
            ));
            if !blamed.is_empty() {
                self.detail.push_str(&format!(
                    ", and without them it holds ({} more within its tolerance)",
                    blamed.len()
                ));
            }
        } else {
            self.judgement = Judgement::Failed;
            self.blamed_count = blamed.len();
            if !excused.is_empty() {
                self.detail.push_str(&format!(
                    "; {} of its offenders covered by stalls, and it breaks without them",
                    excused.len()
                ));
            }
            self.blamed = blamed.into_iter().take(LISTED).collect();
        }
        self.excused = excused.into_iter().take(LISTED).collect();
        self
    }

    /// Judges a broken verdict that holds only when every offender is excused.
    pub fn judged_all(self, offenders: Vec<Offender>, stalls: &Stalls) -> Verdict {
        let n = offenders
            .iter()
            .filter(|o| excuse(o, stalls).is_none())
            .count();
        self.judged(offenders, stalls, |_| n == 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stalls() -> Stalls {
        Stalls::merge(vec![(1000.0, 1150.0, "workerd stopped".into())])
    }

    #[test]
    fn an_answer_inside_a_stall_no_later_than_it_is_excused() {
        let s = stalls();
        let inside = Offender::late("request 1", Some(1), 1010.0, 1180.0, 120.0);
        let e = excuse(&inside, &s).expect("excused");
        assert_eq!(e.covered_ms, 150.0);
        // Later past its limit than the stall lasted: the edge added the rest.
        let too_late = Offender::late("request 2", Some(2), 1010.0, 1400.0, 300.0);
        assert!(excuse(&too_late, &s).is_none());
        // Sent 40 ms after the stall ended: its queue is still draining (the last 10 ms of
        // the stall count, and the margin).
        let after = Offender::late("request 3", Some(3), 1190.0, 1260.0, 12.0);
        assert!(excuse(&after, &s).is_some());
        // Sent 60 ms after: no.
        let later = Offender::late("request 4", Some(4), 1210.0, 1280.0, 20.0);
        assert!(excuse(&later, &s).is_none());
        // Not a matter of time: never.
        let missing = Offender::not_timing("request 5: no answer", Some(5), 1050.0);
        assert!(excuse(&missing, &s).is_none());
    }

    #[test]
    fn a_small_lateness_still_needs_a_stall_that_touches_it() {
        let s = stalls();
        let lone = Offender::late("request 9", Some(9), 5000.0, 5070.0, 1.0);
        assert!(excuse(&lone, &s).is_none(), "no stall near it");
    }

    fn broken() -> Verdict {
        Verdict::new("LATENCY_BUDGET", false, "p99 over")
    }

    #[test]
    fn a_check_that_holds_without_its_excused_answers_is_inconclusive() {
        let s = stalls();
        let offenders = vec![
            Offender::late("request 1", Some(1), 1010.0, 1100.0, 30.0),
            Offender::late("request 2", Some(2), 1020.0, 1110.0, 30.0),
        ];
        let v = broken().judged(offenders, &s, |e| e.len() == 2);
        assert_eq!(v.judgement, Judgement::Inconclusive);
        assert_eq!(v.excused.len(), 2);
        assert!(v.blamed.is_empty());
        assert!(!v.broken() && v.inconclusive());
    }

    #[test]
    fn one_answer_no_stall_covers_fails_the_check_and_is_named() {
        let s = stalls();
        let offenders = vec![
            Offender::late("request 1", Some(1), 1010.0, 1100.0, 30.0),
            Offender::late("request 7", Some(7), 3000.0, 3090.0, 30.0),
        ];
        let v = broken().judged_all(offenders, &s);
        assert_eq!(v.judgement, Judgement::Failed);
        assert_eq!(v.blamed.len(), 1);
        assert_eq!(v.blamed[0].index, Some(7));
        assert_eq!(v.excused.len(), 1);
        assert!(v.broken());
    }

    #[test]
    fn a_broken_check_with_nothing_excused_fails() {
        let v = broken().judged(Vec::new(), &stalls(), |_| true);
        assert_eq!(v.judgement, Judgement::Failed);
    }

    #[test]
    fn a_check_that_held_is_left_alone() {
        let v = Verdict::new("X", true, "fine").judged(Vec::new(), &stalls(), |_| false);
        assert_eq!(v.judgement, Judgement::Held);
    }
}
