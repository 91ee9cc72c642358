//! The live control API under `/__origin/`: tests and people change the origin's behaviour
//! while it runs, and read what it has seen. Control requests are not model requests: they
//! are not numbered, counted or scripted.
//!
//! | method            | path                | does                                          |
//! |-------------------|---------------------|-----------------------------------------------|
//! | `GET`             | `/__origin/stats`   | the [`Stats`](super::Stats) as JSON           |
//! | `GET`             | `/__origin/fault`   | the current override (or `null`)              |
//! | `PUT` or `POST`   | `/__origin/fault`   | set the override: a fault or a behaviour      |
//! | `DELETE`          | `/__origin/fault`   | clear the override: the script applies again  |
//! | `POST`            | `/__origin/reset`   | zero the counters, restart numbering and clock |

use bytes::Bytes;
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use serde_json::json;

use super::answer::SimBody;
use super::consumer::ConsumerConfig;
use super::fault::{Behavior, Fault};
use super::http::{json_response, read_body, BodyError};
use super::state::Shared;

/// Largest control request body (64 KiB).
const MAX_CONTROL_BODY: usize = 64 * 1024;

pub(crate) async fn handle(req: Request<Incoming>, shared: &Shared) -> Response<SimBody> {
    let method = req.method().clone();
    let path = req.uri().path().trim_end_matches('/').to_string();
    match (path.as_str(), &method) {
        ("/__origin/stats", &Method::GET) => ok(json!(shared.stats())),
        ("/__origin/fault", &Method::GET) => {
            ok(json!({"override": shared.stats().override_behavior}))
        }
        ("/__origin/fault", &Method::PUT | &Method::POST) => {
            let body = match read_body(req.into_body(), MAX_CONTROL_BODY).await {
                Ok(b) => b,
                Err(BodyError::TooLarge) => {
                    return bad(StatusCode::PAYLOAD_TOO_LARGE, "control body over 64 KiB")
                }
                Err(BodyError::Io | BodyError::Timeout) => {
                    return bad(StatusCode::BAD_REQUEST, "control body unreadable")
                }
            };
            match parse_behavior(&body) {
                Ok(b) => {
                    shared.set_override(Some(b.clone()));
                    ok(json!({"override": b}))
                }
                Err(e) => bad(StatusCode::BAD_REQUEST, &e),
            }
        }
        ("/__origin/fault", &Method::DELETE) => {
            shared.set_override(None);
            ok(json!({"override": null}))
        }
        ("/__origin/reset", &Method::POST) => {
            shared.reset_counters();
            ok(json!({"reset": true}))
        }
        ("/__origin/consumer", &Method::GET) => ok(json!(shared.consumer.config())),
        ("/__origin/consumer", &Method::PUT | &Method::POST) => {
            let body = match read_body(req.into_body(), MAX_CONTROL_BODY).await {
                Ok(b) => b,
                Err(_) => {
                    return bad(
                        StatusCode::BAD_REQUEST,
                        "control body unreadable or over 64 KiB",
                    )
                }
            };
            match serde_json::from_slice::<ConsumerConfig>(&body)
                .map_err(|e| format!("bad consumer config: {e}"))
                .and_then(|c| c.validate().map(|()| c))
            {
                Ok(c) => {
                    shared.consumer.configure(c.clone());
                    ok(json!(c))
                }
                Err(e) => bad(StatusCode::BAD_REQUEST, &e),
            }
        }
        ("/__origin/consumer", &Method::DELETE) => {
            shared.consumer.configure(ConsumerConfig::default());
            ok(json!(ConsumerConfig::default()))
        }
        ("/__origin/ledger", &Method::GET) => ok(json!(shared.consumer.ledger())),
        ("/__origin/ledger", &Method::DELETE) => {
            shared.consumer.reset_ledger();
            ok(json!({"reset": true}))
        }
        (
            "/__origin/stats" | "/__origin/fault" | "/__origin/reset" | "/__origin/consumer"
            | "/__origin/ledger",
            _,
        ) => bad(
            StatusCode::METHOD_NOT_ALLOWED,
            &format!("{method} is not allowed on {path}; see GET /__origin/ for the endpoints"),
        ),
        _ => {
            let status = if path == "/__origin" {
                StatusCode::OK
            } else {
                StatusCode::NOT_FOUND
            };
            json_response(
                status,
                Bytes::from(json!({"endpoints": ENDPOINTS}).to_string()),
            )
        }
    }
}

const ENDPOINTS: [&str; 11] = [
    "GET /__origin/stats",
    "GET /__origin/fault",
    "PUT /__origin/fault {\"kind\":\"status\",\"code\":503} or {\"fault\":{...},\"delay_ms\":N}",
    "POST /__origin/fault (same as PUT)",
    "DELETE /__origin/fault",
    "POST /__origin/reset",
    "GET /__origin/consumer",
    "PUT /__origin/consumer {\"rules\":[{\"event\":…,\"aggregate\":…,\"times\":N,\"rate\":R,\"fault\":{\"kind\":\"status\",\"code\":503}}],\"seed\":N}",
    "DELETE /__origin/consumer",
    "GET /__origin/ledger",
    "DELETE /__origin/ledger",
];

/// A control body is a bare fault (`{"kind":"hang"}`) or a behaviour
/// (`{"fault":{"kind":"hang"},"delay_ms":100}`); either is validated.
pub(crate) fn parse_behavior(body: &[u8]) -> Result<Behavior, String> {
    let value: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| format!("the body is not JSON: {e}"))?;
    let behavior = if value.get("kind").is_some() {
        Behavior::new(
            serde_json::from_value::<Fault>(value).map_err(|e| format!("bad fault: {e}"))?,
        )
    } else {
        serde_json::from_value::<Behavior>(value).map_err(|e| {
            format!("expected a fault {{\"kind\":…}} or {{\"fault\":{{…}},\"delay_ms\":N}}: {e}")
        })?
    };
    behavior.validate()?;
    Ok(behavior)
}

fn ok(v: serde_json::Value) -> Response<SimBody> {
    json_response(StatusCode::OK, Bytes::from(v.to_string()))
}

fn bad(status: StatusCode, message: &str) -> Response<SimBody> {
    json_response(status, Bytes::from(json!({"error": message}).to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_bodies_accept_a_fault_or_a_behavior() {
        assert_eq!(
            parse_behavior(br#"{"kind":"hang"}"#),
            Ok(Behavior::new(Fault::Hang))
        );
        assert_eq!(
            parse_behavior(br#"{"fault":{"kind":"reset"},"delay_ms":5}"#),
            Ok(Behavior {
                fault: Fault::Reset,
                delay_ms: 5
            })
        );
    }

    #[test]
    fn bad_control_bodies_say_what_is_wrong() {
        let e = parse_behavior(b"{nope").unwrap_err();
        assert!(e.starts_with("the body is not JSON"), "{e}");
        let e = parse_behavior(br#"{"kind":"teleport"}"#).unwrap_err();
        assert!(e.contains("unknown variant `teleport`"), "{e}");
        let e = parse_behavior(br#"{"kind":"latency","ms":9999999}"#).unwrap_err();
        assert!(e.contains("10 minutes"), "{e}");
        let e = parse_behavior(br#"{"delay_ms":3}"#).unwrap_err();
        assert!(e.contains("missing field `fault`"), "{e}");
    }
}
