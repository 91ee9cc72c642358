//! [V-DELIVER] One delivery attempt's request: what the outbox sends the consumer (the
//! event ID as `Idempotency-Key`, the correlation ID, the attempt number), and the log line
//! of its settled outcome. What the consumer's answer means is [`super::attempt`]'s.

use crate::correlation;
use crate::http::Credential;
use crate::http::Outbound;
use crate::policy::Method;

use super::outbox::Record;

/// The delivery's `Idempotency-Key` header: always the event's own ID.
pub const IDEMPOTENCY_KEY: &str = "Idempotency-Key";
/// Largest consumer answer read; the status is what acknowledges.
pub const MAX_ANSWER_BYTES: u64 = 64 * 1024;

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
