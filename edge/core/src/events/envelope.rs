//! [V-INGEST] The event envelope `{eventId, type, schemaVersion, aggregateId, sequence,
//! occurredAt, correlationId, payload}`: read and checked before anything is stored. A bad
//! envelope is refused with a 4xx that names the field, so a producer can fix it; nothing
//! of the payload is echoed back (it may be sensitive).
//!
//! - Shape (400): the body is a JSON object, every envelope field is present with its type,
//!   identifiers are printable and bounded, `sequence` starts at 1, no unknown fields (a
//!   typo such as `aggregateID` would otherwise drop a field silently), and no object, in
//!   the envelope or its payload, holds a key twice ([`json`]).
//! - Schema (422): the type is declared, its `schemaVersion` is one the policy accepts
//!   (the current version and the ones before it that are declared), and the payload holds
//!   every field that version requires.

use serde_json::{Map, Value};

use super::json;
use super::seal::SealKey;
use crate::policy::events::Events;

/// Longest event ID, aggregate ID, type and correlation ID.
pub const MAX_ID: usize = 128;
/// Largest sequence number (integers beyond 2^53 lose precision in JavaScript and SQLite's
/// bindings).
pub const MAX_SEQUENCE: u64 = (1 << 53) - 1;

pub const FIELDS: [&str; 8] = [
    "eventId",
    "type",
    "schemaVersion",
    "aggregateId",
    "sequence",
    "occurredAt",
    "correlationId",
    "payload",
];

/// A valid event, as accepted.
#[derive(Debug, Clone, PartialEq)]
pub struct Envelope {
    pub event_id: String,
    pub event_type: String,
    pub schema_version: u32,
    pub aggregate_id: String,
    pub sequence: u64,
    pub occurred_at: String,
    pub correlation_id: String,
    /// The payload object, as compact JSON text.
    pub payload: String,
}

impl Envelope {
    /// What makes a resend the same event (ADR 006): the outbox's keyed digest
    /// ([`SealKey::digest`]) of every field but the event ID. The payload is its parsed JSON
    /// written back compactly with its keys in order, so a resend that spaces or orders its
    /// keys differently is the same event; one that changes a value is another.
    pub fn digest(&self, key: &SealKey) -> String {
        key.digest(&[
            self.event_type.as_bytes(),
            &self.schema_version.to_be_bytes(),
            self.aggregate_id.as_bytes(),
            &self.sequence.to_be_bytes(),
            self.occurred_at.as_bytes(),
            self.correlation_id.as_bytes(),
            self.payload.as_bytes(),
        ])
    }
}

/// Why an envelope is refused: the HTTP status, a stable code, the field at fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    pub status: u16,
    pub code: &'static str,
    /// `eventId`, `payload.total`, … (`""` for the body as a whole).
    pub field: String,
    pub message: String,
}

fn shape(field: &str, code: &'static str, message: String) -> Rejection {
    Rejection {
        status: 400,
        code,
        field: field.to_string(),
        message,
    }
}

fn schema(field: &str, code: &'static str, message: String) -> Rejection {
    Rejection {
        status: 422,
        code,
        field: field.to_string(),
        message,
    }
}

/// An identifier: printable ASCII without spaces, 1 to [`MAX_ID`] characters (it goes into
/// headers, log lines and SQL keys as it is).
pub fn is_identifier(s: &str) -> bool {
    !s.is_empty() && s.len() <= MAX_ID && s.bytes().all(|b| (0x21..=0x7e).contains(&b))
}

/// An RFC 3339 instant that exists: `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)` read through
/// the calendar by the `time` crate, so `2026-02-30`, hour 25, minute 61, month 0 and an
/// offset past ±23:59 are refused, not stored.
pub fn is_rfc3339(s: &str) -> bool {
    use time::format_description::well_known::Rfc3339;
    let b = s.as_bytes();
    // RFC 3339's offset hour is 00–23; `time` reads offsets up to ±25 hours.
    let offset_ok = match b.len().checked_sub(6).map(|i| (b[i], &b[i + 1..])) {
        Some((b'+' | b'-', hm)) if hm.len() == 5 && hm[2] == b':' => {
            hm[..2].iter().all(u8::is_ascii_digit) && (hm[0] - b'0') * 10 + (hm[1] - b'0') <= 23
        }
        _ => true,
    };
    offset_ok && time::OffsetDateTime::parse(s, &Rfc3339).is_ok()
}

