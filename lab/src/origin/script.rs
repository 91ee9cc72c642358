//! A fault script: which [`Behavior`] the origin shows for each model request, chosen by the
//! request's number (1, 2, 3, … since start or the last counter reset) and by the time since
//! start. Drills replay incidents with it: "requests 12–20 get 503", "the first two minutes
//! are 500 ms slower".
//!
//! Selection is a pure function of `(request number, elapsed time)` so it is tested without
//! a server or a clock. Rules are tried in order and the first that matches wins; two rules
//! that constrain the same dimension must not overlap, so no rule is silently shadowed.

use std::fmt;
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Deserializer};

use super::fault::Behavior;

/// The longest phase boundary a script may name (one week), in seconds.
pub const MAX_SCRIPT_SECONDS: f64 = 7.0 * 24.0 * 3600.0;

/// A validated fault script. Build one with [`Script::parse`] or [`Script::from_file`].
#[derive(Debug, Clone, PartialEq)]
pub struct Script {
    /// What requests that match no rule get.
    pub default: Behavior,
    pub rules: Vec<Rule>,
}

/// One rule: a selector (request numbers, a time phase, or both) and the behaviour it gives.
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    pub requests: Option<RequestRange>,
    pub seconds: Option<TimeRange>,
    pub behavior: Behavior,
}

/// Request numbers `from..=to` (1-based, inclusive); `to: None` means "and every later one".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestRange {
    pub from: u64,
    pub to: Option<u64>,
}

/// Time since start, `from` (inclusive) to `to` (exclusive), in seconds; `to: None` means
/// "until the origin stops".
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TimeRange {
    pub from: f64,
    pub to: Option<f64>,
}

/// A script that could not be read, with the file and the place that is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptError {
    /// The file name (or another name for where the text came from).
    pub source: String,
    /// 1-based line and column, for syntax and type errors.
    pub position: Option<(usize, usize)>,
    /// The JSON path of the wrong value (`rules[2].requests`), for checks after parsing.
    pub path: Option<String>,
    pub message: String,
}

impl fmt::Display for ScriptError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.source)?;
        if let Some((line, column)) = self.position {
            write!(f, ":{line}:{column}")?;
        }
        write!(f, ": ")?;
        if let Some(path) = &self.path {
            write!(f, "{path}: ")?;
        }
        write!(f, "{}", self.message)
    }
}

impl std::error::Error for ScriptError {}

impl Script {
    /// A script with no rules: every request gets `default`.
    pub fn constant(default: Behavior) -> Self {
        Script {
            default,
            rules: Vec::new(),
        }
    }

    /// Reads and validates a script file.
    pub fn from_file(path: &Path) -> Result<Script, ScriptError> {
        let source = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ScriptError {
            source: source.clone(),
            position: None,
            path: None,
            message: format!("cannot read the script: {e}"),
        })?;
        Script::parse(&text, &source)
    }

    /// Parses and validates script text; `source` names it in errors (usually the file name).
    pub fn parse(text: &str, source: &str) -> Result<Script, ScriptError> {
        let raw: RawScript = serde_json::from_str(text).map_err(|e| {
            let full = e.to_string();
            let suffix = format!(" at line {} column {}", e.line(), e.column());
            let message = full.strip_suffix(&suffix).unwrap_or(&full).to_string();
            ScriptError {
                source: source.to_string(),
                position: (e.line() > 0).then_some((e.line(), e.column())),
                path: None,
                message,
            }
        })?;
        raw.validate().map_err(|(path, message)| ScriptError {
            source: source.to_string(),
            position: None,
            path: Some(path),
            message,
        })
    }

    /// The behaviour for request number `n` (1-based) arriving `elapsed` after start.
    pub fn select(&self, n: u64, elapsed: Duration) -> &Behavior {
        let t = elapsed.as_secs_f64();
        self.rules
            .iter()
            .find(|r| {
                r.requests.is_none_or(|q| q.contains(n)) && r.seconds.is_none_or(|p| p.contains(t))
            })
            .map_or(&self.default, |r| &r.behavior)
    }
}

