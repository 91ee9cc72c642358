//! [E-RACE] [E-SECRET] [E-CORR] The requests the edge sends: the origin call with the
//! validated parameters (query string, or a JSON body for methods with one), the correlation
//! ID, the trace context, the client's idempotency key and the origin credential — and an
//! HTTP tier's call with its own credential only, never the origin's, and no user
//! parameters.

use super::trace::{Trace, TRACEPARENT, TRACESTATE};
use crate::correlation;
use crate::http::{Credential, Outbound};
use crate::policy::{Method, Policy};
use crate::request::Params;

/// What every request the edge sends carries.
pub struct Common<'a> {
    pub correlation_id: &'a str,
    pub trace: &'a Trace,
}

fn base_headers(c: &Common<'_>) -> Vec<(String, String)> {
    let mut h = vec![
        ("Accept".to_string(), "application/json".to_string()),
        (
            correlation::HEADER.to_string(),
            c.correlation_id.to_string(),
        ),
        (TRACEPARENT.to_string(), c.trace.traceparent()),
    ];
    if let Some(state) = &c.trace.state {
        h.push((TRACESTATE.to_string(), state.clone()));
    }
    h
}

fn has_body(m: Method) -> bool {
    matches!(m, Method::Post | Method::Put | Method::Patch)
}

/// The origin call.
pub fn origin(
    policy: &Policy,
    url: &str,
    params: &Params,
    common: &Common<'_>,
    idempotency_key: Option<&str>,
    credential: Option<&Credential>,
) -> Outbound {
    let o = &policy.origin;
    let mut headers = base_headers(common);
    if let Some(c) = credential {
        headers.push((c.header.clone(), c.value.clone()));
    }
    if let (Some(h), Some(k)) = (&o.idempotency_key_header, idempotency_key) {
        headers.push((h.clone(), k.to_string()));
    }
    let (url, body) = if has_body(o.method) {
        headers.push(("Content-Type".into(), "application/json".into()));
        // Inserted, not collected: a collect into a map sorts first (`crate::sort`).
        let mut body = serde_json::Map::new();
        for v in &params.values {
            body.insert(v.name.clone(), serde_json::Value::from(v.value.as_str()));
        }
        (
            without_fragment(url).to_string(),
            Some(serde_json::Value::Object(body).to_string()),
        )
    } else {
        (with_query(url, params), None)
    };
    Outbound {
        url,
        method: o.method,
        headers,
        body,
        max_body_bytes: o.max_body_bytes,
    }
}

/// An HTTP tier's call: its own credential (in `Authorization`), nothing of the user's.
pub fn tier(
    url: &str,
    common: &Common<'_>,
    credential: Option<&str>,
    max_body_bytes: u64,
) -> Outbound {
    let mut headers = base_headers(common);
    if let Some(secret) = credential {
        let c = Credential::new("Authorization", secret);
        headers.push((c.header, c.value));
    }
    Outbound {
        url: without_fragment(url).to_string(),
        method: Method::Get,
        headers,
        body: None,
        max_body_bytes,
    }
}

fn without_fragment(url: &str) -> &str {
    url.split('#').next().unwrap_or(url)
}

/// `url` with the parameters appended to its query, form-encoded.
fn with_query(url: &str, params: &Params) -> String {
    let base = without_fragment(url);
    if params.values.is_empty() {
        return base.to_string();
    }
    let mut q = form_urlencoded::Serializer::new(String::new());
    for v in &params.values {
        q.append_pair(&v.name, &v.value);
    }
    let sep = match base.find('?') {
        None => "?",
        Some(i) if i + 1 == base.len() || base.ends_with('&') => "",
        Some(_) => "&",
    };
    format!("{base}{sep}{}", q.finish())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::rng::Rng;
    use crate::policy::Method;
    use crate::request::ParamValue;
    use crate::testing::seed_policy;

    fn params() -> Params {
        Params {
            values: vec![
                ParamValue {
                    name: "user_id".into(),
                    value: "al ice&x".into(),
                    identity: true,
                },
                ParamValue {
                    name: "category".into(),
                    value: "audio".into(),
                    identity: false,
                },
            ],
        }
    }

    fn common_parts() -> (String, Trace) {
        let trace = Trace::resolve(None, None, &mut Rng::new(5));
        ("cid-1".into(), trace)
    }

    #[test]
    fn a_get_origin_carries_the_parameters_in_the_query() {
        let (cid, trace) = common_parts();
        let c = Common {
            correlation_id: &cid,
            trace: &trace,
        };
        let cred = Credential::new("Authorization", "s3cret");
        let r = origin(
            &seed_policy(),
            "https://model.internal/recommend?v=2#frag",
            &params(),
            &c,
            None,
            Some(&cred),
        );
        assert_eq!(
            r.url,
            "https://model.internal/recommend?v=2&user_id=al+ice%26x&category=audio"
        );
        assert_eq!(r.body, None);
        assert_eq!(r.header("authorization"), Some("Bearer s3cret"));
        assert_eq!(r.header("x-correlation-id"), Some("cid-1"));
        assert_eq!(r.header("traceparent"), Some(trace.traceparent().as_str()));
    }

    #[test]
    fn a_post_origin_carries_a_json_body_and_the_idempotency_key() {
        let mut p = seed_policy();
        p.origin.method = Method::Post;
        p.origin.idempotency_key_header = Some("Idempotency-Key".into());
        p.origin.credential_header = "X-Api-Key".into();
        let (cid, trace) = common_parts();
        let c = Common {
            correlation_id: &cid,
            trace: &trace,
        };
        let cred = Credential::new(&p.origin.credential_header, "k");
        let r = origin(
            &p,
            "https://m.example/x",
            &params(),
            &c,
            Some("key-1"),
            Some(&cred),
        );
        assert_eq!(r.url, "https://m.example/x");
        let body: serde_json::Value = serde_json::from_str(r.body.as_deref().unwrap()).unwrap();
        assert_eq!(body["user_id"], "al ice&x");
        assert_eq!(r.header("idempotency-key"), Some("key-1"));
        assert_eq!(r.header("x-api-key"), Some("k"));
        assert_eq!(r.header("content-type"), Some("application/json"));
    }

    #[test]
    fn a_tier_request_never_carries_the_origin_credential_or_user_parameters() {
        let (cid, trace) = common_parts();
        let c = Common {
            correlation_id: &cid,
            trace: &trace,
        };
        let r = tier(
            "https://small-model.example/top",
            &c,
            Some("tier-key"),
            1024,
        );
        assert_eq!(r.header("authorization"), Some("Bearer tier-key"));
        assert_eq!(r.url, "https://small-model.example/top");
        let none = tier("https://small-model.example/top", &c, None, 1024);
        assert_eq!(none.header("authorization"), None);
    }
}
