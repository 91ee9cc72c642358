//! [E-OBSERVE] The admin status endpoint: this isolate's breaker mode and transitions, its
//! counters and the degraded share, for a caller holding the admin bearer token (compared in
//! constant time; a missing secret admits nobody).

use serde_json::json;

use crate::breaker::Breaker;
use crate::disclosure::{self, Meta, Rendered};
use crate::metrics::Counters;
use crate::time::Millis;
use crate::token;

/// Constant-time comparison of two byte strings (length leaks, content does not).
fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Whether `authorization` carries the admin token `expected`.
pub fn authorized(authorization: Option<&str>, expected: Option<&str>) -> bool {
    let expected = expected.unwrap_or("");
    let given = authorization.and_then(token::bearer).unwrap_or("");
    !expected.is_empty() && same(given.as_bytes(), expected.as_bytes())
}

pub fn unauthorized(meta: &Meta<'_>) -> Rendered {
    let mut r = disclosure::error(
        401,
        "ADMIN_UNAUTHORIZED",
        "the status endpoint needs the admin bearer token",
        false,
        meta,
    );
    r.headers.push(("WWW-Authenticate", "Bearer".into()));
    r
}

/// The status endpoint's `breaker`: its mode as of `now`, its transitions and its scope
/// (with the fleet's view when it is fleet-scoped).
pub fn breaker_status(breaker: &mut Breaker, now: Millis) -> serde_json::Value {
    let mode = breaker.mode_name(now);
    let transitions: Vec<_> = breaker
        .transitions()
        .iter()
        .map(|t| {
            let mut j =
                json!({"at_ms": t.at.0, "from": breaker.name(t.from), "to": breaker.name(t.to)});
            if let Some(e) = &t.evidence {
                j["evidence"] = e.json();
            }
            j
        })
        .collect();
    let mut breaker_json = json!({"mode": mode, "transitions": transitions, "scope": "isolate"});
    if let Some(m) = breaker.member() {
        breaker_json["scope"] = json!("fleet");
        breaker_json["fleet"] = m.status(now);
    }
    breaker_json
}

/// The status endpoint's body: `breaker` ([`breaker_status`]), `counters`, `freshness`.
pub fn status(
    service: &str,
    breaker: serde_json::Value,
    counters: &Counters,
    freshness: serde_json::Value,
    meta: &Meta<'_>,
) -> Rendered {
    let body = json!({
        "release_id": meta.policy_version,
        "service": service,
        "breaker": breaker,
        "counters": counters,
        "degraded_share": counters.degraded_share(),
        "freshness": freshness,
        "scope": "this isolate",
    });
    Rendered {
        status: 200,
        headers: vec![
            ("Content-Type", "application/json".into()),
            ("Cache-Control", "no-store".into()),
            ("X-Correlation-ID", meta.correlation_id.to_string()),
            ("X-Policy-Version", meta.policy_version.to_string()),
        ],
        body: body.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_exact_token_is_admitted() {
        assert!(authorized(Some("Bearer abc"), Some("abc")));
        assert!(!authorized(Some("Bearer abd"), Some("abc")));
        assert!(!authorized(Some("Bearer ab"), Some("abc")));
        assert!(!authorized(None, Some("abc")));
        assert!(
            !authorized(Some("Bearer "), Some("")),
            "no secret admits nobody"
        );
        assert!(!authorized(Some("Bearer x"), None));
    }
}
