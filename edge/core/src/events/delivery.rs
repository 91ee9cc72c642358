//! [V-DELIVER] One delivery attempt: the request the outbox sends, and what its outcome
//! means — classified by the edge's one table ([`crate::classify`], docs/outcomes.md), so
//! a consumer's 503 and a model's 503 are the same failure.
//!
//! - 2xx: delivered (the consumer acknowledged after committing its side effect).
//! - Timeouts, connect errors and resets, 408, 429, 5xx — dependency failures: retried
//!   when the policy's `retry_on` lists them, honouring `Retry-After`.
//! - 401/403 (the consumer refuses our credential: authentication) and any other 4xx (the
//!   consumer refuses the event: schema) are permanent: dead-lettered at once. So is
//!   anything else the table does not call retryable.

use crate::classify::{self, Class, Failure, FailureReason, Observed};
use crate::correlation;
use crate::http::Credential;
use crate::http::Outbound;
use crate::policy::Method;

use super::outbox::Record;

/// The delivery's `Idempotency-Key` header: always the event's own ID.
pub const IDEMPOTENCY_KEY: &str = "Idempotency-Key";
/// Largest consumer answer read; the status is what acknowledges.
pub const MAX_ANSWER_BYTES: u64 = 64 * 1024;

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

/// The delivery request for `rec` with its opened `payload` (compact JSON text).
pub fn request(
    url: &str,
    rec: &Record,
    payload: &str,
    attempt: u32,
    credential: Option<&Credential>,
) -> Outbound {
    let body = format!(
        "{{\"eventId\":{},\"type\":{},\"schemaVersion\":{},\"aggregateId\":{},\"sequence\":{},\"occurredAt\":{},\"correlationId\":{},\"payload\":{}}}",
        js(&rec.event_id),
        js(&rec.event_type),
        rec.schema_version,
        js(&rec.aggregate),
        rec.sequence,
        js(&rec.occurred_at),
        js(&rec.correlation_id),
        payload
    );
    let mut headers = vec![
        ("Content-Type".to_string(), "application/json".to_string()),
        ("Accept".to_string(), "application/json".to_string()),
        (IDEMPOTENCY_KEY.to_string(), rec.event_id.clone()),
        (correlation::HEADER.to_string(), rec.correlation_id.clone()),
        ("X-Event-Type".to_string(), rec.event_type.clone()),
        ("X-Event-Tenant".to_string(), rec.tenant.clone()),
        ("X-Event-Attempt".to_string(), attempt.to_string()),
    ];
    if let Some(c) = credential {
        headers.push((c.header.clone(), c.value.clone()));
    }
    Outbound {
        url: url.split('#').next().unwrap_or(url).to_string(),
        method: Method::Post,
        headers,
        body: Some(body),
        max_body_bytes: MAX_ANSWER_BYTES,
    }
}

fn js(s: &str) -> String {
    serde_json::Value::from(s).to_string()
}

/// The log line of one settled attempt (seed 004: event ID, aggregate ID, dependency,
/// attempt, outcome, correlation ID) — never the payload.
pub fn log_line(s: &super::outbox::Settled, service: &str, release: &str) -> String {
    let r = &s.record;
    serde_json::json!({
        "event": "event_delivery",
        "event_id": r.event_id,
        "aggregate_id": r.aggregate,
        "tenant": r.tenant,
        "type": r.event_type,
        "correlation_id": r.correlation_id,
        "dependency": "consumer",
        "attempt": r.attempts,
        "outcome": s.verdict.name(),
        "state": r.state,
        "class": if s.verdict == super::outbox::Verdict::Delivered { None } else { r.last_error_class.as_deref() },
        "error": if s.verdict == super::outbox::Verdict::Delivered { None } else { r.last_error.as_deref() },
        "next_attempt_at": r.next_attempt_at,
        "latency_ms": s.latency_ms,
        "policy_version": release,
        "service": service,
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::testing::record;

    fn status(code: u16) -> Observed {
        Observed::Response {
            status: code,
            retry_after: None,
            body: Vec::new(),
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
    fn the_request_carries_the_event_id_as_idempotency_key_and_the_correlation_id() {
        let rec = record("evt-9", "order-1", 4);
        let cred = Credential::new("Authorization", "k");
        let o = request(
            "https://c.example/events#x",
            &rec,
            r#"{"total":1}"#,
            3,
            Some(&cred),
        );
        assert_eq!(o.url, "https://c.example/events");
        assert_eq!(o.header("idempotency-key"), Some("evt-9"));
        assert_eq!(
            o.header("x-correlation-id"),
            Some(rec.correlation_id.as_str())
        );
        assert_eq!(o.header("x-event-attempt"), Some("3"));
        assert_eq!(o.header("authorization"), Some("Bearer k"));
        let body: serde_json::Value = serde_json::from_str(o.body.as_deref().unwrap()).unwrap();
        assert_eq!(body["eventId"], "evt-9");
        assert_eq!(body["sequence"], 4);
        assert_eq!(body["payload"]["total"], 1);
    }
}