fn id_field(obj: &Map<String, Value>, field: &str) -> Result<String, Rejection> {
    match obj.get(field) {
        None | Some(Value::Null) => Err(shape(
            field,
            "MISSING_FIELD",
            format!("`{field}` is required"),
        )),
        Some(Value::String(s)) if is_identifier(s) => Ok(s.clone()),
        Some(Value::String(_)) => Err(shape(
            field,
            "INVALID_FIELD",
            format!("`{field}` must be 1 to {MAX_ID} printable ASCII characters without spaces"),
        )),
        Some(_) => Err(shape(
            field,
            "INVALID_FIELD",
            format!("`{field}` must be a string"),
        )),
    }
}

fn positive(obj: &Map<String, Value>, field: &str, max: u64) -> Result<u64, Rejection> {
    match obj.get(field) {
        None | Some(Value::Null) => Err(shape(
            field,
            "MISSING_FIELD",
            format!("`{field}` is required"),
        )),
        Some(Value::Number(n)) => match n.as_u64() {
            Some(v) if (1..=max).contains(&v) => Ok(v),
            _ => Err(shape(
                field,
                "INVALID_FIELD",
                format!("`{field}` must be a whole number from 1 to {max}"),
            )),
        },
        Some(_) => Err(shape(
            field,
            "INVALID_FIELD",
            format!("`{field}` must be a number"),
        )),
    }
}

/// The value at a dotted `path` in `payload`, if present and not null.
pub fn lookup<'a>(payload: &'a Value, path: &str) -> Option<&'a Value> {
    let mut cur = payload;
    for key in path.split('.') {
        cur = cur.as_object()?.get(key)?;
    }
    (!cur.is_null()).then_some(cur)
}

