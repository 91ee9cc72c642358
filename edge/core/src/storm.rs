//! [E-STORM] Retry-storm limits: seed 000's frontends retried degraded answers five times a
//! page load and turned 2,400 req/s into 12,000. A client repeating the same request more
//! than `max_retries` times within the window is answered 429 `ERR_RETRY_STORM_DETECTED`.
//!
//! The counting is done by the Workers Rate Limiting binding (configured by the compiler
//! with `limit = max_retries + 1` per `window`); this module decides *what* is counted. The
//! key is the client — its verified identity, else its address — and the request's
//! fingerprint (method, route and parameters), both hashed: a client browsing different
//! pages is not a storm, and no raw user ID or address reaches the binding.

use sha2::{Digest, Sha256};

use crate::policy::Storm;
use crate::request::Params;

/// The requests allowed per window: the first one plus `max_retries` retries.
pub fn limit(storm: &Storm) -> u32 {
    storm.max_retries.saturating_add(1)
}

/// Who is asking, as well as the edge can tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Client<'a> {
    /// The subject of a verified token.
    Verified(&'a str),
    /// The connecting address (`CF-Connecting-IP`).
    Address(&'a str),
    Unknown,
}

/// The rate-limit key for this client repeating this request.
pub fn key(client: Client<'_>, method: &str, route: &str, params: &Params) -> String {
    let mut h = Sha256::new();
    let (kind, who) = match client {
        Client::Verified(s) => ("sub", s),
        Client::Address(a) => ("ip", a),
        Client::Unknown => ("anon", ""),
    };
    for part in [kind, who, method, route] {
        h.update(part.as_bytes());
        h.update([0]);
    }
    for v in &params.values {
        h.update(v.name.as_bytes());
        h.update([0]);
        h.update(v.value.as_bytes());
        h.update([0]);
    }
    format!("storm:{}", hex::encode(&h.finalize()[..16]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::ParamValue;

    fn params(q: &str) -> Params {
        Params {
            values: vec![ParamValue {
                name: "q".into(),
                value: q.into(),
                identity: false,
            }],
        }
    }

    #[test]
    fn seed_000_allows_the_first_request_and_two_retries() {
        let s = Storm {
            binding: "STORM".into(),
            max_retries: 2,
            window_ms: 10_000,
        };
        assert_eq!(limit(&s), 3);
    }

    #[test]
    fn the_same_request_from_the_same_client_shares_a_key() {
        let a = key(
            Client::Verified("alice"),
            "GET",
            "/v1/search",
            &params("shoes"),
        );
        let b = key(
            Client::Verified("alice"),
            "GET",
            "/v1/search",
            &params("shoes"),
        );
        assert_eq!(a, b);
        assert!(!a.contains("alice"), "no raw identity in the key");
    }

    #[test]
    fn other_clients_or_other_requests_do_not() {
        let base = key(
            Client::Verified("alice"),
            "GET",
            "/v1/search",
            &params("shoes"),
        );
        assert_ne!(
            base,
            key(
                Client::Verified("bob"),
                "GET",
                "/v1/search",
                &params("shoes")
            )
        );
        assert_ne!(
            base,
            key(
                Client::Verified("alice"),
                "GET",
                "/v1/search",
                &params("hats")
            )
        );
        assert_ne!(
            base,
            key(
                Client::Address("alice"),
                "GET",
                "/v1/search",
                &params("shoes")
            ),
            "an address never collides with a subject"
        );
        // Separators keep ("ab","c") and ("a","bc") apart.
        assert_ne!(
            key(Client::Address("ab"), "c", "/", &Params::default()),
            key(Client::Address("a"), "bc", "/", &Params::default())
        );
    }
}
