//! From toml-span's errors to diagnostics.
//!
//! The typed policy types report through toml-span's own error type so that its
//! `TableHelper` collects them with the rest. A problem of ours travels as an
//! `ErrorKind::Custom` whose text packs the code, message, label and help; this module packs
//! and unpacks it, and turns every error — ours and toml-span's (unknown keys, missing keys,
//! wrong types, duplicate keys) — into a [`Diagnostic`] whose message names the key path.
//! Messages say `{key}` where the path goes: a value does not know where it sits, the
//! [`Index`] does.

use std::borrow::Cow;
use std::path::Path;

use toml_span::value::{Value, ValueInner};
use toml_span::{DeserError, Error, ErrorKind};

use super::index::Index;
use crate::codes::Code;
use crate::diag::{Diagnostic, Span};

/// The placeholder for the key path in messages.
pub const KEY: &str = "{key}";
/// The placeholder for what a zero does to the key's mechanism.
pub const OFF: &str = "{off}";

/// What a zero (or an empty value) does to the mechanism a key controls, by key path.
fn switched_off(key: &str) -> &'static str {
    let leaf = key.rsplit('.').next().unwrap_or(key);
    if key.starts_with("events.") {
        return events_off(leaf);
    }
    if key.starts_with("rollout.") {
        return crate::slo::switched_off(leaf);
    }
    match leaf {
        "total" | "deadline" => "no request could be answered in time",
        "attempt_timeout" | "read_timeout" | "timeout" | "slow_call_p95" | "probe_p95" => {
            "every call would time out at once"
        }
        "connect_timeout" => "every connection would time out at once",
        "attempts" => "the origin would never be called",
        "base" | "max" => "retries would come back to back",
        "failures" => "the breaker would open on no failure",
        "cooldown" | "hold_down" | "failed_probe_hold" => {
            "the breaker would call a failing model again at once"
        }
        "window" => "no failure ratio could be measured",
        "failure_ratio" => "the breaker would open on success",
        "min_calls" | "probe_min_calls" => "the breaker would judge on no calls",
        "probe_fraction" => "no probe would ever be sent, so the breaker would never close",
        "probe_success_ratio" => "any probe would promote a failing model",
        "max_len" => "every value would be refused",
        "max_body_bytes" => "every origin answer would be refused",
        "limit" => "every answer from the tier would be empty",
        "max_staleness" => "every entry would be a miss",
        "refresh" => {
            "every live answer would be written again (KV takes one write per key per second)"
        }
        "retry_after" => "clients would retry at once (seed 000's retry storm)",
        "max_age" => "no stub would ever count as validated",
        "expected_rps" => "no traffic is declared",
        _ => "it switches its mechanism off",
    }
}

/// The same for the keys of `[events]`, whose mechanisms are the outbox's.
fn events_off(leaf: &str) -> &'static str {
    match leaf {
        "max_body_bytes" => "every event would be refused",
        "shards" => "no shard would hold an event",
        "version" => "schema versions start at 1",
        "retention" => "a delivered event's payload would be erased at once",
        "attempt_timeout" => "every delivery would time out at once",
        "concurrency" | "attempts" => "no event would ever be delivered",
        "base" | "max" => "retries would come back to back",
        "window" => "no retry would fit, every failure would be dead-lettered at once",
        "oldest_pending" => "every pending event would raise the alert",
        "gap" => "every event that waits for its predecessor would be reported at once",
        _ => "it switches its mechanism off",
    }
}

const SEP: char = '\u{1f}';

/// A problem found while reading a value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub code: Code,
    pub message: String,
    pub label: String,
    pub help: String,
}

impl Problem {
    pub fn new(
        code: Code,
        message: impl Into<String>,
        label: impl Into<String>,
        help: impl Into<String>,
    ) -> Problem {
        Problem {
            code,
            message: message.into(),
            label: label.into(),
            help: help.into(),
        }
    }

    /// As a toml-span error at `span`.
    pub fn at(self, span: toml_span::Span) -> Error {
        let packed =
            [self.code.as_str(), &self.message, &self.label, &self.help].join(&SEP.to_string());
        Error {
            kind: ErrorKind::Custom(Cow::Owned(packed)),
            span,
            line_info: None,
        }
    }

    fn unpack(s: &str) -> Option<Problem> {
        let mut parts = s.split(SEP);
        let code = Code::find(parts.next()?)?;
        Some(Problem {
            code,
            message: parts.next()?.to_string(),
            label: parts.next()?.to_string(),
            help: parts.next()?.to_string(),
        })
    }
}

/// `problem` at value `v`, as the error a `Deserialize` returns.
pub fn err(problem: Problem, v: &Value<'_>) -> DeserError {
    problem.at(v.span).into()
}

