//! [E-RACE] [E-VERIFY] What an origin attempt's outcome means: a usable result, or a failure
//! with a stable reason (the `X-Degraded-Reason` a client sees) and whether the policy lets
//! it be retried. A 200 whose body is not the declared shape is a failure of the origin, not
//! something to pass through.

use serde_json::Value;

use crate::policy::RetryOn;

/// Why the origin's answer was not used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FailureReason {
    MlTimeout,
    MlConnect,
    Ml5xx,
    Ml429,
    Ml408,
    Ml4xx,
    MlBadResponse,
    BreakerOpen,
}

impl FailureReason {
    pub const ALL: [FailureReason; 8] = [
        FailureReason::MlTimeout,
        FailureReason::MlConnect,
        FailureReason::Ml5xx,
        FailureReason::Ml429,
        FailureReason::Ml408,
        FailureReason::Ml4xx,
        FailureReason::MlBadResponse,
        FailureReason::BreakerOpen,
    ];

    pub fn code(self) -> &'static str {
        match self {
            FailureReason::MlTimeout => "ML_TIMEOUT",
            FailureReason::MlConnect => "ML_CONNECT",
            FailureReason::Ml5xx => "ML_5XX",
            FailureReason::Ml429 => "ML_429",
            FailureReason::Ml408 => "ML_408",
            FailureReason::Ml4xx => "ML_4XX",
            FailureReason::MlBadResponse => "ML_BAD_RESPONSE",
            FailureReason::BreakerOpen => "BREAKER_OPEN",
        }
    }

    /// Whether `origin.retry_on` allows another attempt after this failure.
    pub fn retryable(self, on: &RetryOn) -> bool {
        match self {
            FailureReason::MlTimeout => on.timeout,
            FailureReason::MlConnect => on.connect,
            FailureReason::Ml408 => on.status_408,
            FailureReason::Ml429 => on.status_429,
            FailureReason::Ml5xx => on.status_5xx,
            FailureReason::Ml4xx | FailureReason::MlBadResponse | FailureReason::BreakerOpen => {
                false
            }
        }
    }
}

/// A failed origin attempt: the reason, a detail for the log line (no secrets, no user
/// data), and the origin's `Retry-After` in seconds when it sent one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub reason: FailureReason,
    pub detail: String,
    pub retry_after_s: Option<u64>,
}

impl Failure {
    pub fn new(reason: FailureReason, detail: impl Into<String>) -> Failure {
        Failure {
            reason,
            detail: detail.into(),
            retry_after_s: None,
        }
    }
}

/// The result list, each item as compact JSON text.
pub type Items = Vec<String>;

/// What the adapter observed of one origin attempt.
#[derive(Debug, Clone, Copy)]
pub enum Outcome<'a> {
    /// The race deadline passed before headers and body were in.
    TimedOut,
    /// The connection failed or was reset (before or during the body).
    Connect(&'a str),
    /// The body grew past the limit; the adapter stopped reading and aborted.
    BodyTooLarge { limit: u64 },
    /// Headers arrived; for 2xx the body was read in full.
    Response {
        status: u16,
        retry_after: Option<&'a str>,
        body: &'a [u8],
    },
}

/// Classifies an attempt: the verified items, or the failure.
pub fn classify(
    outcome: Outcome<'_>,
    result_path: &[String],
    max_body_bytes: u64,
) -> Result<Items, Failure> {
    match outcome {
        Outcome::TimedOut => Err(Failure::new(
            FailureReason::MlTimeout,
            "no complete answer before the race deadline",
        )),
        Outcome::Connect(e) => Err(Failure::new(FailureReason::MlConnect, bounded(e))),
        Outcome::BodyTooLarge { limit } => Err(body_failure(BodyError::TooLarge { limit })),
        Outcome::Response {
            status,
            retry_after,
            body,
        } => {
            let reason = match status {
                200..=299 => {
                    return verify_body(body, result_path, max_body_bytes).map_err(body_failure)
                }
                408 => FailureReason::Ml408,
                429 => FailureReason::Ml429,
                500..=599 => FailureReason::Ml5xx,
                400..=499 => FailureReason::Ml4xx,
                _ => FailureReason::MlBadResponse,
            };
            Err(Failure {
                reason,
                detail: format!("origin answered {status}"),
                retry_after_s: retry_after.and_then(parse_retry_after),
            })
        }
    }
}