impl RequestRange {
    pub fn contains(&self, n: u64) -> bool {
        n >= self.from && self.to.is_none_or(|to| n <= to)
    }

    fn overlaps(&self, other: &RequestRange) -> bool {
        self.to.is_none_or(|to| other.from <= to) && other.to.is_none_or(|to| self.from <= to)
    }
}

impl fmt::Display for RequestRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.to {
            Some(to) => write!(f, "requests {}-{}", self.from, to),
            None => write!(f, "requests {} onwards", self.from),
        }
    }
}

impl TimeRange {
    pub fn contains(&self, t: f64) -> bool {
        t >= self.from && self.to.is_none_or(|to| t < to)
    }

    fn overlaps(&self, other: &TimeRange) -> bool {
        self.to.is_none_or(|to| other.from < to) && other.to.is_none_or(|to| self.from < to)
    }
}

impl fmt::Display for TimeRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.to {
            Some(to) => write!(f, "{} s to {} s", self.from, to),
            None => write!(f, "{} s onwards", self.from),
        }
    }
}

// ---- The file format, before validation ----

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScript {
    #[serde(default)]
    default: Option<Behavior>,
    #[serde(default)]
    rules: Vec<RawRule>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    #[serde(default)]
    requests: Option<RawRange<i64>>,
    #[serde(default)]
    seconds: Option<RawRange<f64>>,
    fault: super::fault::Fault,
    #[serde(default, deserialize_with = "signed")]
    delay_ms: i64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRange<T> {
    from: T,
    #[serde(default)]
    to: Option<T>,
}

fn signed<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    i64::deserialize(d)
}

/// At most this many rules: a script is written by hand, and selection walks the list.
const MAX_RULES: usize = 1000;

type Invalid = (String, String);

impl RawScript {
    fn validate(self) -> Result<Script, Invalid> {
        let default = self.default.unwrap_or_else(Behavior::healthy);
        default
            .validate()
            .map_err(|e| split_field(format!("default.{e}")))?;
        if self.rules.len() > MAX_RULES {
            return Err((
                "rules".into(),
                format!(
                    "{} rules is more than the limit of {MAX_RULES}",
                    self.rules.len()
                ),
            ));
        }
        let mut rules: Vec<Rule> = Vec::with_capacity(self.rules.len());
        for (i, raw) in self.rules.into_iter().enumerate() {
            let at = |field: &str| format!("rules[{i}].{field}");
            let requests = raw
                .requests
                .map(|r| request_range(r).map_err(|e| (at("requests"), e)))
                .transpose()?;
            let seconds = raw
                .seconds
                .map(|r| time_range(r).map_err(|e| (at("seconds"), e)))
                .transpose()?;
            if requests.is_none() && seconds.is_none() {
                return Err((
                    format!("rules[{i}]"),
                    "a rule needs `requests` and/or `seconds`; put a fault for every request in `default`".into(),
                ));
            }
            if raw.delay_ms < 0 {
                return Err((
                    at("delay_ms"),
                    format!(
                        "negative number {}: this value must be 0 or more",
                        raw.delay_ms
                    ),
                ));
            }
            let behavior = Behavior {
                fault: raw.fault,
                delay_ms: u64::try_from(raw.delay_ms).unwrap_or(u64::MAX),
            };
            behavior
                .validate()
                .map_err(|e| split_field(format!("rules[{i}].{e}")))?;
            let rule = Rule {
                requests,
                seconds,
                behavior,
            };
            for (j, earlier) in rules.iter().enumerate() {
                if let Some(why) = overlap(earlier, &rule) {
                    return Err((
                        format!("rules[{i}]"),
                        format!("{why} overlaps rules[{j}]; make the ranges disjoint (the first matching rule wins, so the later one would be partly hidden)"),
                    ));
                }
            }
            rules.push(rule);
        }
        Ok(Script { default, rules })
    }
}