/// A `WrongType` problem at `v`: it should have been `expected`.
pub fn wrong(expected: &str, found: &ValueInner<'_>, v: &Value<'_>) -> DeserError {
    let found = match found {
        ValueInner::String(_) => "a string",
        ValueInner::Integer(_) => "an integer",
        ValueInner::Float(_) => "a float",
        ValueInner::Boolean(_) => "a boolean",
        ValueInner::Array(_) => "an array",
        ValueInner::Table(_) => "a table",
    };
    err(
        Problem::new(
            Code::WrongType,
            format!("`{{key}}` must be {expected}, found {found}"),
            format!("expected {expected}"),
            format!("change the value of `{{key}}` to {expected}"),
        ),
        v,
    )
}

fn span(s: toml_span::Span) -> Span {
    (s.start, s.end.max(s.start))
}

fn where_(table: &str) -> String {
    if table.is_empty() {
        "at the top level".into()
    } else {
        format!("in `[{table}]`")
    }
}

/// The diagnostics of one toml-span error (an unknown-keys error gives one per key).
pub fn diagnostics(err: &Error, file: &Path, index: &Index) -> Vec<Diagnostic> {
    let at = span(err.span);
    let key = index.path_of(at).unwrap_or_default();
    let d = |code: Code, message: String| Diagnostic::new(code, file, message);
    let one = match &err.kind {
        ErrorKind::Custom(text) => match Problem::unpack(text) {
            Some(p) => d(
                p.code,
                p.message
                    .replace(KEY, &key)
                    .replace(OFF, switched_off(&key)),
            )
            .at(at, p.label.replace(KEY, &key))
            .help(p.help.replace(KEY, &key)),
            None => d(Code::InvalidValue, format!("`{key}`: {text}"))
                .at(at, "here")
                .help("see docs/policy.md for what this key accepts"),
        },
        ErrorKind::UnexpectedKeys { keys, expected } => {
            let table = index.path_of(at).unwrap_or_default();
            let mut expected: Vec<&str> = expected.iter().map(String::as_str).collect();
            expected.sort_unstable();
            expected.dedup();
            let list = expected
                .iter()
                .map(|k| format!("`{k}`"))
                .collect::<Vec<_>>()
                .join(", ");
            return keys
                .iter()
                .map(|(name, key_span)| {
                    let fix = match closest(name, &expected) {
                        Some(s) => format!("did you mean `{s}`? Expected keys: {list}"),
                        None => format!("remove it; expected keys: {list}"),
                    };
                    d(
                        Code::UnknownKey,
                        format!("unknown key `{name}` {}", where_(&table)),
                    )
                    .at(span(*key_span), "not a key of this table")
                    .help(fix)
                })
                .collect();
        }
        ErrorKind::MissingField(name) => {
            let table = index.path_of(at).unwrap_or_default();
            let message = if table.is_empty() {
                format!("the policy has no `[{name}]` table")
            } else {
                format!("`[{table}]` is missing the required key `{name}`")
            };
            let at = if table.is_empty() { (0, 0) } else { at };
            let help = match example(&table, name) {
                Some(e) if table.is_empty() => format!("add a `[{name}]` table, e.g. {e}"),
                Some(e) if e.starts_with("`[") => format!("add {e}; docs/policy.md lists its keys"),
                Some(e) => format!("add `{name} = {e}`"),
                None => format!("add `{name}`; docs/policy.md gives its meaning"),
            };
            d(Code::MissingKey, message)
                .at(at, format!("`{name}` is required here"))
                .help(help)
        }
        ErrorKind::Wanted { expected, found } => d(
            Code::WrongType,
            format!("`{key}` must be {expected}, found {}", article(found)),
        )
        .at(at, format!("expected {expected}"))
        .help(format!("change the value of `{key}` to {expected}")),
        ErrorKind::DuplicateKey { key: dup, first } => d(
            Code::TomlSyntax,
            format!("the policy is not valid TOML: the key `{dup}` is defined twice"),
        )
        .at(at, "defined again here")
        .also(span(*first), "first defined here")
        .help("keep one definition of the key"),
        ErrorKind::DuplicateTable { name, first } => d(
            Code::TomlSyntax,
            format!("the policy is not valid TOML: the table `[{name}]` is defined twice"),
        )
        .at(at, "defined again here")
        .also(span(*first), "first defined here")
        .help("merge the two tables into one"),
        ErrorKind::OutOfRange(ty) => d(Code::OutOfRange, format!("`{key}` does not fit a {ty}"))
            .at(at, "out of range")
            .help("see docs/policy.md for the key's valid range"),
        other => d(
            Code::TomlSyntax,
            format!("the policy is not valid TOML: {}", syntax(other)),
        )
        .at(at, "TOML parsing stopped here")
        .help("fix the TOML syntax at this point; see https://toml.io for the format"),
    };
    vec![one]
}

