//! [V-DELIVER] What one delivery attempt's answer means — classified by the edge's one
//! table ([`crate::classify`], docs/outcomes.md), so a consumer's 503 and a model's 503 are
//! the same failure. The outbox's rules decide on it; the request itself is
//! [`super::delivery`]'s.
//!
//! - 2xx: delivered (the consumer acknowledged after committing its side effect).
//! - Timeouts, connect errors and resets, 408, 429, 5xx — dependency failures: retried
//!   when the policy's `retry_on` lists them, honouring `Retry-After`.
//! - 401/403 (the consumer refuses our credential: authentication) and any other 4xx (the
//!   consumer refuses the event: schema) are permanent: dead-lettered at once. So is
//!   anything else the table does not call retryable.

use crate::classify::{self, Class, Failure, FailureReason, Observed};

/// The error code an event records, in the consumer's vocabulary.
pub fn code(reason: FailureReason) -> &'static str {
    match reason {
        FailureReason::MlTimeout => "TIMEOUT",
        FailureReason::MlConnect => "CONNECT",
        FailureReason::Ml5xx => "HTTP_5XX",
        FailureReason::Ml429 => "HTTP_429",
        FailureReason::Ml408 => "HTTP_408",
        FailureReason::MlAuth => "AUTH",
        FailureReason::Ml4xx => "HTTP_4XX",
        FailureReason::MlBadResponse => "BAD_RESPONSE",
        // The edge's own refusals never come from a consumer's answer.
        FailureReason::BreakerOpen
        | FailureReason::BulkheadFull
        | FailureReason::EdgeOverloaded => "NOT_ATTEMPTED",
    }
}

/// The name of a failure's class as events record it (the edge's one vocabulary).
pub fn class_name(class: Class) -> &'static str {
    class.as_str()
}

/// What an attempt observed, from the race the driver ran between its request and the
/// lease's attempt timeout: the answer, or `TimedOut` when the timer won (`None`) — the driver
/// then aborts the request.
pub fn ended(answer: Option<Observed>) -> Observed {
    answer.unwrap_or(Observed::TimedOut)
}

/// `Ok` when the consumer acknowledged, the classified failure otherwise.
pub fn outcome(observed: &Observed) -> Result<(), Failure> {
    match observed {
        Observed::Response { status, .. } if (200..300).contains(status) => Ok(()),
        // Only a 2xx body is read: its size says nothing about the acknowledgement.
        Observed::TooLarge { .. } => Ok(()),
        other => match classify::classify(other, &[], 0) {
            // The table is the model path's too, and its detail names the origin; an
            // event's `last_error` and delivery log line are read by whoever runs the
            // consumer, so they name the consumer.
            Err(mut f) => {
                if let Some(status) = f.status {
                    f.detail = format!("consumer answered {status}");
                }
                Err(f)
            }
            // Unreachable for non-2xx observations; treated as a malformed answer.
            Ok(_) => Err(Failure::new(
                FailureReason::MlBadResponse,
                "unexpected answer",
            )),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: u16) -> Observed {
        Observed::Response {
            status: code,
            retry_after: None,
            body: Vec::new(),
        }
    }
    #[test]
    fn failures_are_described_as_the_consumers_never_the_origins() {
        // `last_error` and the delivery log line are read by whoever runs the consumer; the
        // model's origin has nothing to do with an event's delivery.
        for code in [302, 400, 401, 403, 408, 422, 429, 500, 503] {
            let f = outcome(&status(code)).unwrap_err();
            assert_eq!(f.detail, format!("consumer answered {code}"));
        }
        for o in [
            Observed::TimedOut,
            Observed::Connect("reset by peer".into()),
        ] {
            let f = outcome(&o).unwrap_err();
            assert!(!f.detail.to_lowercase().contains("origin"), "{}", f.detail);
        }
    }

    #[test]
    fn each_failure_class_is_named() {
        assert!(outcome(&status(200)).is_ok());
        assert!(outcome(&status(204)).is_ok());
        assert!(outcome(&Observed::TooLarge { limit: 1 }).is_ok());
        let name = |o: Observed| code(outcome(&o).unwrap_err().reason);
        assert_eq!(name(Observed::TimedOut), "TIMEOUT");
        assert_eq!(name(Observed::Connect("reset".into())), "CONNECT");
        assert_eq!(name(status(408)), "HTTP_408");
        assert_eq!(name(status(429)), "HTTP_429");
        assert_eq!(name(status(503)), "HTTP_5XX");
        assert_eq!(name(status(400)), "HTTP_4XX");
        assert_eq!(name(status(401)), "AUTH");
        assert_eq!(name(status(302)), "BAD_RESPONSE");
        let f = outcome(&Observed::Response {
            status: 429,
            retry_after: Some("7".into()),
            body: Vec::new(),
        })
        .unwrap_err();
        assert_eq!(f.retry_after_s, Some(7));
    }
}
