//! [R-GUARD] What a rollout shows while it runs and when it ends (docs/rollout.md): one line
//! per change (a deployment, a judgement), a heartbeat at least every [`HEARTBEAT_MS`] with
//! the step, the answers against `min_answers`, the holds against `max_holds`, the next
//! judgement and the earliest end, and a summary at the end (duration, each judgement with
//! its evidence, how long the new release was exposed at each share). `releases status`
//! shows the same fields from the record. Pure formatting: the run loop and `status` print.

use super::record::RolloutRecord;
use super::{Figures, Judgement, Logged, Phase};
use crate::release::record::rfc3339;

/// The longest a running rollout stays silent.
pub const HEARTBEAT_MS: u64 = 30_000;

/// `2026-12-03T09:31:05Z`'s time of day: `09:31:05Z`.
pub fn clock(ms: u64) -> String {
    let t = rfc3339(ms);
    t.split_once('T')
        .map_or(t.clone(), |(_, time)| time.to_string())
}

/// A span as people say it: `45 s`, `5 min 2 s`, `2 h 3 min`.
pub fn span(ms: u64) -> String {
    let s = ms / 1000;
    if s < 60 {
        format!("{:.1} s", ms as f64 / 1000.0)
    } else if s < 3600 {
        format!("{} min {} s", s / 60, s % 60)
    } else {
        format!("{} h {} min", s / 3600, (s % 3600) / 60)
    }
}

/// `step 2 of 4 (10%)`.
pub fn step(rec: &RolloutRecord) -> String {
    let at = rec.slo.steps.get(rec.state.step).copied().unwrap_or(100);
    format!(
        "step {} of {} ({at}%)",
        rec.state.step + 1,
        rec.slo.steps.len()
    )
}

/// The earliest the rollout can end, if every judgement from now on advances.
pub fn earliest_end(rec: &RolloutRecord, now: u64) -> Option<u64> {
    let n = rec.slo.steps.len();
    // Steps still to judge after the current one (the last, 100%, is not judged).
    let after = n.saturating_sub(rec.state.step + 2) as u64;
    match rec.state.phase {
        Phase::Watching => Some(rec.state.due.unwrap_or(now).max(now) + after * rec.slo.dwell_ms),
        Phase::Deploying => Some(now + (after + 1) * rec.slo.dwell_ms),
        _ => None,
    }
}

/// What a heartbeat knows of the step's answers so far.
#[derive(Debug, Clone, Copy)]
pub enum Answers<'a> {
    /// The old version's and the new one's figures over the step's window so far.
    Read(&'a (Figures, Figures)),
    /// The controller asked and the figures could not be read.
    Unavailable,
    /// Not asked: `releases status` reads the record, never the figures.
    NotAsked,
}

/// The heartbeat: where the rollout stands at `now`, with the step's answers so far.
pub fn heartbeat(rec: &RolloutRecord, now: u64, answers: Answers<'_>) -> String {
    let mut line = format!("{}  {}, {}", clock(now), step(rec), rec.state.phase.word());
    if let Some(since) = rec.state.since {
        line.push_str(&format!(" for {}", span(now.saturating_sub(since))));
    }
    let min = rec.slo.min_answers;
    match answers {
        Answers::Read((old, new)) => line.push_str(&format!(
            "; answers old {} / new {} of {min} each",
            old.answers, new.answers
        )),
        Answers::Unavailable if rec.state.phase == Phase::Watching => line.push_str(&format!(
            "; answers unknown (figures unavailable), {min} each needed"
        )),
        Answers::NotAsked if rec.state.phase == Phase::Watching => line.push_str(&format!(
            "; {min} answers each needed (the controller reads them at each judgement)"
        )),
        Answers::Unavailable | Answers::NotAsked => {}
    }
    line.push_str(&format!(
        "; {} of {} holds",
        rec.state.holds, rec.slo.max_holds
    ));
    if let (Phase::Watching, Some(due)) = (rec.state.phase, rec.state.due) {
        line.push_str(&format!(
            "; next judgement {} (in {})",
            clock(due),
            span(due.saturating_sub(now))
        ));
    }
    if let Some(end) = earliest_end(rec, now) {
        line.push_str(&format!("; end at the earliest {}", clock(end)));
    }
    line
}

/// A verdict in an operator's words.
pub fn verdict(j: &Judgement) -> (&'static str, &[String]) {
    match j {
        Judgement::Advance { reasons } => ("advanced", reasons),
        Judgement::Hold { reasons } => ("holding", reasons),
        Judgement::RollBack { reasons } => ("rolled back", reasons),
    }
}

/// One judgement: when, at which share, the verdict and the answers it was made on.
pub fn judgement(l: &Logged, min_answers: u64) -> String {
    let (word, _) = verdict(&l.judgement);
    format!(
        "{}  at {}%: {word} (window {}: answers old {} / new {} of {min_answers} each)",
        clock(l.at),
        l.step,
        span(l.evidence.to.saturating_sub(l.evidence.from)),
        l.evidence.old.answers,
        l.evidence.new.answers
    )
}

/// How long the new release served each share, from the deployments the record keeps:
/// `10% for 8.0 s, 50% for 5.1 s`.
pub fn exposure(rec: &RolloutRecord, end: u64) -> String {
    let d = &rec.state.deployed;
    let parts: Vec<String> = d
        .iter()
        .enumerate()
        .filter(|(_, x)| x.new_percent > 0)
        .map(|(i, x)| match d.get(i + 1) {
            None if rec.state.phase == super::Phase::Done => {
                format!("{}% from {} on", x.new_percent, rfc3339(x.at))
            }
            next => {
                let until = next.map_or(end, |n| n.at);
                format!(
                    "{}% for {}",
                    x.new_percent,
                    span(until.saturating_sub(x.at))
                )
            }
        })
        .collect();
    if parts.is_empty() {
        "none".into()
    } else {
        parts.join(", ")
    }
}

/// The end: what happened, how long it took, each judgement, the exposure.
pub fn summary(rec: &RolloutRecord, now: u64) -> Vec<String> {
    let end = rec
        .state
        .deployed
        .last()
        .map_or(now, |d| d.at.max(rec.updated_at_ms));
    let mut out = vec![format!(
        "rollout of {} from {}: {} in {} (from {} to {})",
        rec.new,
        rec.old,
        rec.summary(),
        span(end.saturating_sub(rec.started_at_ms)),
        rfc3339(rec.started_at_ms),
        rfc3339(end)
    )];
    for l in &rec.state.log {
        out.push(format!("  {}", judgement(l, rec.slo.min_answers)));
        if !matches!(l.judgement, Judgement::Hold { .. }) {
            for r in verdict(&l.judgement).1 {
                out.push(format!("      {r}"));
            }
        }
    }
    out.push(format!(
        "  the new release {} served: {}",
        rec.new,
        exposure(rec, end)
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_and_clocks_read_as_people_write_them() {
        assert_eq!(span(8_030), "8.0 s");
        assert_eq!(span(302_000), "5 min 2 s");
        assert_eq!(span(7_380_000), "2 h 3 min");
        assert_eq!(clock(1_764_464_400_000), "01:00:00Z");
    }
}
