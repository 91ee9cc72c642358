//! [E-CLASSIFY] [E-RACE] [E-VERIFY] What an origin attempt's outcome means — one table for
//! the whole edge (docs/outcomes.md mirrors it, and a test keeps them equal).
//!
//! Every raw observation ([`Observed`]: timed out, connection failed, body too large, or a
//! status with its body) becomes a usable result or a [`Failure`] with a stable reason (the
//! `X-Degraded-Reason` a client sees), and every reason has one [`Class`]:
//! - **dependency** failures (timeouts, connect errors and resets, 408, 429, 5xx, malformed
//!   bodies) count against the breaker, are retried where the policy allows, and fall back;
//! - **credential** failures (401/403: the edge's own credential is refused) count against
//!   the breaker and fall back with their own reason and an alertable counter, never retried
//!   (the same credential would be refused again);
//! - **caller** failures (any other 4xx: the request itself is wrong) are never a breaker
//!   record and never retried; the policy's `client_errors` decides whether the caller gets
//!   the origin's status in the error envelope or a disclosed fallback.
//!
//! A 200 whose body is not the declared shape is a failure of the origin, not something to
//! pass through.

use serde::{Deserialize, Serialize};

use crate::metrics::Counters;

mod body;

pub use body::{items_at, verify_body, BodyError};

/// The classes, one row each: the word logs and docs use, and every decision that follows
/// from the class — what the breaker makes of it, whether the edge tries the origin again,
/// whether the caller may, what the caller gets, and the counter it adds to (`counts`: the
/// [`Counters`] method that counts it, named as its counter). Generated,
/// like diagnostic codes (`codes!` in the compiler): a new class is one row here and its
/// row in docs/outcomes.md; the decision sites ask these facts, never the class itself.
macro_rules! classes {
    (@count $c:ident, none) => { () };
    (@count $c:ident, $counter:ident) => { $c.$counter() };
    ($(
        $(#[$doc:meta])*
        $variant:ident = $word:literal, breaker: $breaker:ident, retried: $retried:literal,
            retry_helps: $helps:literal, caller_gets: $gets:ident, counts: $counter:ident;
    )*) => {
        /// Whose fault a failure is, which decides what the breaker, the retry plan and the
        /// caller make of it.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Class { $( $(#[$doc])* $variant, )* }

        impl Class {
            /// Every class, in docs/outcomes.md's order.
            pub const ALL: &'static [Class] = &[ $( Class::$variant, )* ];

            /// The class's word in logs, events and docs/outcomes.md.
            pub const fn as_str(self) -> &'static str {
                match self { $( Class::$variant => $word, )* }
            }

            /// What the breaker makes of the outcome.
            pub const fn breaker(self) -> BreakerRecord {
                match self { $( Class::$variant => BreakerRecord::$breaker, )* }
            }

            /// Whether another attempt may be worth it, where the policy's `retry_on` allows
            /// the reason (the origin's retries, an event's redelivery).
            pub const fn retried(self) -> bool {
                match self { $( Class::$variant => $retried, )* }
            }

            /// Whether calling again may help the caller when nothing answered: the 503's
            /// `retryable` and its `Retry-After`.
            pub const fn retry_helps(self) -> bool {
                match self { $( Class::$variant => $helps, )* }
            }

            /// What the caller gets.
            pub const fn caller_gets(self) -> CallerGets {
                match self { $( Class::$variant => CallerGets::$gets, )* }
            }

            /// Adds the outcome to its class's counter, if the class has one.
            pub fn count(self, counters: &mut Counters) {
                match self { $( Class::$variant => classes!(@count counters, $counter), )* }
            }
        }
    };
}

/// What the breaker makes of an outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BreakerRecord {
    /// A failure of the origin.
    Failure,
    /// No news about the origin: nothing is recorded (a half-open trial it held is released).
    Nothing,
    /// The edge's own doing: nothing is recorded, and the outcome counts as `unrecorded`.
    Unrecorded,
}

/// What the caller gets for a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CallerGets {
    /// A disclosed fallback (a 504/503 when no tier answers).
    Fallback,
    /// What the policy's `origin.client_errors` says: the origin's status with the error
    /// envelope, or a disclosed fallback.
    ClientErrors,
}

