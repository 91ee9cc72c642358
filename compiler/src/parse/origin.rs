//! `[budget]` and `[origin]`: the time allowed and the model call [P-BUDGET] [P-ORIGIN].

use schemars::JsonSchema;
use std::borrow::Cow;
use toml_span::value::Value;
use toml_span::{DeserError, Deserialize};

use schemars::{json_schema, Schema, SchemaGenerator};
use toml_span::value::ValueInner;
use understudy_core::policy::{Budget, ClientErrors, Hedge, Method, Origin, RetryOn};

use super::duration;
use super::problem::Problem;
use crate::codes::Code;

use super::leaf::*;
use super::route::bug;
use super::table::{Problems, Table, Unknown};

/// The longest any single timed step (a budget, a deadline, a timeout) may be: Understudy
/// guards interactive requests, and past a minute the client has given up.
pub const MINUTE: u64 = 60_000;
pub const HOUR: u64 = 3_600_000;
pub const DAY: u64 = 86_400_000;

/// [P-BUDGET] Time allowed.
#[derive(Debug, Clone, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Budget")]
pub struct RawBudget {
    /// Total budget for the answer: the race and every fallback tier (1ms..=1m).
    pub total: Spanned<Dur<1, MINUTE>>,
    /// Origin race deadline: headers and body (1ms..=1m).
    pub deadline: Spanned<Dur<1, MINUTE>>,
    /// Minimum room kept per timed step after the deadline (default 1ms, 1ms..=1s).
    pub slack: Option<Spanned<Dur<1, 1_000>>>,
    #[serde(skip)]
    pub span: Span,
    #[serde(skip)]
    pub unknown: Unknown,
}

/// `budget.slack` when the policy does not say: Workers' clock has millisecond resolution
/// and a timer fires at its time or later, so each timed step may end a millisecond late.
pub const DEFAULT_SLACK_MS: u64 = 1;

impl<'de> Deserialize<'de> for RawBudget {
    fn deserialize(v: &mut Value<'de>) -> Result<Self, DeserError> {
        let span = (v.span.start, v.span.end);
        let mut t = Table::new(v)?;
        let total = t.req("total");
        let deadline = t.req("deadline");
        let slack = t.opt("slack");
        let unknown = Unknown(t.finish()?);
        Ok(RawBudget {
            total: total.ok_or_else(bug)?,
            deadline: deadline.ok_or_else(bug)?,
            slack,
            span,
            unknown,
        })
    }
}

impl Problems for RawBudget {
    fn problems(&self, out: &mut Vec<toml_span::Error>) {
        self.unknown.problems(out);
    }
}

impl RawBudget {
    pub fn lower(&self) -> Budget {
        Budget {
            total_ms: self.total.value.0,
            deadline_ms: self.deadline.value.0,
        }
    }

    pub fn slack_ms(&self) -> u64 {
        self.slack.map_or(DEFAULT_SLACK_MS, |s| s.value.0)
    }
}

impl Words for ClientErrors {
    const NAME: &'static str = "ClientErrors";
    const ALL: &'static [(&'static str, ClientErrors)] = ClientErrors::ALL;
}

understudy_core::words! {
    /// A retryable origin outcome.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Outcome {
        Timeout = "timeout",
        Connect = "connect",
        S408 = "408",
        S429 = "429",
        S5xx = "5xx",
    }
}

impl Outcome {
    /// The listed outcomes as the edge's retry table.
    pub fn retry_on(list: impl IntoIterator<Item = Outcome>) -> RetryOn {
        let mut r = RetryOn::none();
        for o in list {
            match o {
                Outcome::Timeout => r.timeout = true,
                Outcome::Connect => r.connect = true,
                Outcome::S408 => r.status_408 = true,
                Outcome::S429 => r.status_429 = true,
                Outcome::S5xx => r.status_5xx = true,
            }
        }
        r
    }
}

impl Words for Outcome {
    const NAME: &'static str = "RetryOutcome";
    const ALL: &'static [(&'static str, Outcome)] = Outcome::ALL;
}

