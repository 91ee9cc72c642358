//! [E-LIVE] [E-DISCLOSE] [E-NOFALLBACK] How an answer says what it is. A fallback answer is
//! useful only if nobody mistakes it for the model's: every one carries the full disclosure
//! set in headers and body, and none can claim to be live or personalised ([`Fallback`] has
//! no field to say so; the proptest below holds the rendered form to it).
//!
//! Errors use one envelope, `{code, message, correlationId, retryable}`.

use crate::cascade::Fallback;
use crate::classify::{Failure, Items};
use crate::policy::Policy;

/// The request's answer, before it is rendered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    Live {
        items: Items,
        personalized: bool,
    },
    Fallback(Fallback),
    /// No tier answered: 504 when the time ran out, 503 otherwise. Never a made-up success.
    Unavailable {
        failure: Failure,
        timed_out: bool,
    },
    /// The origin refused the caller's request ([`crate::classify::Class::Caller`]) and the
    /// policy passes that through: the origin's status with the error envelope,
    /// `retryable: false`.
    Rejected {
        failure: Failure,
    },
}

/// What the adapter turns into a `Response`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: String,
}

impl Rendered {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Response-wide facts.
#[derive(Debug, Clone, Copy)]
pub struct Meta<'a> {
    pub correlation_id: &'a str,
    /// `X-Policy-Version`: the bake's release ID.
    pub policy_version: &'a str,
    /// The request carried credentials (`Authorization`, `Cookie` or a verified token): a
    /// degraded answer to it is never stored by a shared cache (see [`shareable`]).
    pub credentialed: bool,
}

/// `Cache-Control` of errors: an error must not be cached by anyone.
pub const NO_STORE: &str = "no-store";

fn common(meta: &Meta<'_>) -> Vec<(&'static str, String)> {
    vec![
        ("Content-Type", "application/json".into()),
        ("X-Correlation-ID", meta.correlation_id.into()),
        ("X-Policy-Version", meta.policy_version.into()),
    ]
}

/// Renders an answer.
pub fn render(answer: &Answer, policy: &Policy, meta: &Meta<'_>) -> Rendered {
    match answer {
        Answer::Live {
            items,
            personalized,
        } => live(items, *personalized, policy, meta),
        Answer::Fallback(f) => fallback(f, policy, meta),
        Answer::Rejected { failure } => {
            let status = failure
                .status
                .filter(|s| (400..500).contains(s))
                .unwrap_or(400);
            let message = format!(
                "the model refused this request (HTTP {status}); it will fail again unless the request changes"
            );
            let mut r = error(status, "ORIGIN_REJECTED_REQUEST", &message, false, meta);
            r.headers.push(("X-Degraded", "false".into()));
            r.headers.push(("X-Result-Source", "origin".into()));
            r
        }
        Answer::Unavailable { failure, timed_out } => {
            // Whether calling again can help: not when the model refused the edge's own
            // credential — no caller can fix that, and a Retry-After would invite a storm
            // of requests that all fail the same way.
            let retryable = failure.reason.class().retry_helps();
            let (status, code, message) = match (*timed_out, retryable) {
                (true, _) => (
                    504,
                    "DEPENDENCY_TIMEOUT",
                    "the model did not answer in time and no fallback could",
                ),
                (false, true) => (
                    503,
                    "DEPENDENCY_UNAVAILABLE",
                    "the model is unavailable and no fallback could answer",
                ),
                (false, false) => (
                    503,
                    "DEPENDENCY_UNAVAILABLE",
                    "the model refused the edge's credential and no fallback could answer; retrying will not help until the credential is fixed",
                ),
            };
            let mut r = error(status, code, message, retryable, meta);
            r.headers.push(("X-Degraded", "true".into()));
            r.headers
                .push(("X-Degraded-Reason", failure.reason.code().into()));
            if retryable {
                r.headers.push((
                    "Retry-After",
                    retry_after(policy, failure.retry_after_s).to_string(),
                ));
            }
            r
        }
    }
}

fn live(items: &[String], personalized: bool, policy: &Policy, meta: &Meta<'_>) -> Rendered {
    let mut headers = common(meta);
    headers.push(("X-Degraded", "false".into()));
    headers.push(("X-Result-Source", "origin".into()));
    headers.push((
        "Cache-Control",
        policy.disclosure.live_cache_control.clone(),
    ));
    let fields = if policy.disclosure.body_fields {
        format!(",\"degraded\":false,\"is_personalized\":{personalized},\"source\":\"origin\",\"tier\":null")
    } else {
        String::new()
    };
    Rendered {
        status: 200,
        headers,
        body: format!("{{\"items\":[{}]{fields}}}", items.join(",")),
    }
}

