//! Each scenario request as the HTTP request a client sends: parameters where the policy
//! reads them, a signed token when they are claims, a correlation ID naming the request.
//! `simulate` hands it to the engine; `drill` sends it to the real edge — the same request.

use std::collections::BTreeMap;

use serde_json::{json, Value};
use understudy_core::policy::{ParamSource, Policy};

use super::scenario::Scenario;

/// One request to send.
#[derive(Debug, Clone)]
pub struct Planned {
    pub index: u64,
    /// When it is due, µs after the start.
    pub due_us: u64,
    pub method: String,
    /// Path and query, e.g. `/v1/recommendations?category=audio`.
    pub target: String,
    pub headers: Vec<(String, String)>,
    /// The identity parameter's value, when the policy has one.
    pub user: Option<String>,
}

impl Planned {
    /// The path and the query string (without `?`).
    pub fn path_and_query(&self) -> (&str, &str) {
        self.target.split_once('?').unwrap_or((&self.target, ""))
    }
}

/// The development value of a secret binding, as scripts/edge-server.mjs sets it
/// (`devSecret`): `dev-` and the name in lower kebab case. `simulate` gives the engine the
/// same values, so tokens the drill signs verify in both.
pub fn dev_secret(name: &str) -> String {
    format!("dev-{}", name.to_ascii_lowercase().replace('_', "-"))
}

/// Percent-encodes everything but RFC 3986 unreserved characters.
pub fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The HTTP request for scenario request `i`. Tokens are signed with the development key,
/// issued at `now_s` (seconds since the epoch) for six hours, and cached per claim set.
pub fn plan(
    policy: &Policy,
    sc: &Scenario,
    i: u64,
    tokens: &mut BTreeMap<String, String>,
    now_s: u64,
) -> Planned {
    let value = |name: &str| sc.param(name, i).map(str::to_string);
    plan_with(policy, i, i * sc.interval_us, value, tokens, now_s)
}

/// [`plan`] for request `i`, due `due_us` after the start, with the value `value` gives
/// each parameter (none: the parameter is not sent).
pub fn plan_with(
    policy: &Policy,
    i: u64,
    due_us: u64,
    value: impl Fn(&str) -> Option<String>,
    tokens: &mut BTreeMap<String, String>,
    now_s: u64,
) -> Planned {
    let mut path = policy.service.route.clone();
    let mut query = Vec::new();
    let mut headers = vec![("x-correlation-id".to_string(), format!("drill-{i}"))];
    let mut claims = serde_json::Map::new();
    let mut user = None;
    for p in &policy.params {
        let Some(v) = value(&p.name) else {
            continue;
        };
        if p.identity {
            user = Some(v.clone());
        }
        match p.source {
            ParamSource::Path => path = path.replace(&format!("{{{}}}", p.from), &encode(&v)),
            ParamSource::Query => query.push(format!("{}={}", encode(&p.from), encode(&v))),
            ParamSource::Header => headers.push((p.from.to_ascii_lowercase(), v)),
            ParamSource::TokenClaim => {
                claims.insert(p.from.clone(), Value::String(v));
            }
        }
    }
    if let Some(id) = &policy.identity {
        let cache_key = Value::Object(claims.clone()).to_string();
        let token = tokens.entry(cache_key).or_insert_with(|| {
            claims.insert("iss".into(), json!(id.issuer));
            claims.insert("aud".into(), json!(id.audience));
            claims.insert("iat".into(), json!(now_s));
            claims.insert("exp".into(), json!(now_s + 6 * 3600));
            understudy_core::token::sign(&Value::Object(claims), dev_secret(&id.secret).as_bytes())
        });
        headers.push(("authorization".into(), format!("Bearer {token}")));
    }
    if !query.is_empty() {
        path = format!("{path}?{}", query.join("&"));
    }
    let method = policy
        .service
        .methods
        .first()
        .map(|m| m.as_str().to_string())
        .unwrap_or_else(|| "GET".into());
    Planned {
        index: i,
        due_us,
        method,
        target: path,
        headers,
        user,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::simulate::scenario::{self, RawScenario};

    #[test]
    fn requests_carry_parameters_where_the_policy_reads_them() {
        let p = crate::fixtures::sample_policy();
        let raw: RawScenario = toml::from_str(
            "name = \"t\"\nstart = \"2026-11-30T12:00:00Z\"\nrequests = 3\ninterval = \"10ms\"\n[params]\ncategory_id = [\"audio\", \"bags\"]\n[model]\nlatency = \"5ms\"\n",
        )
        .expect("scenario");
        let sc = scenario::build(raw, &p).expect("valid");
        let mut tokens = BTreeMap::new();
        let r = plan(&p, &sc, 1, &mut tokens, 0);
        assert_eq!(r.target, "/v1/recommendations?category=bags");
        assert_eq!(r.path_and_query(), ("/v1/recommendations", "category=bags"));
        assert_eq!(r.due_us, 10_000);
        assert!(r
            .headers
            .contains(&("x-correlation-id".into(), "drill-1".into())));
    }

    #[test]
    fn encoding_keeps_unreserved_characters_only() {
        assert_eq!(encode("a b&c=d-e_f.g~"), "a%20b%26c%3Dd-e_f.g~");
        assert_eq!(dev_secret("TOKEN_HMAC_KEY"), "dev-token-hmac-key");
    }
}