classes! {
    /// The origin (or the way to it) failed: breaker record, retry where allowed, fallback.
    Dependency = "dependency", breaker: Failure, retried: true,
        retry_helps: true, caller_gets: Fallback, counts: none;
    /// The origin refused the edge's credential: breaker record, alert, fallback, no retry
    /// (the same credential would be refused again).
    Credential = "credential", breaker: Failure, retried: false,
        retry_helps: false, caller_gets: Fallback, counts: credential_refused;
    /// The origin refused the caller's request: no breaker record, no retry; pass the status
    /// through or fall back, as the policy says.
    Caller = "caller", breaker: Nothing, retried: false,
        retry_helps: true, caller_gets: ClientErrors, counts: none;
    /// Not an origin outcome: the edge kept the request from the origin (its breaker is
    /// open, its bulkhead full) — no breaker record.
    Shed = "shed", breaker: Nothing, retried: false,
        retry_helps: true, caller_gets: Fallback, counts: none;
    /// The edge itself was too slow (a late timer on a saturated or cold isolate): never
    /// blamed on the origin.
    Edge = "edge", breaker: Unrecorded, retried: false,
        retry_helps: true, caller_gets: Fallback, counts: none;
}

impl Class {
    /// Whether the outcome counts against the origin in the breaker.
    pub const fn blames_origin(self) -> bool {
        matches!(self.breaker(), BreakerRecord::Failure)
    }
}

/// Which origin outcomes may be retried (`origin.retry_on`, `events.retry.retry_on`): the
/// keys the reasons' table names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetryOn {
    pub timeout: bool,
    pub connect: bool,
    pub status_408: bool,
    pub status_429: bool,
    pub status_5xx: bool,
}

impl RetryOn {
    pub fn none() -> RetryOn {
        RetryOn {
            timeout: false,
            connect: false,
            status_408: false,
            status_429: false,
            status_5xx: false,
        }
    }
}

/// The reasons, one row each: the stable code, the class, whether the model answered the
/// call (with a status or a body, rather than staying silent, refusing the connection or
/// never being asked), the `retry_on` key that allows retrying it (`never`: nothing does),
/// and what produces it as docs/outcomes.md words it. A new reason is one row; the docs
/// tests then ask for its line in docs/outcomes.md and the README.
macro_rules! reasons {
    (@retry $on:ident, never) => { false };
    (@retry $on:ident, $key:ident) => { $on.$key };
    ($(
        $(#[$doc:meta])*
        $variant:ident = $code:literal, $class:ident, answered: $answered:literal,
            retry: $retry:ident, $source:literal;
    )*) => {
        /// Why the origin's answer was not used.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum FailureReason { $( $(#[$doc])* $variant, )* }

        impl FailureReason {
            /// Every reason, in docs/outcomes.md's order.
            pub const ALL: &'static [FailureReason] = &[ $( FailureReason::$variant, )* ];

            /// The stable code: `X-Degraded-Reason`, the log line's `reason`.
            pub const fn code(self) -> &'static str {
                match self { $( FailureReason::$variant => $code, )* }
            }

            pub const fn class(self) -> Class {
                match self { $( FailureReason::$variant => Class::$class, )* }
            }

            /// Whether the model (or its server) answered the call — with a status or a
            /// body — rather than staying silent, refusing the connection or never being
            /// asked.
            pub const fn model_answered(self) -> bool {
                match self { $( FailureReason::$variant => $answered, )* }
            }

            /// What produces this reason, as docs/outcomes.md words it.
            pub const fn source(self) -> &'static str {
                match self { $( FailureReason::$variant => $source, )* }
            }

            /// Whether `origin.retry_on` allows another attempt after this failure.
            pub fn retryable(self, on: &RetryOn) -> bool {
                match self { $( FailureReason::$variant => reasons!(@retry on, $retry), )* }
            }
        }
    };
}

reasons! {
    MlTimeout = "ML_TIMEOUT", Dependency, answered: false, retry: timeout,
        "no complete answer (headers and body) before the attempt's timeout";
    MlConnect = "ML_CONNECT", Dependency, answered: false, retry: connect,
        "connection refused, reset, or cut off mid-body";
    Ml5xx = "ML_5XX", Dependency, answered: true, retry: status_5xx,
        "status 500–599";
    Ml429 = "ML_429", Dependency, answered: true, retry: status_429,
        "status 429 (its Retry-After is honoured when it fits)";
    Ml408 = "ML_408", Dependency, answered: true, retry: status_408,
        "status 408";
    /// 401/403: the origin refused the edge's own credential.
    MlAuth = "ML_AUTH", Credential, answered: true, retry: never,
        "status 401 or 403";
    /// Any other 4xx: the origin refused the caller's request.
    Ml4xx = "ML_4XX", Caller, answered: true, retry: never,
        "any other status 400–499";
    MlBadResponse = "ML_BAD_RESPONSE", Dependency, answered: true, retry: never,
        "a 2xx/other status whose body is not the declared shape (not JSON, no list at \
         `result_path`, an empty list, too large)";
    BreakerOpen = "BREAKER_OPEN", Shed, answered: false, retry: never,
        "the breaker kept the request from the origin";
    /// The isolate's in-flight origin calls are at the policy's cap (the bulkhead).
    BulkheadFull = "BULKHEAD_FULL", Shed, answered: false, retry: never,
        "the isolate's origin calls in flight were at `origin.max_in_flight`";
    /// The attempt's timer fired well after it was due: the isolate was too busy to take
    /// the model's answer in time, so the timeout is the edge's, not the model's.
    EdgeOverloaded = "EDGE_OVERLOADED", Edge, answered: false, retry: never,
        "the attempt's timer fired later than its timeout plus the tolerance while the \
         model answered other calls: the isolate, not the model, was slow";
}