/// Reads and checks `body` against the policy's declared types.
pub fn parse(body: &[u8], events: &Events) -> Result<Envelope, Rejection> {
    let value = json::parse(body).map_err(|e| match e {
        json::Error::Syntax(e) => shape(
            "",
            "INVALID_JSON",
            format!(
                "the body is not JSON (line {}, column {})",
                e.line(),
                e.column()
            ),
        ),
        json::Error::Duplicate(path) => shape(
            &path,
            "DUPLICATE_FIELD",
            format!("`{path}` appears twice in one object; send each key once"),
        ),
    })?;
    let Value::Object(obj) = value else {
        return Err(shape(
            "",
            "INVALID_ENVELOPE",
            "the body must be a JSON object with the fields eventId, type, schemaVersion, aggregateId, sequence, occurredAt, correlationId, payload".into(),
        ));
    };
    if let Some(k) = obj.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        let shown: String = k.chars().filter(|c| !c.is_control()).take(40).collect();
        return Err(shape(
            &shown,
            "UNKNOWN_FIELD",
            format!(
                "`{shown}` is not an envelope field; expected {}",
                FIELDS.join(", ")
            ),
        ));
    }
    let event_id = id_field(&obj, "eventId")?;
    let event_type = id_field(&obj, "type")?;
    let schema_version = positive(&obj, "schemaVersion", u64::from(u32::MAX))? as u32;
    let aggregate_id = id_field(&obj, "aggregateId")?;
    let sequence = positive(&obj, "sequence", MAX_SEQUENCE)?;
    let occurred_at = match obj.get("occurredAt") {
        None | Some(Value::Null) => {
            return Err(shape(
                "occurredAt",
                "MISSING_FIELD",
                "`occurredAt` is required".into(),
            ))
        }
        Some(Value::String(s)) if s.len() <= 40 && is_rfc3339(s) => s.clone(),
        Some(_) => {
            return Err(shape(
                "occurredAt",
                "INVALID_FIELD",
                "`occurredAt` must be an RFC 3339 timestamp such as 2026-11-30T12:00:00Z".into(),
            ))
        }
    };
    let correlation_id = id_field(&obj, "correlationId")?;
    let payload = match obj.get("payload") {
        None | Some(Value::Null) => {
            return Err(shape(
                "payload",
                "MISSING_FIELD",
                "`payload` is required".into(),
            ))
        }
        Some(p @ Value::Object(_)) => p,
        Some(_) => {
            return Err(shape(
                "payload",
                "INVALID_FIELD",
                "`payload` must be a JSON object".into(),
            ))
        }
    };

    let versions = events.versions_of(&event_type);
    if versions.is_empty() {
        let mut names: Vec<&str> = events.types.iter().map(|t| t.name.as_str()).collect();
        names.dedup();
        return Err(schema(
            "type",
            "UNKNOWN_EVENT_TYPE",
            format!(
                "`{event_type}` is not an accepted event type; accepted: {}",
                names.join(", ")
            ),
        ));
    }
    let Some(declared) = events.schema(&event_type, schema_version) else {
        let accepted: Vec<String> = versions.iter().map(|t| t.version.to_string()).collect();
        return Err(schema(
            "schemaVersion",
            "UNSUPPORTED_SCHEMA_VERSION",
            format!(
                "schema version {schema_version} of `{event_type}` is not accepted; accepted: {}",
                accepted.join(", ")
            ),
        ));
    };
    for field in &declared.required {
        if lookup(payload, field).is_none() {
            return Err(schema(
                &format!("payload.{field}"),
                "MISSING_FIELD",
                format!("`payload.{field}` is required by `{event_type}` version {schema_version}"),
            ));
        }
    }
    Ok(Envelope {
        event_id,
        event_type,
        schema_version,
        aggregate_id,
        sequence,
        occurred_at,
        correlation_id,
        payload: payload.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::testing::events_policy;
    use serde_json::json;

    fn body(v: Value) -> Vec<u8> {
        v.to_string().into_bytes()
    }

    fn good() -> Value {
        json!({
            "eventId": "evt-1", "type": "order.placed", "schemaVersion": 2,
            "aggregateId": "order-7", "sequence": 1, "occurredAt": "2026-11-30T12:00:00.123Z",
            "correlationId": "c-1",
            "payload": {"orderId": "o-7", "total": 12.5, "currency": "EUR", "card": {"last4": "4242"}}
        })
    }

    fn refused(v: Value) -> Rejection {
        parse(&body(v), &events_policy()).unwrap_err()
    }

    #[test]
    fn a_current_and_a_prior_schema_version_are_accepted() {
        let e = parse(&body(good()), &events_policy()).unwrap();
        assert_eq!(
            (e.event_id.as_str(), e.schema_version, e.sequence),
            ("evt-1", 2, 1)
        );
        let mut v1 = good();
        v1["schemaVersion"] = json!(1);
        v1["payload"] = json!({"orderId": "o-7", "total": 3});
        assert_eq!(
            parse(&body(v1), &events_policy()).unwrap().schema_version,
            1
        );
    }

    #[test]
    fn an_unknown_schema_version_is_refused_naming_the_field() {
        let mut v = good();
        v["schemaVersion"] = json!(3);
        let r = refused(v);
        assert_eq!(
            (r.status, r.code, r.field.as_str()),
            (422, "UNSUPPORTED_SCHEMA_VERSION", "schemaVersion")
        );
        assert!(r.message.contains("accepted: 2, 1"), "{}", r.message);
    }

    #[test]
    fn a_required_payload_field_of_the_version_is_named() {
        let mut v = good();
        v["payload"].as_object_mut().unwrap().remove("currency");
        let r = refused(v);
        assert_eq!((r.status, r.field.as_str()), (422, "payload.currency"));
        // Version 1 does not require it.
        let mut v1 = good();
        v1["schemaVersion"] = json!(1);
        v1["payload"].as_object_mut().unwrap().remove("currency");
        assert!(parse(&body(v1), &events_policy()).is_ok());
    }

    #[test]
    fn shape_errors_name_the_field_and_never_echo_the_payload() {
        let cases: Vec<(Value, &str, &str)> = vec![
            (json!({"eventId": "a"}), "type", "MISSING_FIELD"),
            (
                {
                    let mut v = good();
                    v["eventId"] = json!("");
                    v
                },
                "eventId",
                "INVALID_FIELD",
            ),
            (
                {
                    let mut v = good();
                    v["eventId"] = json!("has space");
                    v
                },
                "eventId",
                "INVALID_FIELD",
            ),
            (
                {
                    let mut v = good();
                    v["sequence"] = json!(0);
                    v
                },
                "sequence",
                "INVALID_FIELD",
            ),
            (
                {
                    let mut v = good();
                    v["sequence"] = json!(-3);
                    v
                },
                "sequence",
                "INVALID_FIELD",
            ),
            (
                {
                    let mut v = good();
                    v["sequence"] = json!("1");
                    v
                },
                "sequence",
                "INVALID_FIELD",
            ),
            (
                {
                    let mut v = good();
                    v["occurredAt"] = json!("yesterday");
                    v
                },
                "occurredAt",
                "INVALID_FIELD",
            ),
            (
                {
                    let mut v = good();
                    v["payload"] = json!([1]);
                    v
                },
                "payload",
                "INVALID_FIELD",
            ),
            (
                {
                    let mut v = good();
                    v["aggregateID"] = json!("x");
                    v
                },
                "aggregateID",
                "UNKNOWN_FIELD",
            ),
            (
                {
                    let mut v = good();
                    v["type"] = json!("order.shipped");
                    v
                },
                "type",
                "UNKNOWN_EVENT_TYPE",
            ),
        ];
        for (v, field, code) in cases {
            let r = refused(v.clone());
            assert_eq!((r.field.as_str(), r.code), (field, code), "{v}");
            assert!(!r.message.contains("4242"));
        }
        let r = parse(b"{nope", &events_policy()).unwrap_err();
        assert_eq!((r.status, r.code), (400, "INVALID_JSON"));
        let r = parse(b"[]", &events_policy()).unwrap_err();
        assert_eq!(r.code, "INVALID_ENVELOPE");
    }

    #[test]
    fn duplicate_keys_are_refused_at_any_depth_naming_the_key() {
        // JSON parsers disagree on which duplicate wins; the consumer must see what the edge
        // checked, so a body with two of one key is refused instead of taking the last.
        const HEAD: &str = r#""type":"order.placed","schemaVersion":2,"aggregateId":"order-7","sequence":1,"occurredAt":"2026-11-30T12:00:00Z","correlationId":"c-1""#;
        let cases = [
            (
                format!(
                    r#"{{"eventId":"evt-1",{HEAD},"eventId":"evt-2","payload":{{"orderId":"o","total":1,"currency":"EUR"}}}}"#
                ),
                "eventId",
            ),
            (
                format!(
                    r#"{{"eventId":"evt-1",{HEAD},"payload":{{"orderId":"o","total":1,"total":9999,"currency":"EUR"}}}}"#
                ),
                "payload.total",
            ),
            (
                format!(
                    r#"{{"eventId":"evt-1",{HEAD},"payload":{{"orderId":"o","total":1,"currency":"EUR","card":{{"last4":"4242","last4":"0000"}}}}}}"#
                ),
                "payload.card.last4",
            ),
            (
                format!(
                    r#"{{"eventId":"evt-1",{HEAD},"payload":{{"orderId":"o","total":1,"currency":"EUR","lines":[{{"sku":"A"}},{{"sku":"B","sku":"C"}}]}}}}"#
                ),
                "payload.lines[1].sku",
            ),
            // The same key spelled with an escape is the same key.
            (
                format!(
                    r#"{{"eventId":"evt-1",{HEAD},"payload":{{"orderId":"o","total":1,"currency":"EUR","\u0063urrency":"USD"}}}}"#
                ),
                "payload.currency",
            ),
            // Duplicates are found before anything else is checked (here: an unknown field).
            (
                format!(
                    r#"{{"eventId":"evt-1",{HEAD},"payload":{{"x":1,"x":2}},"payload":{{}},"extra":1}}"#
                ),
                "payload.x",
            ),
        ];
        for (text, field) in cases {
            let r = parse(text.as_bytes(), &events_policy()).unwrap_err();
            assert_eq!(
                (r.status, r.code, r.field.as_str()),
                (400, "DUPLICATE_FIELD", field),
                "{text}"
            );
            assert!(r.message.contains(field), "{}", r.message);
            for value in ["9999", "0000", "USD", "evt-2", "\"C\""] {
                assert!(
                    !r.message.contains(value),
                    "a value is echoed: {}",
                    r.message
                );
            }
        }
        // Keys that differ only in case are different keys.
        let ok = format!(
            r#"{{"eventId":"evt-1",{HEAD},"payload":{{"orderId":"o","total":1,"currency":"EUR","Total":2}}}}"#
        );
        assert!(parse(ok.as_bytes(), &events_policy()).is_ok());
    }

    #[test]
    fn timestamps_have_rfc3339_shape() {
        for ok in [
            "2026-11-30T12:00:00Z",
            "2026-11-30T12:00:00.5+01:00",
            "2026-11-30t12:00:00z",
        ] {
            assert!(is_rfc3339(ok), "{ok}");
        }
        for bad in [
            "2026-11-30",
            "2026-11-30T12:00:00",
            "2026-11-30T12:00:00.Z",
            "2026-11-30T12:00:00+0100",
            "x026-11-30T12:00:00Z",
        ] {
            assert!(!is_rfc3339(bad), "{bad}");
        }
    }

    /// The ingest once stored instants of the right shape that do not exist.
    #[test]
    fn impossible_instants_are_refused() {
        for bad in [
            "2026-02-30T00:00:00Z",
            "2026-11-30T25:00:00Z",
            "2026-11-30T12:61:00Z",
            "0000-00-00T00:00:00Z",
            "2026-11-30T12:00:00+25:00",
        ] {
            assert!(!is_rfc3339(bad), "{bad}");
            let mut v = good();
            v["occurredAt"] = json!(bad);
            let e = parse(&body(v), &events_policy()).unwrap_err();
            assert_eq!((e.status, e.field.as_str()), (400, "occurredAt"), "{bad}");
        }
        for ok in ["2024-02-29T23:59:59Z", "2026-11-30T12:00:00-23:59"] {
            assert!(is_rfc3339(ok), "{ok}");
        }
    }

    /// A resend is the same event when every field but its spacing and key order is; a
    /// changed value in any field, the payload's included, is another event.
    #[test]
    fn the_digest_tells_a_resend_from_another_event() {
        let key = SealKey::from_secret("k").unwrap();
        let digest = |b: &[u8]| parse(b, &events_policy()).unwrap().digest(&key);
        let d = digest(&body(good()));
        assert_eq!(d.len(), 64);
        let respaced =
            br#"{ "payload": {"card": {"last4": "4242"}, "currency": "EUR", "total": 12.50,
            "orderId": "o-7"}, "correlationId": "c-1", "occurredAt": "2026-11-30T12:00:00.123Z",
            "sequence": 1, "aggregateId": "order-7", "schemaVersion": 2, "type": "order.placed",
            "eventId": "evt-1" }"#;
        assert_eq!(digest(respaced), d, "spacing, key order and 12.50 vs 12.5");
        let mut other_id = good();
        other_id["eventId"] = json!("evt-2");
        assert_eq!(
            digest(&body(other_id)),
            d,
            "the event ID is the key, not the content"
        );
        for (field, value) in [
            (
                "payload",
                json!({"orderId": "o-7", "total": 13, "currency": "EUR", "card": {"last4": "4242"}}),
            ),
            ("occurredAt", json!("2026-11-30T12:00:01Z")),
            ("correlationId", json!("c-2")),
            ("schemaVersion", json!(1)),
            ("sequence", json!(2)),
            ("aggregateId", json!("order-8")),
        ] {
            let mut v = good();
            v[field] = value;
            assert_ne!(digest(&body(v)), d, "{field}");
        }
    }

    #[test]
    fn dotted_paths_reach_nested_fields() {
        let p = json!({"card": {"last4": "4242"}, "n": null});
        assert_eq!(lookup(&p, "card.last4"), Some(&json!("4242")));
        assert_eq!(lookup(&p, "card.first"), None);
        assert_eq!(lookup(&p, "n"), None);
    }
}