/// `Retry-After` in delta-seconds. HTTP-dates are ignored (we would need the origin's clock).
pub fn parse_retry_after(v: &str) -> Option<u64> {
    let v = v.trim();
    (!v.is_empty() && v.len() <= 10 && v.bytes().all(|b| b.is_ascii_digit()))
        .then(|| v.parse().ok())
        .flatten()
}

/// Why a body is not the declared shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BodyError {
    TooLarge { limit: u64 },
    NotJson(String),
    MissingPath(String),
    NotAList(String),
    EmptyList(String),
}

impl std::fmt::Display for BodyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BodyError::TooLarge { limit } => write!(f, "body larger than {limit} bytes"),
            BodyError::NotJson(e) => write!(f, "body is not JSON ({e})"),
            BodyError::MissingPath(p) => write!(f, "body has no `{p}`"),
            BodyError::NotAList(p) => write!(f, "`{p}` is not a list"),
            BodyError::EmptyList(p) => write!(f, "`{p}` is an empty list"),
        }
    }
}

fn body_failure(e: BodyError) -> Failure {
    Failure::new(FailureReason::MlBadResponse, e.to_string())
}

/// Parses `body`, follows `path` and requires a non-empty list there; returns its items.
pub fn verify_body(body: &[u8], path: &[String], max_bytes: u64) -> Result<Items, BodyError> {
    if body.len() as u64 > max_bytes {
        return Err(BodyError::TooLarge { limit: max_bytes });
    }
    let root: Value =
        serde_json::from_slice(body).map_err(|e| BodyError::NotJson(bounded(&e.to_string())))?;
    items_at(root, path)
}

/// Follows `path` in `root` and takes the non-empty list there (shared with KV values).
pub fn items_at(root: Value, path: &[String]) -> Result<Items, BodyError> {
    let dotted = path.join(".");
    let mut cur = root;
    for key in path {
        cur = match cur {
            Value::Object(mut m) => m
                .remove(key)
                .ok_or_else(|| BodyError::MissingPath(dotted.clone()))?,
            _ => return Err(BodyError::MissingPath(dotted)),
        };
    }
    match cur {
        Value::Array(a) if a.is_empty() => Err(BodyError::EmptyList(dotted)),
        Value::Array(a) => Ok(a.iter().map(|v| v.to_string()).collect()),
        _ => Err(BodyError::NotAList(dotted)),
    }
}

