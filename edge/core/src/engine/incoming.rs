//! What the driver hands the engine: the request as received and the environment's bindings,
//! and which request headers the engine reads.

use std::collections::BTreeMap;

use super::trace;
use crate::policy::Policy;

/// What the driver can read from its environment: secret bindings and plain vars.
pub trait Bindings {
    fn secret(&self, name: &str) -> Option<String>;
    fn var(&self, name: &str) -> Option<String>;
    /// Fills `buf` with cryptographically strong random bytes (the seal's nonces); `false`
    /// when the environment has none (the edge then stores nothing and answers 503).
    fn random_bytes(&self, buf: &mut [u8]) -> bool {
        let _ = buf;
        false
    }
}

/// The request as the driver received it, nothing interpreted yet.
#[derive(Debug, Clone, Copy)]
pub struct Incoming<'a> {
    pub method: &'a str,
    /// The URL path, still percent-encoded.
    pub path: &'a str,
    /// The raw query string without `?`.
    pub query: &'a str,
    /// Header names (any case) and values.
    pub headers: &'a [(String, String)],
}

/// The request headers the engine reads whatever the policy (names lower-case): a driver may
/// hand it only these and the policy's own ([`Engine::request_headers`]). A header the
/// engine reads must be listed here; the tests record every name it asks for and check.
pub const READ_HEADERS: &[&str] = &[
    "authorization",
    "cookie",
    "cf-connecting-ip",
    "x-correlation-id",
    trace::TRACEPARENT,
    trace::TRACESTATE,
    "content-length",
    "content-type",
];

#[cfg(test)]
thread_local! {
    /// Every header name [`Incoming::header`] was asked for on this thread (the tests check
    /// them against [`READ_HEADERS`] and the policy's).
    pub(crate) static HEADERS_ASKED: std::cell::RefCell<std::collections::BTreeSet<String>> =
        const { std::cell::RefCell::new(std::collections::BTreeSet::new()) };
}

impl<'a> Incoming<'a> {
    pub fn header(&self, name: &str) -> Option<&'a str> {
        #[cfg(test)]
        HEADERS_ASKED.with(|h| h.borrow_mut().insert(name.to_ascii_lowercase()));
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

pub(super) fn request_headers(policy: &Policy) -> Vec<String> {
    let mut names: Vec<String> = READ_HEADERS.iter().map(|h| h.to_string()).collect();
    let own = policy
        .params
        .iter()
        .filter(|p| p.source == crate::policy::ParamSource::Header)
        .map(|p| p.from.as_str())
        .chain(policy.origin.idempotency_key_header.as_deref());
    for h in own {
        let h = h.to_ascii_lowercase();
        if !names.contains(&h) {
            names.push(h);
        }
    }
    names
}

/// Secret values a test or `simulate` hands the engine.
impl Bindings for BTreeMap<String, String> {
    fn secret(&self, name: &str) -> Option<String> {
        self.get(name).cloned()
    }
    fn var(&self, name: &str) -> Option<String> {
        self.get(name).cloned()
    }
    /// Tests and `simulate`: a fixed pattern (nonces need not be secret, only fresh per
    /// key, and these drivers seal nothing that is kept).
    fn random_bytes(&self, buf: &mut [u8]) -> bool {
        for (i, b) in buf.iter_mut().enumerate() {
            *b = 0x5a ^ i as u8;
        }
        true
    }
}