/// A failed origin attempt: the reason, a detail for the log line (no secrets, no user
/// data), and the origin's `Retry-After` in seconds when it sent one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub reason: FailureReason,
    pub detail: String,
    pub retry_after_s: Option<u64>,
    /// The origin's status, when it answered with one.
    pub status: Option<u16>,
}

impl Failure {
    pub fn new(reason: FailureReason, detail: impl Into<String>) -> Failure {
        Failure {
            reason,
            detail: detail.into(),
            retry_after_s: None,
            status: None,
        }
    }
}

/// The result list, each item as compact JSON text.
pub type Items = Vec<String>;

/// What the driver observed of one HTTP attempt, before any interpretation. The Worker
/// reports what `fetch` did; `simulate` reports what its scripted origin would have done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Observed {
    /// The attempt's timeout passed before headers and body were in (the driver aborted it).
    TimedOut,
    /// The connection failed or was reset (before or during the body).
    Connect(String),
    /// The body grew past the limit; the driver stopped reading and aborted.
    TooLarge { limit: u64 },
    /// Headers arrived; for 2xx the body was read in full (other statuses: empty).
    Response {
        status: u16,
        retry_after: Option<String>,
        body: Vec<u8>,
    },
}

/// How late an attempt's timer may fire before the timeout counts as the edge's own: a
/// quarter of the timeout, at least 5 ms (timer granularity and one scheduling slice).
pub fn late_tolerance_ms(timeout_ms: u64) -> u64 {
    (timeout_ms / 4).max(5)
}

/// Classifies a timed-out attempt by when the driver noticed: `waited_ms` after it started,
/// for a timer of `timeout_ms`, and whether the model answered any other call of this isolate
/// while the attempt waited (`model_answered_meanwhile`). A timer that fired on time is the
/// model's timeout. One that fired much later is ambiguous: the isolate was busy, and the
/// model's answer may have been sitting in its queue. The model's other calls decide:
/// - it answered some of them meanwhile — it was alive, and this answer was most likely
///   held up by the isolate: [`FailureReason::EdgeOverloaded`], which never blames the model;
/// - it answered none — it had more than its timeout and said nothing to anyone: the
///   model's timeout (a busy isolate must not hide a hung model from its breaker).
pub fn timeout_failure(waited_ms: u64, timeout_ms: u64, model_answered_meanwhile: bool) -> Failure {
    let late = waited_ms.saturating_sub(timeout_ms);
    if late <= late_tolerance_ms(timeout_ms) {
        Failure::new(
            FailureReason::MlTimeout,
            "no complete answer before the attempt's timeout",
        )
    } else if model_answered_meanwhile {
        Failure::new(
            FailureReason::EdgeOverloaded,
            format!("the {timeout_ms} ms timer fired {late} ms late: the isolate was busy"),
        )
    } else {
        Failure::new(
            FailureReason::MlTimeout,
            format!(
                "no answer in {waited_ms} ms (the {timeout_ms} ms timer fired late), and none to any other call meanwhile"
            ),
        )
    }
}

