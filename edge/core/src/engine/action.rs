//! What the engine asks a driver to do ([`Action`]) and what the driver reports back
//! ([`Event`]). These are the only I/O there is; see docs/adr/005-one-engine.md.

use crate::cascade::KvRead;
use crate::classify::Observed;
use crate::events::flow::BodyError;
use crate::events::protocol::{ShardReply, ShardRequest};
use crate::http::Outbound;
use crate::metrics::DataPoint;
use crate::writethrough::KvWrite;

/// The answer, ready to send, and what goes with it.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    /// The request's correlation ID (also in the headers and the log line).
    pub correlation_id: String,
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: String,
    /// KV writes to run in the background (`wait_until`); report failures with
    /// [`super::Engine::write_failed`].
    pub writes: Vec<KvWrite>,
    /// The request's one structured log line (JSON).
    pub log: String,
    /// The request's Analytics Engine data point, when it counts as one.
    pub point: Option<DataPoint>,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// A KV read to start ahead of the cascade ([`Action::FetchOrigin`]'s `prefetch`).
#[derive(Debug, Clone, PartialEq)]
pub struct Prefetch<'p> {
    pub binding: &'p str,
    pub key: String,
    /// How long the driver keeps the read for a later [`Action::ReadKv`] of this key: what
    /// is left of the request's budget.
    pub keep_ms: u64,
}

/// What the driver must do next.
#[derive(Debug, Clone, PartialEq)]
pub enum Action<'p> {
    /// [E-STORM] Count this request against `key` with the Rate Limiting binding `binding`;
    /// report [`Event::Limited`].
    Limit { binding: &'p str, key: String },
    /// [E-RACE] Send `request`; headers *and* body must arrive within `timeout_ms`, then the
    /// loser is aborted; report [`Event::Origin`]. With `hedge_after_ms`: if no good answer
    /// came within it, send the same request once more; the first good (2xx) answer wins, the
    /// other is aborted; report [`Event::OriginHedged`].
    FetchOrigin {
        attempt: u32,
        timeout_ms: u64,
        request: Outbound,
        hedge_after_ms: Option<u64>,
        /// [E-CASCADE] Speculative tier reads: KV reads to start alongside the fetch, their
        /// results not reported. Asked for when the model has gone silent, so that the
        /// cascade's [`Action::ReadKv`] of the same key at the deadline finds the read done
        /// or under way. The driver keeps each for its `keep_ms` (a read of the same key
        /// joins it); empty otherwise.
        prefetch: Vec<Prefetch<'p>>,
    },
    /// Wait `ms`, then report [`Event::Woke`].
    Wait { ms: u64 },
    /// Read `key` (with its metadata) from KV namespace `binding`, waiting at most
    /// `timeout_ms`; report [`Event::Kv`].
    ReadKv {
        tier: usize,
        binding: &'p str,
        key: String,
        timeout_ms: u64,
    },
    /// Fetch an HTTP tier like the origin (its own credential, never the origin's); report
    /// [`Event::Http`].
    FetchHttp {
        tier: usize,
        timeout_ms: u64,
        request: Outbound,
    },
    /// [V-INGEST] Read the request body, at most `max_bytes` (stop and report
    /// [`BodyError::TooLarge`] past it); report [`Event::Body`].
    ReadBody { max_bytes: u64 },
    /// [V-STORE] Send each request to its outbox shard (the Durable Object named by the
    /// string), all at once; report [`Event::Shards`] with the replies in the same order.
    CallShards { calls: Vec<(String, ShardRequest)> },
    /// Done: send the reply.
    Respond(Box<Reply>),
}

/// What the driver observed.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// The rate limiter's verdict (`Ok(true)`: within the limit), or why it could not be
    /// asked (the request then goes through: the limiter protects the origin and must not
    /// become a new way to fail).
    Limited(Result<bool, String>),
    /// The origin attempt ended.
    Origin(Observed),
    /// A hedged origin attempt ended: what the winning (or last) request observed, whether
    /// the hedge was sent, and whether its answer was the one used.
    OriginHedged {
        observed: Observed,
        sent: bool,
        won: bool,
    },
    /// A [`Action::Wait`] elapsed.
    Woke,
    /// The KV read ended.
    Kv(KvRead),
    /// The HTTP tier ended.
    Http(Observed),
    /// The request body, or why it could not be read.
    Body(Result<Vec<u8>, BodyError>),
    /// The shards' replies, in the order of the calls (`Err`: the call itself failed).
    Shards(Vec<Result<ShardReply, String>>),
}
