//! `[rollout]`: how a release of this policy rolls out on Workers versions, and the SLO it is
//! held to against the version it replaces [R-GRADUAL] (docs/adr/012-rollout-on-workers-versions.md).
//! Every key is optional: absent ones keep `release::rollout::Slo::default()`, and the
//! command line's settings win over the table's.

use schemars::JsonSchema;
use toml_span::value::Value;
use toml_span::{DeserError, Deserialize};

use super::leaf::*;
use super::table::{Problems, Table, Unknown};
use crate::slo::range::{DWELL_MS, MAX_HOLDS, MIN_ANSWERS, STEP_PERCENT};
use crate::slo::Slo;

/// [R-GRADUAL] The rollout's steps, pace and SLO.
#[derive(Debug, Clone, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Rollout")]
pub struct RawRollout {
    /// The new version's share at each step, in percent: increasing, ending at 100
    /// (default [1, 10, 50, 100]).
    pub steps: Option<Spanned<NonEmpty<Count<{ STEP_PERCENT.0 }, { STEP_PERCENT.1 }>>>>,
    /// Least time at each step before a judgement (default 5m, 1s..=1d).
    pub dwell: Option<Spanned<Dur<{ DWELL_MS.0 }, { DWELL_MS.1 }>>>,
    /// Least answers from each version in a step's window before a judgement (default 1200).
    pub min_answers: Option<Spanned<Count<{ MIN_ANSWERS.0 }, { MIN_ANSWERS.1 }>>>,
    /// How much worse the new version's degraded share may be, absolute (default 0.02).
    pub degraded_margin: Option<Spanned<Ratio<true>>>,
    /// How much worse its no-tier 5xx share may be, absolute (default 0.005).
    pub unavailable_margin: Option<Spanned<Ratio<true>>>,
    /// How much slower its p95 may be, relative (default 0.2: 20%).
    pub p95_margin: Option<Spanned<Ratio<true>>>,
    /// Holds at one step before the rollout rolls back (default 6, 0..=1000).
    pub max_holds: Option<Spanned<Count<{ MAX_HOLDS.0 }, { MAX_HOLDS.1 }>>>,
    #[serde(skip)]
    pub span: Span,
    #[serde(skip)]
    pub unknown: Unknown,
}

impl<'de> Deserialize<'de> for RawRollout {
    fn deserialize(v: &mut Value<'de>) -> Result<Self, DeserError> {
        let span = (v.span.start, v.span.end);
        let mut t = Table::new(v)?;
        let steps = t.opt("steps");
        let dwell = t.opt("dwell");
        let min_answers = t.opt("min_answers");
        let degraded_margin = t.opt("degraded_margin");
        let unavailable_margin = t.opt("unavailable_margin");
        let p95_margin = t.opt("p95_margin");
        let max_holds = t.opt("max_holds");
        let unknown = Unknown(t.finish()?);
        Ok(RawRollout {
            steps,
            dwell,
            min_answers,
            degraded_margin,
            unavailable_margin,
            p95_margin,
            max_holds,
            span,
            unknown,
        })
    }
}

impl Problems for RawRollout {
    fn problems(&self, out: &mut Vec<toml_span::Error>) {
        self.unknown.problems(out);
    }
}

impl RawRollout {
    pub fn lower(&self) -> Slo {
        let d = Slo::default();
        Slo {
            steps: self.steps.as_ref().map_or(d.steps, |s| {
                s.value.0.iter().map(|c| c.0.min(100) as u8).collect()
            }),
            dwell_ms: self.dwell.map_or(d.dwell_ms, |x| x.value.0),
            min_answers: self.min_answers.map_or(d.min_answers, |x| x.value.0),
            degraded_margin: self
                .degraded_margin
                .map_or(d.degraded_margin, |x| x.value.0),
            unavailable_margin: self
                .unavailable_margin
                .map_or(d.unavailable_margin, |x| x.value.0),
            p95_margin: self.p95_margin.map_or(d.p95_margin, |x| x.value.0),
            max_holds: self.max_holds.map_or(d.max_holds, |x| x.value.0 as u32),
        }
    }
}