/// Turns `"rules[0].fault.ms: 9 is too big"` into `("rules[0].fault.ms", "9 is too big")`.
fn split_field(joined: String) -> Invalid {
    match joined.split_once(": ") {
        Some((path, message)) => (path.to_string(), message.to_string()),
        None => (String::new(), joined),
    }
}

/// Two rules overlap when both constrain the same dimension and some request could match
/// both. A request-only rule and a time-only rule may overlap: the earlier one wins.
fn overlap(a: &Rule, b: &Rule) -> Option<String> {
    let same_dimension = (a.requests.is_some() && b.requests.is_some())
        || (a.seconds.is_some() && b.seconds.is_some());
    if !same_dimension {
        return None;
    }
    let requests_meet = match (a.requests, b.requests) {
        (Some(x), Some(y)) => x.overlaps(&y),
        _ => true,
    };
    let seconds_meet = match (a.seconds, b.seconds) {
        (Some(x), Some(y)) => x.overlaps(&y),
        _ => true,
    };
    if !(requests_meet && seconds_meet) {
        return None;
    }
    let mut parts = Vec::new();
    if let Some(r) = b.requests {
        parts.push(r.to_string());
    }
    if let Some(s) = b.seconds {
        parts.push(s.to_string());
    }
    Some(parts.join(", "))
}

fn request_range(r: RawRange<i64>) -> Result<RequestRange, String> {
    let check = |name: &str, v: i64| -> Result<u64, String> {
        if v < 1 {
            Err(format!(
                "{name}: {v} is not a request number; requests are numbered from 1"
            ))
        } else {
            u64::try_from(v).map_err(|_| format!("{name}: {v} is too large"))
        }
    };
    let from = check("from", r.from)?;
    let to = r.to.map(|t| check("to", t)).transpose()?;
    if let Some(to) = to {
        if to < from {
            return Err(format!(
                "inverted range: `to` ({to}) is before `from` ({from}); both ends are inclusive"
            ));
        }
    }
    Ok(RequestRange { from, to })
}

fn time_range(r: RawRange<f64>) -> Result<TimeRange, String> {
    let check = |name: &str, v: f64| -> Result<f64, String> {
        if !v.is_finite() || v < 0.0 {
            Err(format!(
                "{name}: {v} must be 0 or more (seconds since start)"
            ))
        } else if v > MAX_SCRIPT_SECONDS {
            Err(format!(
                "{name}: {v} s is more than the limit of {MAX_SCRIPT_SECONDS} s (one week)"
            ))
        } else {
            Ok(v)
        }
    };
    let from = check("from", r.from)?;
    let to = r.to.map(|t| check("to", t)).transpose()?;
    if let Some(to) = to {
        if to <= from {
            return Err(format!(
                "inverted range: `to` ({to} s) must be after `from` ({from} s)"
            ));
        }
    }
    Ok(TimeRange { from, to })
}

#[cfg(test)]
mod tests {
    use super::super::fault::Fault;
    use super::*;