/// Classifies an attempt: the verified items, or the failure.
pub fn classify(
    observed: &Observed,
    result_path: &[String],
    max_body_bytes: u64,
) -> Result<Items, Failure> {
    match observed {
        Observed::TimedOut => Err(Failure::new(
            FailureReason::MlTimeout,
            "no complete answer before the attempt's timeout",
        )),
        Observed::Connect(e) => Err(Failure::new(FailureReason::MlConnect, bounded(e))),
        Observed::TooLarge { limit } => Err(body_failure(BodyError::TooLarge { limit: *limit })),
        Observed::Response {
            status,
            retry_after,
            body,
        } => {
            let status = *status;
            let reason = match status {
                200..=299 => {
                    return verify_body(body, result_path, max_body_bytes).map_err(body_failure)
                }
                401 | 403 => FailureReason::MlAuth,
                408 => FailureReason::Ml408,
                429 => FailureReason::Ml429,
                500..=599 => FailureReason::Ml5xx,
                400..=499 => FailureReason::Ml4xx,
                _ => FailureReason::MlBadResponse,
            };
            Err(Failure {
                reason,
                detail: format!("origin answered {status}"),
                retry_after_s: retry_after.as_deref().and_then(parse_retry_after),
                status: Some(status),
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

fn body_failure(e: BodyError) -> Failure {
    Failure::new(FailureReason::MlBadResponse, e.to_string())
}

/// Log details stay one short line: the first line only (a JavaScript error's text carries
/// its stack after it), no control characters, at most [`DETAIL_MAX`] characters.
pub fn bounded(s: &str) -> String {
    s.lines()
        .next()
        .unwrap_or("")
        .chars()
        .filter(|c| !c.is_control())
        .take(DETAIL_MAX)
        .collect()
}

/// Longest detail kept in a log note.
pub const DETAIL_MAX: usize = 160;

#[cfg(test)]
mod tests {
    use super::*;

    fn path() -> Vec<String> {
        vec!["items".into()]
    }

    fn resp(status: u16, body: &[u8]) -> Result<Items, Failure> {
        classify(
            &Observed::Response {
                status,
                retry_after: None,
                body: body.to_vec(),
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
    fn items_pass_through_as_the_model_wrote_them_and_the_shape_is_still_checked() {
        let p = path();
        // Fields off the path are skipped, whatever they hold; items keep their own text.
        let body =
            br#"{"meta":{"x":[1,{"y":null}]},"items":[{"sku":"1","t":"caf\u00e9"}, 2.50],"z":"}"}"#;
        assert_eq!(
            verify_body(body, &p, 1 << 10).unwrap(),
            [r#"{"sku":"1","t":"caf\u00e9"}"#, "2.50"]
        );
        // A key given twice: the last one counts, as a JSON object reads.
        assert_eq!(
            verify_body(br#"{"items":[],"items":[3]}"#, &p, 99).unwrap(),
            ["3"]
        );
        let err = |b: &[u8], path: &[String]| verify_body(b, path, 1 << 10).unwrap_err();
        assert!(
            matches!(err(b"{\"items\":[1]} x", &p), BodyError::NotJson(_)),
            "trailing bytes"
        );
        assert!(matches!(
            err(br#"{"items":[1,]}"#, &p),
            BodyError::NotJson(_)
        ));
        assert_eq!(
            err(br#"{"items":{"a":1}}"#, &p),
            BodyError::NotAList("items".into())
        );
        assert_eq!(
            err(br#"{"items":"x"}"#, &p),
            BodyError::NotAList("items".into())
        );
        assert_eq!(err(br#"[1]"#, &p), BodyError::MissingPath("items".into()));
        assert_eq!(
            err(br#"{"other":[1]}"#, &p),
            BodyError::MissingPath("items".into())
        );
        let deep = ["data".to_string(), "recs".to_string()];
        assert_eq!(
            err(br#"{"data":5}"#, &deep),
            BodyError::MissingPath("data.recs".into())
        );
        assert_eq!(
            err(br#"{"data":{"recs":[]}}"#, &deep),
            BodyError::EmptyList("data.recs".into())
        );
    }

    #[test]
    fn each_outcome_has_its_reason() {
        let p = path();
        assert_eq!(reason(classify(&Observed::TimedOut, &p, 1)), "ML_TIMEOUT");
        assert_eq!(
            reason(classify(&Observed::Connect("reset".into()), &p, 1)),
            "ML_CONNECT"
        );
        assert_eq!(
            reason(classify(&Observed::TooLarge { limit: 1 }, &p, 1)),
            "ML_BAD_RESPONSE"
        );
        assert_eq!(reason(resp(500, b"")), "ML_5XX");
        assert_eq!(reason(resp(503, b"")), "ML_5XX");
        assert_eq!(reason(resp(429, b"")), "ML_429");
        assert_eq!(reason(resp(408, b"")), "ML_408");
        assert_eq!(reason(resp(404, b"")), "ML_4XX");
        assert_eq!(reason(resp(401, b"")), "ML_AUTH");
        assert_eq!(reason(resp(403, b"")), "ML_AUTH");
        assert_eq!(reason(resp(400, b"")), "ML_4XX");
        assert_eq!(reason(resp(422, b"")), "ML_4XX");
        assert_eq!(reason(resp(304, b"")), "ML_BAD_RESPONSE");
        assert_eq!(reason(resp(204, b"")), "ML_BAD_RESPONSE");
    }

    #[test]
    fn retry_after_is_kept_from_a_429() {
        let f = classify(
            &Observed::Response {
                status: 429,
                retry_after: Some(" 7 ".into()),
                body: Vec::new(),
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
    fn every_reason_has_one_class() {
        let of = |c: Class| -> Vec<&str> {
            FailureReason::ALL
                .iter()
                .filter(|r| r.class() == c)
                .map(|r| r.code())
                .collect()
        };
        assert_eq!(
            of(Class::Dependency),
            [
                "ML_TIMEOUT",
                "ML_CONNECT",
                "ML_5XX",
                "ML_429",
                "ML_408",
                "ML_BAD_RESPONSE"
            ]
        );
        assert_eq!(of(Class::Credential), ["ML_AUTH"]);
        assert_eq!(of(Class::Caller), ["ML_4XX"]);
        assert_eq!(of(Class::Shed), ["BREAKER_OPEN", "BULKHEAD_FULL"]);
        assert_eq!(of(Class::Edge), ["EDGE_OVERLOADED"]);
        assert!(!Class::Caller.blames_origin() && Class::Credential.blames_origin());
    }

    /// Issue 23: the decisions that `match`es on the class made in the engine, the
    /// disclosure and the outbox are now the table's facts; these are the same answers.
    #[test]
    fn each_class_decides_the_breaker_the_retries_and_the_callers_answer() {
        let facts = |c: Class| (c.breaker(), c.retried(), c.retry_helps(), c.caller_gets());
        use BreakerRecord::*;
        use CallerGets::*;
        assert_eq!(facts(Class::Dependency), (Failure, true, true, Fallback));
        assert_eq!(facts(Class::Credential), (Failure, false, false, Fallback));
        assert_eq!(facts(Class::Caller), (Nothing, false, true, ClientErrors));
        assert_eq!(facts(Class::Shed), (Nothing, false, true, Fallback));
        assert_eq!(facts(Class::Edge), (Unrecorded, false, true, Fallback));
        let mut c = Counters::default();
        for class in Class::ALL {
            class.count(&mut c);
        }
        assert_eq!(
            c.credential_refused, 1,
            "only a refused credential is counted"
        );
    }

    #[test]
    fn a_timer_that_fires_late_is_the_edges_timeout_while_the_model_answers_others() {
        for meanwhile in [false, true] {
            assert_eq!(
                timeout_failure(45, 45, meanwhile).reason,
                FailureReason::MlTimeout
            );
            assert_eq!(
                timeout_failure(56, 45, meanwhile).reason,
                FailureReason::MlTimeout
            );
            assert_eq!(
                timeout_failure(805, 800, meanwhile).reason,
                FailureReason::MlTimeout
            );
        }
        assert_eq!(
            timeout_failure(57, 45, true).reason,
            FailureReason::EdgeOverloaded
        );
        assert_eq!(
            timeout_failure(1001, 800, true).reason,
            FailureReason::EdgeOverloaded
        );
        // A late timer on a model that answered nobody: the model's, whatever the queue.
        let silent = timeout_failure(57, 45, false);
        assert_eq!(silent.reason, FailureReason::MlTimeout);
        assert!(
            silent.detail.contains("none to any other call"),
            "{}",
            silent.detail
        );
        assert!(!FailureReason::EdgeOverloaded.class().blames_origin());
    }

    #[test]
    fn a_status_failure_keeps_the_status() {
        assert_eq!(resp(404, b"").unwrap_err().status, Some(404));
        assert_eq!(
            classify(&Observed::TimedOut, &path(), 1)
                .unwrap_err()
                .status,
            None
        );
    }

    #[test]
    fn details_are_one_bounded_line() {
        let long = format!("a\r\nb{}", "x".repeat(500));
        let f = classify(&Observed::Connect(long), &path(), 1).unwrap_err();
        assert!(f.detail.len() <= 160 && !f.detail.contains('\n'));
        // A JavaScript error's text carries its stack on the following lines.
        let js = "TypeError: fetch failed\n    at serve (index.js:1:2)\n    at x";
        assert_eq!(bounded(js), "TypeError: fetch failed");
    }
}
