//! Requests answered before the model or the cascade is considered: the admin status
//! endpoint (behind its secret) and [E-STORM] retry-storm limiting.

use serde_json::json;
use understudy_core::breaker::Breaker;
use understudy_core::disclosure::{self, Meta, Rendered};
use understudy_core::metrics::Counters;
use understudy_core::policy::Policy;
use understudy_core::request::Params;
use understudy_core::storm::{self, Client};
use understudy_core::Millis;
use worker::{console_log, Env};

/// Constant-time comparison of two byte strings (length leaks, content does not).
fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The admin status endpoint: breaker mode and counters, for a caller holding the admin
/// token. `None` when the request is not for it.
pub fn admin(
    path: &str,
    headers: &[(String, String)],
    env: &Env,
    policy: &Policy,
    breaker: &mut Breaker,
    now: Millis,
    meta: &Meta<'_>,
) -> Option<Rendered> {
    let admin = policy.admin.as_ref()?;
    if path != admin.path {
        return None;
    }
    let expected = env
        .secret(&admin.secret)
        .map(|s| s.to_string())
        .unwrap_or_default();
    let given = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("authorization"))
        .and_then(|(_, v)| understudy_core::token::bearer(v))
        .unwrap_or("");
    if expected.is_empty() || !same(given.as_bytes(), expected.as_bytes()) {
        let mut r = disclosure::error(
            401,
            "ADMIN_UNAUTHORIZED",
            "the status endpoint needs the admin bearer token",
            false,
            meta,
        );
        r.headers.push(("WWW-Authenticate", "Bearer".into()));
        return Some(r);
    }
    let mode = breaker.mode_name(now);
    let transitions: Vec<_> = breaker
        .transitions()
        .iter()
        .map(|t| json!({"at_ms": t.at.0, "from": breaker.name(t.from), "to": breaker.name(t.to)}))
        .collect();
    let counters: Counters = crate::isolate::with_counters(|c| c.clone());
    let body = json!({
        "release_id": meta.policy_version,
        "service": policy.service.name,
        "breaker": {"mode": mode, "transitions": transitions},
        "counters": counters,
        "degraded_share": counters.degraded_share(),
        "scope": "this isolate",
    });
    Some(Rendered {
        status: 200,
        headers: vec![
            ("Content-Type", "application/json".into()),
            ("Cache-Control", "no-store".into()),
            ("X-Correlation-ID", meta.correlation_id.to_string()),
            ("X-Policy-Version", meta.policy_version.to_string()),
        ],
        body: body.to_string(),
    })
}

/// [E-STORM] Counts this request against the client's retry allowance; `Some(429)` when
/// the client is over it. A limiter that cannot be reached lets the request through (it
/// protects the origin; it must not become a new way to fail) and says so in the log.
pub async fn storm(
    env: &Env,
    policy: &Policy,
    method: &str,
    headers: &[(String, String)],
    subject: Option<&str>,
    params: &Params,
    meta: &Meta<'_>,
) -> Option<Rendered> {
    let s = policy.storm.as_ref()?;
    let address = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("cf-connecting-ip"))
        .map(|(_, v)| v.as_str());
    let client = match (subject, address) {
        (Some(sub), _) => Client::Verified(sub),
        (None, Some(ip)) => Client::Address(ip),
        (None, None) => Client::Unknown,
    };
    let key = storm::key(client, method, &policy.service.route, params);
    let outcome = match env.rate_limiter(&s.binding) {
        Ok(limiter) => limiter.limit(key).await,
        Err(e) => Err(e),
    };
    match outcome {
        Ok(o) if o.success => None,
        Ok(_) => {
            let retry_after = (s.window_ms / 1000).max(1);
            let mut r = disclosure::error(
                429,
                "ERR_RETRY_STORM_DETECTED",
                &format!(
                    "more than {} retries of this request within {} s; retry after {retry_after} s",
                    s.max_retries,
                    s.window_ms / 1000
                ),
                true,
                meta,
            );
            r.headers
                .retain(|(k, _)| !k.eq_ignore_ascii_case("retry-after"));
            r.headers.push(("Retry-After", retry_after.to_string()));
            Some(r)
        }
        Err(e) => {
            console_log!(
                "{}",
                json!({"event": "storm_limiter_unavailable", "binding": s.binding, "error": e.to_string()})
            );
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::same;

    #[test]
    fn comparison_needs_equal_bytes() {
        assert!(same(b"abc", b"abc"));
        assert!(!same(b"abc", b"abd"));
        assert!(!same(b"abc", b"ab"));
    }
}
