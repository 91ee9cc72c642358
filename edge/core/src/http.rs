//! What the edge sends over HTTP, as plain values: a request the driver performs as it is,
//! and the credential it may carry. Below the engine and the events flows, which both build
//! requests; neither depends on the other for it.

use serde::{Deserialize, Serialize};

/// An HTTP request the driver sends as it is (the engine chose every header).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outbound {
    pub url: String,
    pub method: Method,
    pub headers: Vec<(String, String)>,
    pub body: Option<String>,
    /// Stop reading (and abort) once the body passes this many bytes.
    pub max_body_bytes: u64,
}

impl Outbound {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// The origin credential, resolved from its secret binding: header name and value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credential {
    pub header: String,
    pub value: String,
}

impl Credential {
    /// `Authorization` carries a bearer token; other headers carry the secret as it is.
    pub fn new(header: &str, secret: &str) -> Credential {
        let value = if header.eq_ignore_ascii_case("authorization") {
            format!("Bearer {secret}")
        } else {
            secret.to_string()
        };
        Credential {
            header: header.to_string(),
            value,
        }
    }
}

crate::words! {
    /// An HTTP method the edge routes or sends.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
    pub enum Method {
        Get = "GET",
        Head = "HEAD",
        Post = "POST",
        Put = "PUT",
        Patch = "PATCH",
        Delete = "DELETE",
    }
}

impl Method {
    pub fn parse(s: &str) -> Option<Method> {
        Self::ALL
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(s))
            .map(|(_, m)| *m)
    }

    /// RFC 9110 idempotent methods: retrying them cannot repeat a side effect.
    pub fn is_idempotent(self) -> bool {
        !matches!(self, Method::Post | Method::Patch)
    }
}