/// Log details stay one short line.
fn bounded(s: &str) -> String {
    s.chars().filter(|c| !c.is_control()).take(160).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path() -> Vec<String> {
        vec!["items".into()]
    }

    fn resp(status: u16, body: &[u8]) -> Result<Items, Failure> {
        classify(
            Outcome::Response {
                status,
                retry_after: None,
                body,
            },
            &path(),
            1024,
        )
    }

    fn reason(r: Result<Items, Failure>) -> &'static str {
        r.unwrap_err().reason.code()
    }

    #[test]
    fn a_good_body_yields_its_items() {
        let items = resp(200, br#"{"items":[{"sku":"1"},{"sku":"2"}],"model":"v3"}"#).unwrap();
        assert_eq!(items, vec![r#"{"sku":"1"}"#, r#"{"sku":"2"}"#]);
        let nested = verify_body(
            br#"{"data":{"recs":[1]}}"#,
            &["data".into(), "recs".into()],
            100,
        )
        .unwrap();
        assert_eq!(nested, vec!["1"]);
    }

    #[test]
    fn each_outcome_has_its_reason() {
        let p = path();
        assert_eq!(reason(classify(Outcome::TimedOut, &p, 1)), "ML_TIMEOUT");
        assert_eq!(
            reason(classify(Outcome::Connect("reset"), &p, 1)),
            "ML_CONNECT"
        );
        assert_eq!(
            reason(classify(Outcome::BodyTooLarge { limit: 1 }, &p, 1)),
            "ML_BAD_RESPONSE"
        );
        assert_eq!(reason(resp(500, b"")), "ML_5XX");
        assert_eq!(reason(resp(503, b"")), "ML_5XX");
        assert_eq!(reason(resp(429, b"")), "ML_429");
        assert_eq!(reason(resp(408, b"")), "ML_408");
        assert_eq!(reason(resp(404, b"")), "ML_4XX");
        assert_eq!(reason(resp(401, b"")), "ML_4XX");
        assert_eq!(reason(resp(304, b"")), "ML_BAD_RESPONSE");
        assert_eq!(reason(resp(204, b"")), "ML_BAD_RESPONSE");
    }

    #[test]
    fn retry_after_is_kept_from_a_429() {
        let f = classify(
            Outcome::Response {
                status: 429,
                retry_after: Some(" 7 "),
                body: b"",
            },
            &path(),
            1,
        )
        .unwrap_err();
        assert_eq!(f.retry_after_s, Some(7));
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), None);
        assert_eq!(parse_retry_after("-1"), None);
        assert_eq!(parse_retry_after("99999999999999"), None);
    }

    #[test]
    fn body_verification() {
        let p = path();
        assert!(matches!(
            verify_body(b"{not json", &p, 100),
            Err(BodyError::NotJson(_))
        ));
        assert!(matches!(
            verify_body(b"", &p, 100),
            Err(BodyError::NotJson(_))
        ));
        assert_eq!(
            verify_body(br#"{"results":[1]}"#, &p, 100),
            Err(BodyError::MissingPath("items".into()))
        );
        assert_eq!(
            verify_body(br#"[1,2]"#, &p, 100),
            Err(BodyError::MissingPath("items".into()))
        );
        assert_eq!(
            verify_body(br#"{"items":[]}"#, &p, 100),
            Err(BodyError::EmptyList("items".into()))
        );
        assert_eq!(
            verify_body(br#"{"items":{"a":1}}"#, &p, 100),
            Err(BodyError::NotAList("items".into()))
        );
        let big = format!(r#"{{"items":["{}"]}}"#, "x".repeat(200));
        assert_eq!(
            verify_body(big.as_bytes(), &p, 100),
            Err(BodyError::TooLarge { limit: 100 })
        );
        assert_eq!(reason(resp(200, b"<html>oops</html>")), "ML_BAD_RESPONSE");
        assert_eq!(reason(resp(200, br#"{"items":[]}"#)), "ML_BAD_RESPONSE");
    }

    #[test]
    fn retryability_follows_retry_on() {
        let mut on = RetryOn::none();
        assert!(FailureReason::ALL.iter().all(|r| !r.retryable(&on)));
        on = RetryOn {
            timeout: true,
            connect: true,
            status_408: true,
            status_429: true,
            status_5xx: true,
        };
        let yes: Vec<_> = FailureReason::ALL
            .iter()
            .filter(|r| r.retryable(&on))
            .map(|r| r.code())
            .collect();
        assert_eq!(
            yes,
            ["ML_TIMEOUT", "ML_CONNECT", "ML_5XX", "ML_429", "ML_408"]
        );
        on.status_429 = false;
        assert!(!FailureReason::Ml429.retryable(&on));
    }

    #[test]
    fn details_are_one_bounded_line() {
        let long = format!("a\r\nb{}", "x".repeat(500));
        let f = classify(Outcome::Connect(&long), &path(), 1).unwrap_err();
        assert!(f.detail.len() <= 160 && !f.detail.contains('\n'));
    }
}