    fn parse(s: &str) -> Result<Script, String> {
        Script::parse(s, "drill.json").map_err(|e| e.to_string())
    }

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn selects_by_request_number_then_time_then_default() {
        let s = parse(
            r#"{
              "default": {"fault": {"kind": "latency", "ms": 5}},
              "rules": [
                {"requests": {"from": 12, "to": 20}, "fault": {"kind": "status", "code": 503}},
                {"seconds": {"from": 0, "to": 120}, "fault": {"kind": "latency", "ms": 500}},
                {"requests": {"from": 30}, "fault": {"kind": "hang"}, "delay_ms": 10}
              ]
            }"#,
        )
        .unwrap();
        assert_eq!(s.select(1, S).fault, Fault::Latency { ms: 500 });
        assert_eq!(s.select(12, S).fault, Fault::Status { code: 503 });
        assert_eq!(s.select(20, S).fault, Fault::Status { code: 503 });
        assert_eq!(s.select(21, S).fault, Fault::Latency { ms: 500 });
        assert_eq!(s.select(21, 120 * S).fault, Fault::Latency { ms: 5 });
        assert_eq!(s.select(31, 500 * S).delay_ms, 10);
        assert_eq!(s.select(31, S).fault, Fault::Latency { ms: 500 });
    }

    #[test]
    fn empty_script_is_healthy() {
        let s = parse("{}").unwrap();
        assert_eq!(s, Script::constant(Behavior::healthy()));
    }

    #[test]
    fn syntax_errors_name_file_line_and_column() {
        let e = parse("{\n  \"rules\": [\n    {\"requests\": {\"from\": 1}, \"fault\": {\"kind\": \"explode\"}}\n  ]\n}")
            .unwrap_err();
        assert!(e.starts_with("drill.json:3:"), "{e}");
        assert!(e.contains("unknown variant `explode`"), "{e}");
        let e = parse("{\"rulez\": []}").unwrap_err();
        assert!(e.starts_with("drill.json:1:"), "{e}");
        assert!(e.contains("unknown field `rulez`"), "{e}");
    }

    #[test]
    fn bad_values_are_named_by_path() {
        let cases = [
            (
                r#"{"rules":[{"requests":{"from":20,"to":12},"fault":{"kind":"hang"}}]}"#,
                "drill.json: rules[0].requests: inverted range",
            ),
            (
                r#"{"rules":[{"requests":{"from":-3},"fault":{"kind":"hang"}}]}"#,
                "drill.json: rules[0].requests: from: -3 is not a request number",
            ),
            (
                r#"{"rules":[{"seconds":{"from":-1},"fault":{"kind":"hang"}}]}"#,
                "drill.json: rules[0].seconds: from: -1 must be 0 or more",
            ),
            (
                r#"{"rules":[{"seconds":{"from":5,"to":5},"fault":{"kind":"hang"}}]}"#,
                "rules[0].seconds: inverted range",
            ),
            (
                r#"{"rules":[{"requests":{"from":1},"fault":{"kind":"latency","ms":700000}}]}"#,
                "rules[0].fault.ms: 700000 ms is more than the limit of 600000 ms",
            ),
            (
                r#"{"rules":[{"requests":{"from":1},"fault":{"kind":"hang"},"delay_ms":-2}]}"#,
                "rules[0].delay_ms: negative number -2",
            ),
            (
                r#"{"rules":[{"fault":{"kind":"hang"}}]}"#,
                "rules[0]: a rule needs `requests` and/or `seconds`",
            ),
            (
                r#"{"default":{"fault":{"kind":"status","code":200}}}"#,
                "drill.json: default.fault.code: 200 is not an error status",
            ),
        ];
        for (text, want) in cases {
            let e = parse(text).unwrap_err();
            assert!(e.contains(want), "{text}\n got: {e}\nwant: {want}");
        }
    }

    #[test]
    fn overlapping_rules_are_rejected() {
        let e = parse(
            r#"{"rules":[
              {"requests":{"from":1,"to":10},"fault":{"kind":"hang"}},
              {"requests":{"from":10,"to":15},"fault":{"kind":"reset"}}]}"#,
        )
        .unwrap_err();
        assert!(
            e.contains("rules[1]: requests 10-15 overlaps rules[0]"),
            "{e}"
        );
        let e = parse(
            r#"{"rules":[
              {"seconds":{"from":0},"fault":{"kind":"hang"}},
              {"seconds":{"from":60,"to":90},"fault":{"kind":"reset"}}]}"#,
        )
        .unwrap_err();
        assert!(
            e.contains("rules[1]: 60 s to 90 s overlaps rules[0]"),
            "{e}"
        );
        // Touching phases do not overlap (`to` is exclusive); different dimensions layer.
        parse(
            r#"{"rules":[
              {"seconds":{"from":0,"to":60},"fault":{"kind":"hang"}},
              {"seconds":{"from":60,"to":90},"fault":{"kind":"reset"}},
              {"requests":{"from":1,"to":5},"fault":{"kind":"empty"}},
              {"requests":{"from":6},"seconds":{"from":100},"fault":{"kind":"malformed"}}]}"#,
        )
        .unwrap();
    }
}