/// An example value for a required key of `table`, for "add `key = …`".
fn example(table: &str, key: &str) -> Option<&'static str> {
    if table == "events" || table.starts_with("events.") {
        return Some(match key {
            "route" => "\"/v1/events\"",
            "encryption_key_secret" => "\"EVENTS_KEY\"",
            "delivery" => "`[events.delivery]` with its `url`",
            "url" => "\"https://orders.internal.example/v1/events\"",
            "name" => "\"order.placed\"",
            "version" => "2",
            _ => return None,
        });
    }
    Some(match key {
        "name" => "\"recommendation-service\"",
        "route" => "\"/v1/recommendations\"",
        "source" => "\"query\"",
        "secret" => "\"TOKEN_HMAC_KEY\"",
        "issuer" => "\"https://auth.example\"",
        "audience" => "\"recommendations\"",
        "total" => "\"60ms\"",
        "deadline" => "\"45ms\"",
        "url" => "\"https://model.example/v1/score\"",
        "attempt_timeout" => "\"45ms\"",
        "mode" => "\"rate\"",
        "failures" => "3",
        "cooldown" | "window" | "hold_down" => "\"30s\"",
        "slow_call_p95" => "\"45ms\"",
        "probe_p95" => "\"40ms\"",
        "kind" => "\"kv\"",
        "binding" => "\"USER_RECS\"",
        "key" => "\"user_rec:{user_id}\"",
        "max_staleness" => "\"4h\"",
        "read_timeout" => "\"8ms\"",
        "query" => "\"q\"",
        "timeout" => "\"100ms\"",
        "stubs" => "\"recommendations.catalog.json\"",
        "inventory" => "\"recommendations.inventory.json\"",
        "service" => "`[service]` with `name` and `route`",
        "budget" => "`[budget]` with `total` and `deadline`",
        "origin" => "`[origin]` with `url` and `attempt_timeout`",
        "cascade" => "`[[cascade.tiers]]` tables",
        _ => return None,
    })
}

fn article(ty: &str) -> String {
    match ty {
        "integer" | "array" => format!("an {ty}"),
        _ => format!("a {ty}"),
    }
}

/// A readable description of a TOML syntax error.
fn syntax(kind: &ErrorKind) -> String {
    match kind {
        ErrorKind::UnexpectedEof => "the file ends in the middle of a value".into(),
        ErrorKind::InvalidCharInString(c) => {
            format!("the character {c:?} is not allowed in a string")
        }
        ErrorKind::InvalidEscape(c) => format!("`\\{c}` is not a string escape"),
        ErrorKind::InvalidHexEscape(c) => format!("{c:?} is not a hexadecimal digit"),
        ErrorKind::InvalidEscapeValue(v) => format!("{v:#x} is not a Unicode scalar value"),
        ErrorKind::Unexpected(c) => format!("unexpected character {c:?}"),
        ErrorKind::UnterminatedString => "a string is never closed".into(),
        ErrorKind::InvalidNumber => "a number is malformed".into(),
        ErrorKind::Wanted { expected, found } => format!("expected {expected}, found {found}"),
        ErrorKind::RedefineAsArray => "a table is redefined as an array".into(),
        ErrorKind::MultilineStringKey => "a key cannot be a multi-line string".into(),
        ErrorKind::DottedKeyInvalidType { .. } => {
            "a dotted key extends a value that is not a table".into()
        }
        ErrorKind::UnquotedString => "a string value must be quoted".into(),
        ErrorKind::ExceededDepthLimit => "the document nests too deeply".into(),
        other => other.to_string(),
    }
}

/// The expected key closest to `key` by edit distance, when it is close.
fn closest<'a>(key: &str, expected: &[&'a str]) -> Option<&'a str> {
    expected
        .iter()
        .map(|e| (levenshtein(key, e), *e))
        .filter(|(d, e)| *d <= 2.max(e.len() / 4))
        .min()
        .map(|(_, e)| e)
}

fn levenshtein(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            cur.push((prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

/// The diagnostic of a document that does not parse as TOML.
pub fn syntax_error(err: &Error, file: &Path) -> Diagnostic {
    let at = span(err.span);
    let message = match &err.kind {
        ErrorKind::DuplicateKey { key, .. } => {
            format!("the policy is not valid TOML: the key `{key}` is defined twice")
        }
        ErrorKind::DuplicateTable { name, .. } => {
            format!("the policy is not valid TOML: the table `[{name}]` is defined twice")
        }
        other => format!("the policy is not valid TOML: {}", syntax(other)),
    };
    let mut d = Diagnostic::new(Code::TomlSyntax, file, message)
        .at(at, "TOML parsing stopped here")
        .help("fix the TOML syntax at this point; see https://toml.io for the format");
    if let ErrorKind::DuplicateKey { first, .. } | ErrorKind::DuplicateTable { first, .. } =
        &err.kind
    {
        d = d.also(span(*first), "first defined here");
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn problems_survive_the_trip_through_toml_span() {
        let p = Problem::new(
            Code::OutOfRange,
            "`{key}` is 0ms",
            "zero",
            "use 1ms or more",
        );
        let e = p.clone().at(toml_span::Span::new(3, 6));
        let ErrorKind::Custom(text) = &e.kind else {
            panic!()
        };
        assert_eq!(Problem::unpack(text), Some(p));
    }
}