/// Fallback bodies always carry the disclosure fields, whatever `body_fields` says: the spec
/// makes them part of every degraded answer.
fn fallback(f: &Fallback, policy: &Policy, meta: &Meta<'_>) -> Rendered {
    let mut headers = common(meta);
    headers.push(("X-Degraded", "true".into()));
    headers.push(("X-Degraded-Reason", f.reason.code().into()));
    headers.push(("X-Result-Source", "fallback".into()));
    headers.push(("X-Fallback-Tier", f.tier.clone()));
    headers.push(("X-Result-Age", (f.age_ms / 1000).to_string()));
    headers.push(("Retry-After", retry_after(policy, None).to_string()));
    // A per-user answer is private even if the policy forgot to say so (the compiler refuses
    // such a policy; this is the edge's own belt).
    let cc = match (&f.cache_control, f.per_user) {
        (Some(cc), true) if !cc.contains("private") => {
            policy.disclosure.private_cache_control.clone()
        }
        (Some(cc), _) => cc.clone(),
        (None, true) => policy.disclosure.private_cache_control.clone(),
        (None, false) => NO_STORE.to_string(),
    };
    let cc = if meta.credentialed {
        shareable(&cc)
    } else {
        cc
    };
    headers.push(("Cache-Control", cc));
    if f.catalog_expired {
        headers.push(("X-Catalog-Expired", "true".into()));
    }
    let body = format!(
        "{{\"items\":[{}],\"degraded\":true,\"is_personalized\":false,\"source\":\"fallback\",\"tier\":{}}}",
        f.items.join(","),
        json_string(&f.tier)
    );
    Rendered {
        status: 200,
        headers,
        body,
    }
}

/// RFC 9111 §3.5 lets a shared cache store a response to a request that carried
/// `Authorization` when the response says `public`, `s-maxage` or `must-revalidate` — and
/// CDNs commonly key nothing on `Cookie`. An answer the edge chose for a credentialed request
/// must not be replayed by a shared cache to someone else, so its `Cache-Control` becomes
/// `private`: `public` and `s-maxage` are dropped, `private` is added (the client's own
/// cache may still keep it for `max-age`). `Vary: Authorization, Cookie` would also be
/// correct, but it splits shared caches per credential — which is `private` with extra
/// storage — and several CDNs (Cloudflare's among them) ignore `Vary` for such headers.
pub fn shareable(cc: &str) -> String {
    let mut parts: Vec<&str> = cc
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .filter(|d| {
            let name = d.split('=').next().unwrap_or("").trim();
            !name.eq_ignore_ascii_case("public") && !name.eq_ignore_ascii_case("s-maxage")
        })
        .collect();
    let private_or_no_store = parts.iter().any(|d| {
        let name = d.split('=').next().unwrap_or("").trim();
        name.eq_ignore_ascii_case("private") || name.eq_ignore_ascii_case("no-store")
    });
    if !private_or_no_store {
        parts.insert(0, "private");
    }
    parts.join(", ")
}

/// `Retry-After` seconds: the policy's, or the origin's when it asked for longer (a 429 with
/// `Retry-After`); 1 s when the policy names none (un-throttled degradation is forbidden).
fn retry_after(policy: &Policy, origin_s: Option<u64>) -> u64 {
    let own = policy.disclosure.retry_after_s.map(u64::from).unwrap_or(1);
    match origin_s {
        Some(o) if policy.origin.honor_retry_after => own.max(o.min(3_600)),
        _ => own,
    }
}

/// The error envelope.
pub fn error(status: u16, code: &str, message: &str, retryable: bool, meta: &Meta<'_>) -> Rendered {
    let mut headers = common(meta);
    headers.push(("Cache-Control", NO_STORE.into()));
    let body = format!(
        "{{\"code\":{},\"message\":{},\"correlationId\":{},\"retryable\":{retryable}}}",
        json_string(code),
        json_string(message),
        json_string(meta.correlation_id)
    );
    Rendered {
        status,
        headers,
        body,
    }
}

/// The bake is missing or corrupt: 503 `BAKE_INVALID`, with no policy to consult.
pub fn bake_invalid(message: &str, correlation_id: &str) -> Rendered {
    let meta = Meta {
        correlation_id,
        policy_version: "none",
        credentialed: false,
    };
    let mut r = error(503, "BAKE_INVALID", message, false, &meta);
    r.headers.push(("Retry-After", "60".into()));
    r
}