/// Full-jitter exponential backoff.
#[derive(Debug, Clone, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Backoff")]
pub struct RawBackoff {
    /// First backoff ceiling (default 10ms, 1ms..=1m).
    pub base: Option<Spanned<Dur<1, MINUTE>>>,
    /// Largest backoff ceiling (default 8 × base, 1ms..=1m, at least `base`).
    pub max: Option<Spanned<Dur<1, MINUTE>>>,
    #[serde(skip)]
    pub span: Span,
    #[serde(skip)]
    pub unknown: Unknown,
}

/// A backoff table's `base` and `max` (each a `D`), its span and the keys it does not know:
/// the origin's `[origin.backoff]` and the events' `[events.retry] backoff` read alike.
pub(crate) type BackoffParts<D> = (Option<Spanned<D>>, Option<Spanned<D>>, Span, Unknown);

pub(crate) fn backoff_parts<'de, D: Deserialize<'de>>(
    v: &mut Value<'de>,
) -> Result<BackoffParts<D>, DeserError> {
    let span = (v.span.start, v.span.end);
    let mut t = Table::new(v)?;
    let base = t.opt("base");
    let max = t.opt("max");
    Ok((base, max, span, Unknown(t.finish()?)))
}

impl<'de> Deserialize<'de> for RawBackoff {
    fn deserialize(v: &mut Value<'de>) -> Result<Self, DeserError> {
        let (base, max, span, unknown) = backoff_parts(v)?;
        Ok(RawBackoff {
            base,
            max,
            span,
            unknown,
        })
    }
}

/// [P-ORIGIN] The model call.
#[derive(Debug, Clone, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Origin")]
pub struct RawOrigin {
    /// Origin URL (http or https).
    pub url: Spanned<Url>,
    /// Method used to call the origin (default POST).
    pub method: Option<Spanned<Word<Method>>>,
    /// The call may be repeated without a side effect (default: by method).
    pub idempotent: Option<Spanned<Flag>>,
    /// Per-attempt timeout (1ms..=1m).
    pub attempt_timeout: Spanned<Dur<1, MINUTE>>,
    /// Connect timeout: Workers cannot enforce one (a warning says so).
    pub connect_timeout: Option<Spanned<Dur<1, MINUTE>>>,
    /// Attempts including the first (default 1, at most 10).
    pub attempts: Option<Spanned<Count<1, 10>>>,
    /// Full-jitter exponential backoff between attempts.
    pub backoff: Option<Spanned<RawBackoff>>,
    /// Retryable outcomes (default all five).
    pub retry_on: Option<Spanned<Vec<Spanned<Word<Outcome>>>>>,
    /// Honour Retry-After when it fits the budget (default true).
    pub honor_retry_after: Option<Spanned<Flag>>,
    /// Header carrying the idempotency key.
    pub idempotency_key_header: Option<Spanned<Token>>,
    /// Secret binding holding the origin credential.
    pub credential_secret: Option<Spanned<Binding>>,
    /// Header the credential goes in (default Authorization).
    pub credential_header: Option<Spanned<Token>>,
    /// Dotted path of the result list in the origin's JSON (default items).
    pub result_path: Option<Spanned<JsonPath>>,
    /// Largest origin body accepted, in bytes (default 1 MiB, at most 64 MiB).
    pub max_body_bytes: Option<Spanned<Count<1, { 64 << 20 }>>>,
    /// What the caller gets when the origin refuses its request with a 4xx other than
    /// 401/403/408/429 (default pass_through).
    pub client_errors: Option<Spanned<Word<ClientErrors>>>,
    /// The bulkhead: most origin calls an isolate has in flight at once (default no cap).
    pub max_in_flight: Option<Spanned<Count<1, 100_000>>>,
    /// Hedged requests: a second, identical request after the observed p95.
    pub hedge: Option<Spanned<RawHedge>>,
    #[serde(skip)]
    pub span: Span,
    #[serde(skip)]
    pub unknown: Unknown,
}

