//! The I/O the edge's request path performs, each kind declared once: what to start
//! ([`Op`]) and what it produced ([`Done`]). The engine wraps them in its commands and
//! inputs (`engine::Command`, `engine::Input`); the cascade's tiers and the engine's race
//! ask for them; the drivers (the Worker, the virtual driver `simulate` uses) perform them.
//! None of them carries a timeout: when to stop waiting is the engine's decision
//! (docs/adr/010-the-engine-owns-time.md).
//!
//! The durable events' operations (reading the body, calling the outbox shards) are
//! declared by their flow (`events::flow::Io`), next to the code that asks for them.

use serde_json::Value;

use crate::classify::Observed;
use crate::http::Outbound;

/// An operation's handle, unique in the isolate (KV reads are shared between requests).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct IoId(pub u32);

/// An operation the driver performs.
#[derive(Debug, Clone, PartialEq)]
pub enum Op<'p> {
    /// [E-STORM] Count this request against `key` with the Rate Limiting binding `binding`.
    Limit { binding: &'p str, key: String },
    /// [E-RACE] Send the request as it is (an origin attempt, a hedge, an HTTP tier). For a
    /// 2xx read the whole body, stopping (and aborting) past `max_body_bytes`; for any other
    /// status read only the status and `Retry-After`.
    Fetch(Outbound),
    /// [E-CASCADE] Read `key` with its metadata from KV namespace `binding`. The driver
    /// keeps the read for requests that join it until the engine forgets it.
    ReadKv { binding: &'p str, key: String },
}

/// What an operation produced.
#[derive(Debug, Clone, PartialEq)]
pub enum Done {
    /// The rate limiter's verdict (`Ok(true)`: within the limit), or why it could not be
    /// asked (the request then goes through: the limiter must not become a new way to fail).
    Limited(Result<bool, String>),
    /// The fetch ended: a connect error, a body past its limit, or a status with its body.
    Fetched(Observed),
    /// The KV read ended (never [`KvRead::TimedOut`]: that is the engine's conclusion).
    Kv(KvRead),
}

/// What a KV read returned.
#[derive(Debug, Clone, PartialEq)]
pub enum KvRead {
    Value {
        value: Option<String>,
        metadata: Option<Value>,
    },
    /// The engine stopped waiting at the tier's timeout (a KV read cannot be aborted).
    TimedOut,
    Error(String),
}