fn json_string(s: &str) -> String {
    serde_json::Value::from(s).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classify::{Failure, FailureReason};
    use crate::testing::seed_policy;
    use proptest::prelude::*;
    use serde_json::Value;

    const META: Meta<'static> = Meta {
        correlation_id: "cid-1",
        policy_version: "rel-abc",
        credentialed: false,
    };

    fn fb(tier: &str, per_user: bool, cc: Option<&str>) -> Fallback {
        Fallback {
            items: vec![r#"{"sku":"1"}"#.into()],
            tier: tier.into(),
            reason: FailureReason::MlTimeout,
            age_ms: 7_500,
            per_user,
            cache_control: cc.map(Into::into),
            catalog_expired: false,
        }
    }

    fn body(r: &Rendered) -> Value {
        serde_json::from_str(&r.body).unwrap()
    }

    #[test]
    fn live_answers_say_so() {
        let r = render(
            &Answer::Live {
                items: vec!["1".into()],
                personalized: true,
            },
            &seed_policy(),
            &META,
        );
        assert_eq!(r.status, 200);
        assert_eq!(r.header("X-Degraded"), Some("false"));
        assert_eq!(r.header("X-Result-Source"), Some("origin"));
        assert_eq!(r.header("X-Correlation-ID"), Some("cid-1"));
        assert_eq!(r.header("X-Policy-Version"), Some("rel-abc"));
        assert_eq!(r.header("Cache-Control"), Some("private, no-store"));
        assert_eq!(r.header("X-Fallback-Tier"), None);
        let b = body(&r);
        assert_eq!(b["items"], serde_json::json!([1]));
        assert_eq!(
            (b["degraded"].as_bool(), b["is_personalized"].as_bool()),
            (Some(false), Some(true))
        );
    }

    #[test]
    fn fallback_answers_carry_the_full_disclosure_set() {
        let r = render(
            &Answer::Fallback(fb("user", true, Some("private, max-age=30"))),
            &seed_policy(),
            &META,
        );
        for (h, v) in [
            ("X-Degraded", "true"),
            ("X-Degraded-Reason", "ML_TIMEOUT"),
            ("X-Result-Source", "fallback"),
            ("X-Fallback-Tier", "user"),
            ("X-Result-Age", "7"),
            ("Retry-After", "5"),
            ("Cache-Control", "private, max-age=30"),
            ("X-Policy-Version", "rel-abc"),
            ("X-Correlation-ID", "cid-1"),
        ] {
            assert_eq!(r.header(h), Some(v), "{h}");
        }
        let b = body(&r);
        assert_eq!(b["degraded"], true);
        assert_eq!(b["is_personalized"], false);
        assert_eq!(b["source"], "fallback");
        assert_eq!(b["tier"], "user");
    }

    #[test]
    fn per_user_answers_are_private_even_if_misconfigured() {
        let r = render(
            &Answer::Fallback(fb("user", true, Some("public, max-age=30"))),
            &seed_policy(),
            &META,
        );
        assert_eq!(r.header("Cache-Control"), Some("private, max-age=30"));
        let r = render(
            &Answer::Fallback(fb("cat", false, None)),
            &seed_policy(),
            &META,
        );
        assert_eq!(r.header("Cache-Control"), Some("no-store"));
    }

    #[test]
    fn a_shared_answer_to_a_credentialed_request_is_private() {
        let meta = Meta {
            credentialed: true,
            ..META
        };
        let r = render(
            &Answer::Fallback(fb("cat", false, Some("public, max-age=30"))),
            &seed_policy(),
            &meta,
        );
        assert_eq!(r.header("Cache-Control"), Some("private, max-age=30"));
        let r = render(
            &Answer::Fallback(fb("cat", false, Some("public, max-age=30"))),
            &seed_policy(),
            &META,
        );
        assert_eq!(r.header("Cache-Control"), Some("public, max-age=30"));
        assert_eq!(shareable("max-age=30, s-maxage=60"), "private, max-age=30");
        assert_eq!(shareable("no-store"), "no-store");
        assert_eq!(shareable("private, max-age=5"), "private, max-age=5");
    }

    #[test]
    fn a_rejected_request_keeps_the_origin_status_and_is_not_retryable() {
        let mut f = Failure::new(FailureReason::Ml4xx, "origin answered 404");
        f.status = Some(404);
        let r = render(&Answer::Rejected { failure: f }, &seed_policy(), &META);
        assert_eq!(r.status, 404);
        let b = body(&r);
        assert_eq!(b["code"], "ORIGIN_REJECTED_REQUEST");
        assert_eq!(b["retryable"], false);
        assert_eq!(b["correlationId"], "cid-1");
        assert_eq!(r.header("X-Result-Source"), Some("origin"));
        assert_eq!(r.header("Retry-After"), None);
    }

    #[test]
    fn no_fallback_is_504_or_503_with_the_envelope() {
        let p = seed_policy();
        let mut f = Failure::new(FailureReason::MlTimeout, "t");
        let r = render(
            &Answer::Unavailable {
                failure: f.clone(),
                timed_out: true,
            },
            &p,
            &META,
        );
        assert_eq!(r.status, 504);
        let b = body(&r);
        assert_eq!(b["code"], "DEPENDENCY_TIMEOUT");
        assert_eq!(b["correlationId"], "cid-1");
        assert_eq!(b["retryable"], true);
        assert!(b["message"].is_string());
        assert_eq!(r.header("Retry-After"), Some("5"));
        assert_eq!(r.header("Cache-Control"), Some("no-store"));
        f.reason = FailureReason::Ml429;
        f.retry_after_s = Some(30);
        let r = render(
            &Answer::Unavailable {
                failure: f,
                timed_out: false,
            },
            &p,
            &META,
        );
        assert_eq!(r.status, 503);
        assert_eq!(body(&r)["code"], "DEPENDENCY_UNAVAILABLE");
        assert_eq!(r.header("Retry-After"), Some("30"));
        assert_eq!(r.header("X-Degraded-Reason"), Some("ML_429"));
    }

    /// Issue 23: `ML_AUTH` with no tier left answered `retryable: true` and `Retry-After: 5`,
    /// though no caller can fix a credential the model refuses (docs/observability.md).
    #[test]
    fn a_refused_credential_with_no_tier_left_is_not_retryable() {
        let p = seed_policy();
        let mut f = Failure::new(FailureReason::MlAuth, "origin answered 401");
        f.status = Some(401);
        let r = render(
            &Answer::Unavailable {
                failure: f,
                timed_out: false,
            },
            &p,
            &META,
        );
        assert_eq!(r.status, 503);
        let b = body(&r);
        assert_eq!(b["code"], "DEPENDENCY_UNAVAILABLE");
        assert_eq!(b["retryable"], false);
        assert_eq!(r.header("Retry-After"), None, "nothing to wait for");
        assert_eq!(r.header("X-Degraded-Reason"), Some("ML_AUTH"));
    }

    #[test]
    fn bake_invalid_and_bad_request_envelopes() {
        let r = bake_invalid("the section is corrupt \"x\"", "cid-2");
        assert_eq!(r.status, 503);
        let b = body(&r);
        assert_eq!(
            (b["code"].as_str(), b["retryable"].as_bool()),
            (Some("BAKE_INVALID"), Some(false))
        );
        assert_eq!(b["correlationId"], "cid-2");
        let r = error(
            400,
            "PARAM_MISSING",
            "query parameter `q` is required",
            false,
            &META,
        );
        assert_eq!(body(&r)["message"], "query parameter `q` is required");
    }

    fn reasons() -> impl Strategy<Value = FailureReason> {
        prop::sample::select(FailureReason::ALL.to_vec())
    }

    proptest! {
        #[test]
        fn no_fallback_answer_claims_live_or_personalised(
            tier in "[a-z\"\\\\ ]{0,12}",
            per_user in any::<bool>(),
            cc in prop::option::of("[a-z=, -]{0,20}"),
            age in any::<u64>(),
            reason in reasons(),
            expired in any::<bool>(),
            body_fields in any::<bool>(),
            n in 0usize..4,
        ) {
            let mut p = seed_policy();
            p.disclosure.body_fields = body_fields;
            let f = Fallback {
                items: (0..n).map(|i| format!("{{\"i\":{i}}}")).collect(),
                tier, reason, age_ms: age, per_user, cache_control: cc, catalog_expired: expired,
            };
            let r = render(&Answer::Fallback(f.clone()), &p, &META);
            let b: Value = serde_json::from_str(&r.body).unwrap();
            prop_assert_eq!(r.header("X-Degraded"), Some("true"));
            prop_assert_eq!(r.header("X-Result-Source"), Some("fallback"));
            prop_assert_eq!(r.header("X-Degraded-Reason"), Some(reason.code()));
            prop_assert!(r.header("Retry-After").is_some());
            prop_assert!(r.header("Cache-Control").is_some());
            prop_assert!(r.header("X-Result-Age").is_some());
            prop_assert_eq!(r.header("X-Fallback-Tier"), Some(f.tier.as_str()));
            prop_assert_eq!(&b["degraded"], &Value::Bool(true));
            prop_assert_eq!(&b["is_personalized"], &Value::Bool(false));
            prop_assert_eq!(&b["source"], "fallback");
            if per_user {
                prop_assert!(r.header("Cache-Control").unwrap().contains("private"));
            }
        }
    }
}