impl<'de> Deserialize<'de> for RawOrigin {
    fn deserialize(v: &mut Value<'de>) -> Result<Self, DeserError> {
        let span = (v.span.start, v.span.end);
        let mut t = Table::new(v)?;
        let url = t.req("url");
        let method = t.opt("method");
        let idempotent = t.opt("idempotent");
        let attempt_timeout = t.req("attempt_timeout");
        let connect_timeout = t.opt("connect_timeout");
        let attempts = t.opt("attempts");
        let backoff = t.opt("backoff");
        let retry_on = t.opt("retry_on");
        let honor_retry_after = t.opt("honor_retry_after");
        let idempotency_key_header = t.opt("idempotency_key_header");
        let credential_secret = t.opt("credential_secret");
        let credential_header = t.opt("credential_header");
        let result_path = t.opt("result_path");
        let max_body_bytes = t.opt("max_body_bytes");
        let client_errors = t.opt("client_errors");
        let max_in_flight = t.opt("max_in_flight");
        let hedge = t.opt("hedge");
        let unknown = Unknown(t.finish()?);
        Ok(RawOrigin {
            url: url.ok_or_else(bug)?,
            method,
            idempotent,
            attempt_timeout: attempt_timeout.ok_or_else(bug)?,
            connect_timeout,
            attempts,
            backoff,
            retry_on,
            honor_retry_after,
            idempotency_key_header,
            credential_secret,
            credential_header,
            result_path,
            max_body_bytes,
            client_errors,
            max_in_flight,
            hedge,
            span,
            unknown,
        })
    }
}

impl Problems for RawOrigin {
    fn problems(&self, out: &mut Vec<toml_span::Error>) {
        self.unknown.problems(out);
        if let Some(b) = &self.backoff {
            b.value.unknown.problems(out);
        }
        if let Some(h) = &self.hedge {
            h.value.unknown.problems(out);
        }
    }
}

/// `backoff.base` when the policy does not say.
pub const DEFAULT_BACKOFF_BASE_MS: u64 = 10;

/// A dotted result path as its segments.
pub fn result_path(p: Option<&Spanned<JsonPath>>) -> Vec<String> {
    p.map(|p| p.value.as_str())
        .unwrap_or("items")
        .split('.')
        .map(str::to_string)
        .collect()
}

impl RawOrigin {
    pub fn backoff_ms(&self) -> (u64, u64) {
        let b = self.backoff.as_ref().map(|b| &b.value);
        let base = b
            .and_then(|b| b.base)
            .map_or(DEFAULT_BACKOFF_BASE_MS, |s| s.value.0);
        let max = b
            .and_then(|b| b.max)
            .map_or(base.saturating_mul(8).min(MINUTE), |s| s.value.0);
        (base, max)
    }

    pub fn lower(&self) -> Origin {
        let (backoff_base_ms, backoff_max_ms) = self.backoff_ms();
        let retry_on = match &self.retry_on {
            Some(list) => Outcome::retry_on(list.value.iter().map(|w| w.value.0)),
            None => Outcome::retry_on(Outcome::ALL.iter().map(|(_, o)| *o)),
        };
        let method = self.method.map_or(Method::Post, |m| m.value.0);
        Origin {
            url: self.url.value.0.clone(),
            method,
            idempotent: self
                .idempotent
                .map_or(method.is_idempotent(), |i| i.value.0),
            attempt_timeout_ms: self.attempt_timeout.value.0,
            connect_timeout_ms: self.connect_timeout.map(|c| c.value.0),
            attempts: self.attempts.map_or(1, |a| a.value.0 as u32),
            backoff_base_ms,
            backoff_max_ms,
            retry_on,
            honor_retry_after: self.honor_retry_after.is_none_or(|h| h.value.0),
            idempotency_key_header: self
                .idempotency_key_header
                .as_ref()
                .map(|h| h.value.0.clone()),
            credential_secret: self.credential_secret.as_ref().map(|s| s.value.0.clone()),
            credential_header: self
                .credential_header
                .as_ref()
                .map_or_else(|| "Authorization".to_string(), |h| h.value.0.clone()),
            result_path: result_path(self.result_path.as_ref()),
            max_body_bytes: self.max_body_bytes.map_or(1 << 20, |m| m.value.0),
            client_errors: self
                .client_errors
                .map_or(ClientErrors::PassThrough, |c| c.value.0),
            max_in_flight: self.max_in_flight.map(|m| m.value.0 as u32),
            hedge: self.hedge.as_ref().map(|h| h.value.lower()),
        }
    }
}

/// When to hedge: `"p95"` (the isolate's observed p95) or a fixed delay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HedgeAfter(pub Option<u64>);

/// The fixed hedge delays allowed: 1ms..=1m.
const HEDGE_AFTER: (u64, u64) = (1, MINUTE);

