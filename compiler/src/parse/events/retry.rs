//! `[events.retry]`: how failed deliveries are retried — attempts, full-jitter backoff,
//! the window every attempt starts within, and the outcomes worth retrying. A permanent 4xx
//! listed as retryable is refused with a code of its own ([V-DELIVER]).

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator};
use toml_span::value::Value;
use toml_span::{DeserError, Deserialize};
use understudy_core::policy::events::RetrySchedule;

use super::Wait;
use crate::codes::Code;
use crate::parse::leaf::*;
use crate::parse::origin::Outcome;
use crate::parse::problem::{err, Problem};
use crate::parse::table::{Table, Unknown};

/// Most attempts one event may get.
pub const MAX_ATTEMPTS: u64 = 50;

/// A retryable delivery outcome. A permanent 4xx has a code of its own: retrying it cannot
/// succeed, it only delays the dead letter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventOutcome(pub Outcome);

/// `4xx` or a 4xx status other than the retryable 408 and 429.
fn permanent(s: &str) -> bool {
    Outcome::ALL.iter().all(|(w, _)| *w != s)
        && (s == "4xx"
            || (s.len() == 3 && s.starts_with('4') && s.bytes().all(|b| b.is_ascii_digit())))
}

impl<'de> Deserialize<'de> for EventOutcome {
    fn deserialize(v: &mut Value<'de>) -> Result<Self, DeserError> {
        if let Some(s) = v.as_str().filter(|s| permanent(s)) {
            return Err(err(
                Problem::new(
                    Code::EventsPermanentRetry,
                    format!("`{s}` is a permanent failure and cannot be retried"),
                    "permanent 4xx",
                    "remove it: a consumer's 4xx other than 408 and 429 refuses the event itself (schema or authentication) and is dead-lettered at once; fix the event or the credential, then replay it",
                ),
                v,
            ));
        }
        Word::<Outcome>::deserialize(v).map(|w| EventOutcome(w.0))
    }
}

impl JsonSchema for EventOutcome {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> Cow<'static, str> {
        Word::<Outcome>::schema_name()
    }
    fn json_schema(g: &mut SchemaGenerator) -> Schema {
        Word::<Outcome>::json_schema(g)
    }
}

/// `[events.retry]`: attempts, full-jitter backoff, the window they fit.
#[derive(Debug, Clone, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "EventRetry")]
pub struct RawRetry {
    /// Attempts including the first (default 8, 1..=50).
    pub attempts: Option<Spanned<Count<1, MAX_ATTEMPTS>>>,
    /// Full-jitter exponential backoff (default base 7s, max 5m).
    pub backoff: Option<Spanned<RawRetryBackoff>>,
    /// Every attempt starts within this of the first (default 15m).
    pub window: Option<Spanned<Wait>>,
    /// Retryable outcomes (default all five); a permanent 4xx is refused.
    pub retry_on: Option<Spanned<Vec<Spanned<EventOutcome>>>>,
    /// Wait at least the consumer's Retry-After (default true).
    pub honor_retry_after: Option<Spanned<Flag>>,
    #[serde(skip)]
    pub span: Span,
    #[serde(skip)]
    pub unknown: Unknown,
}

/// `[events.retry] backoff`.
#[derive(Debug, Clone, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "EventBackoff")]
pub struct RawRetryBackoff {
    /// First backoff ceiling (default 7s).
    pub base: Option<Spanned<Wait>>,
    /// Largest backoff ceiling (default 5m or base, at least base).
    pub max: Option<Spanned<Wait>>,
    #[serde(skip)]
    pub span: Span,
    #[serde(skip)]
    pub unknown: Unknown,
}

impl<'de> Deserialize<'de> for RawRetry {
    fn deserialize(v: &mut Value<'de>) -> Result<Self, DeserError> {
        let span = (v.span.start, v.span.end);
        let mut t = Table::new(v)?;
        let attempts = t.opt("attempts");
        let backoff = t.opt("backoff");
        let window = t.opt("window");
        let retry_on = t.opt("retry_on");
        let honor_retry_after = t.opt("honor_retry_after");
        let unknown = Unknown(t.finish()?);
        Ok(RawRetry {
            attempts,
            backoff,
            window,
            retry_on,
            honor_retry_after,
            span,
            unknown,
        })
    }
}

impl<'de> Deserialize<'de> for RawRetryBackoff {
    fn deserialize(v: &mut Value<'de>) -> Result<Self, DeserError> {
        let (base, max, span, unknown) = crate::parse::origin::backoff_parts(v)?;
        Ok(RawRetryBackoff {
            base,
            max,
            span,
            unknown,
        })
    }
}

/// Seed 004: 8 attempts, full jitter from 7 s doubling to at most 5 min, within 15 min,
/// on timeouts, connect errors, 408, 429 and 5xx, honouring `Retry-After`.
pub fn default_retry() -> RetrySchedule {
    RetrySchedule {
        attempts: 8,
        backoff_base_ms: 7_000,
        backoff_max_ms: 300_000,
        window_ms: 900_000,
        retry_on: Outcome::retry_on(Outcome::ALL.iter().map(|(_, o)| *o)),
        honor_retry_after: true,
    }
}

impl RawRetry {
    pub fn lower(&self) -> RetrySchedule {
        let d = default_retry();
        let backoff = self.backoff.as_ref().map(|b| &b.value);
        let base = backoff
            .and_then(|b| b.base)
            .map_or(d.backoff_base_ms, |b| b.value.0);
        let max = backoff
            .and_then(|b| b.max)
            .map_or(d.backoff_max_ms.max(base), |m| m.value.0);
        RetrySchedule {
            // At most MAX_ATTEMPTS.
            attempts: self.attempts.map_or(d.attempts, |a| a.value.0 as u32),
            backoff_base_ms: base,
            backoff_max_ms: max,
            window_ms: self.window.map_or(d.window_ms, |w| w.value.0),
            retry_on: match &self.retry_on {
                Some(list) => Outcome::retry_on(list.value.iter().map(|o| o.value.0)),
                None => d.retry_on,
            },
            honor_retry_after: self.honor_retry_after.is_none_or(|h| h.value.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permanent_4xx_are_told_apart_from_the_retryable_408_and_429() {
        for s in ["400", "401", "403", "422", "499", "4xx"] {
            assert!(permanent(s), "{s}");
        }
        for s in ["408", "429", "5xx", "timeout", "40", "4000", "4x9", "500"] {
            assert!(!permanent(s), "{s}");
        }
    }

    #[test]
    fn a_backoff_without_max_never_falls_below_its_base() {
        let mut v = toml_span::parse("backoff = { base = \"10m\" }").unwrap();
        let r = RawRetry::deserialize(&mut v).unwrap().lower();
        assert_eq!((r.backoff_base_ms, r.backoff_max_ms), (600_000, 600_000));
        let mut v = toml_span::parse("").unwrap();
        assert_eq!(
            RawRetry::deserialize(&mut v).unwrap().lower(),
            default_retry()
        );
    }
}
