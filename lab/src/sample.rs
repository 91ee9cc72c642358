//! A request the policy accepts, for `dev --demo` and the bench: its route with path
//! parameters filled in, query and header parameters, and the claims of a bearer token when
//! parameters come from one.

use std::collections::BTreeMap;

use serde_json::{json, Value};
pub use understudy_compiler::simulate::request::encode;
use understudy_core::catalog::{tokenize, Catalog};
use understudy_core::policy::{EmbeddedTier, ParamSource, ParamType, Policy, TierKind};

/// Values tried, in order, for a parameter without a usable default: the first that fits
/// its pattern and length is used in the sample request.
const SAMPLES: [&str; 8] = [
    "audio",
    "headphones",
    "demo-user-1",
    "ORD-100042",
    "acme",
    "demo",
    "42",
    "a",
];

/// A request the policy accepts: its route with path parameters filled in, query and
/// header parameters, and the claims of a bearer token when parameters come from one.
pub fn sample_request(policy: &Policy, catalog: Option<&Catalog>) -> Value {
    // Values the baked catalog can answer for: a category it has, a word of a title.
    let mut hints: BTreeMap<&str, String> = BTreeMap::new();
    let first = catalog.and_then(|c| c.items.first());
    for tier in &policy.cascade.tiers {
        match (&tier.kind, first) {
            (TierKind::Embedded(EmbeddedTier::Curated { by: Some(by), .. }), Some(item)) => {
                if let Some(cat) = &item.category {
                    hints.insert(by, cat.clone());
                }
            }
            (TierKind::Embedded(EmbeddedTier::Keyword { query, .. }), Some(item)) => {
                if let Some(word) = tokenize(&item.title).next() {
                    hints.insert(query, word);
                }
            }
            _ => {}
        }
    }
    let mut path = policy.service.route.clone();
    let mut query = Vec::new();
    let mut headers = BTreeMap::new();
    let mut claims = serde_json::Map::new();
    for p in &policy.params {
        let pattern = p
            .pattern
            .as_deref()
            .and_then(|re| regex_lite::Regex::new(re).ok());
        let fits = |v: &str| {
            v.len() <= p.max_len as usize
                && pattern.as_ref().is_none_or(|re| re.is_match(v))
                && (p.ty != ParamType::Integer || v.parse::<i64>().is_ok())
        };
        // A user is `demo-user-1`, not `audio`.
        let preferred = hints.get(p.name.as_str()).map(String::as_str);
        let preferred = preferred
            .into_iter()
            .chain(p.identity.then_some("demo-user-1"));
        let value = match preferred.chain(SAMPLES).find(|v| fits(v)) {
            Some(v) => v.to_string(),
            None if !p.required => continue,
            None => p.default.clone().unwrap_or_else(|| "demo".into()),
        };
        match p.source {
            ParamSource::Path => path = path.replace(&format!("{{{}}}", p.from), &value),
            ParamSource::Query => query.push(format!("{}={}", encode(&p.from), encode(&value))),
            ParamSource::Header => {
                headers.insert(p.from.clone(), value);
            }
            ParamSource::TokenClaim => {
                claims.insert(p.from.clone(), Value::String(value));
            }
        }
    }
    if !query.is_empty() {
        path = format!("{path}?{}", query.join("&"));
    }
    let token = policy.identity.as_ref().map(|id| {
        claims.insert("iss".into(), Value::String(id.issuer.clone()));
        claims.insert("aud".into(), Value::String(id.audience.clone()));
        json!({ "secret": id.secret, "claims": claims })
    });
    let method = policy
        .service
        .methods
        .first()
        .map(|m| m.as_str())
        .unwrap_or("GET");
    json!({ "method": method, "path": path, "headers": headers, "token": token, "fault": { "kind": "hang" } })
}

#[cfg(test)]
mod tests {
    use super::*;
    use understudy_compiler::fixtures::sample_policy;

    #[test]
    fn sample_requests_fit_the_policy() {
        let p = sample_policy();
        let r = sample_request(&p, None);
        assert_eq!(r["method"], "GET");
        assert_eq!(r["path"], "/v1/recommendations?category=audio");
        assert_eq!(r["token"], Value::Null);
    }
}