impl<'de> Deserialize<'de> for HedgeAfter {
    fn deserialize(v: &mut Value<'de>) -> Result<Self, DeserError> {
        let problem = |msg: String| {
            Problem::new(
                Code::OutOfRange,
                msg,
                "not a hedge delay",
                "write after = \"p95\" (the origin's observed p95) or a duration such as \"30ms\"",
            )
        };
        let span = v.span;
        match v.take() {
            ValueInner::String(s) if s == "p95" => Ok(HedgeAfter(None)),
            ValueInner::String(s) => match duration::parse(&s) {
                Ok(ms) if (HEDGE_AFTER.0..=HEDGE_AFTER.1).contains(&ms) => Ok(HedgeAfter(Some(ms))),
                Ok(_) => Err(problem(format!(
                    "`{{key}}` is {s}, outside its valid range 1ms..=1m"
                ))
                .at(span)
                .into()),
                Err(e) => Err(Problem::new(
                    Code::BadDuration,
                    format!("`{{key}}` is neither \"p95\" nor a duration: {e}"),
                    "not a hedge delay",
                    "write after = \"p95\" or a duration such as \"30ms\"",
                )
                .at(span)
                .into()),
            },
            other => {
                v.set(other);
                let found = v.take();
                Err(Problem::new(
                    Code::WrongType,
                    format!(
                        "`{{key}}` must be \"p95\" or a duration string, found a {}",
                        found.type_str()
                    ),
                    "expected a string",
                    "write after = \"p95\" or a duration such as \"30ms\"",
                )
                .at(span)
                .into())
            }
        }
    }
}

impl JsonSchema for HedgeAfter {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> Cow<'static, str> {
        "HedgeAfter".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "anyOf": [{"const": "p95"}, {"pattern": duration::pattern(HEDGE_AFTER.0, HEDGE_AFTER.1)}],
        })
    }
}

/// `[origin.hedge]`: when to send a second request, and how many.
#[derive(Debug, Clone, JsonSchema)]
#[schemars(rename = "Hedge")]
#[serde(deny_unknown_fields)]
pub struct RawHedge {
    /// "p95" (default: the isolate's observed p95) or a delay shorter than attempt_timeout.
    pub after: Option<Spanned<HedgeAfter>>,
    /// Hedges per origin call, the token bucket's refill (default 0.05; above 0, up to 0.5).
    pub max_share: Option<Spanned<Ratio<false, 500>>>,
    /// Most hedges in a burst (default 10, 1..=1000).
    pub burst: Option<Spanned<Count<1, 1000>>>,
    /// Successful calls observed before their p95 is trusted (default 20, 1..=100000).
    pub min_calls: Option<Spanned<Count<1, 100_000>>>,
    #[serde(skip)]
    pub span: Span,
    #[serde(skip)]
    pub unknown: Unknown,
}

impl<'de> Deserialize<'de> for RawHedge {
    fn deserialize(v: &mut Value<'de>) -> Result<Self, DeserError> {
        let span = (v.span.start, v.span.end);
        let mut t = Table::new(v)?;
        let after = t.opt("after");
        let max_share = t.opt("max_share");
        let burst = t.opt("burst");
        let min_calls = t.opt("min_calls");
        let unknown = Unknown(t.finish()?);
        Ok(RawHedge {
            after,
            max_share,
            burst,
            min_calls,
            span,
            unknown,
        })
    }
}

impl RawHedge {
    pub fn lower(&self) -> Hedge {
        Hedge {
            after_ms: self.after.and_then(|a| a.value.0),
            max_share: self.max_share.map_or(0.05, |m| m.value.0),
            burst: self.burst.map_or(10, |b| b.value.0 as u32),
            min_calls: self.min_calls.map_or(20, |m| m.value.0 as u32),
        }
    }
}

/// The host of an http(s) URL, lower-cased.
pub fn host_of(url: &str) -> Option<String> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let host = authority.rsplit('@').next()?;
    let host = if host.starts_with('[') {
        host.split(']').next().map(|h| format!("{h}]"))?
    } else {
        host.split(':').next()?.to_string()
    };
    if host.is_empty() {
        None
    } else {
        Some(host.to_ascii_lowercase())
    }
}
