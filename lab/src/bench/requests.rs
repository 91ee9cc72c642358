//! The requests the bench sends: the policy's sample request, signed for a given user, and
//! one the edge refuses before any I/O.

use serde_json::{json, Value};
use understudy_core::policy::{ParamSource, Policy};
use understudy_core::Millis;

use crate::drill::driver::Planned;
use crate::drill::edge::dev_secret;

/// `req` with a method the policy's route does not take: the edge answers 405 from the
/// engine's first step, before any I/O.
pub(super) fn refused_before_io(policy: &Policy, req: &Planned) -> Planned {
    use understudy_core::policy::Method;
    let method = Method::ALL
        .iter()
        .find(|(_, m)| !policy.service.methods.contains(m))
        .map_or("TRACE", |(name, _)| name);
    Planned {
        method: method.to_string(),
        ..req.clone()
    }
}

/// One request of the policy, signed when it carries a token; `subject` replaces the
/// identity claim (a user with nothing cached).
pub(super) fn request(
    policy: &Policy,
    catalog: Option<&understudy_core::catalog::Catalog>,
    subject: Option<&str>,
) -> Planned {
    let recipe = crate::sample::sample_request(policy, catalog);
    let mut headers: Vec<(String, String)> = recipe["headers"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.to_ascii_lowercase(), v.as_str().unwrap_or("").to_string()))
                .collect()
        })
        .unwrap_or_default();
    if let (Some(secret), Some(claims)) = (
        recipe["token"]["secret"].as_str(),
        recipe["token"]["claims"].as_object(),
    ) {
        let mut claims = claims.clone();
        if let Some(sub) = subject {
            for p in policy
                .params
                .iter()
                .filter(|p| p.identity && p.source == ParamSource::TokenClaim)
            {
                claims.insert(p.from.clone(), json!(sub));
            }
        }
        let now = Millis(crate::drill::epoch_ms()).0 / 1000;
        claims.insert("iat".into(), json!(now));
        claims.insert("exp".into(), json!(now + 3600));
        let token =
            understudy_core::token::sign(&Value::Object(claims), dev_secret(secret).as_bytes());
        headers.push(("authorization".into(), format!("Bearer {token}")));
    }
    Planned {
        index: 0,
        due_us: 0,
        method: recipe["method"].as_str().unwrap_or("GET").to_string(),
        target: recipe["path"].as_str().unwrap_or("/").to_string(),
        headers,
        user: None,
    }
}
