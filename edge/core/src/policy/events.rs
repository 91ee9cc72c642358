//! [V-*] The `[events]` section's meaning: what the edge accepts, where it delivers, how it
//! retries, what a dead letter does, what is sealed and what is never logged. The compiler
//! reads TOML into these types; the Worker and the outbox read them from the bake.
//!
//! Plain serde shapes only (postcard bakes them, like the rest of [`crate::policy`]).

use serde::{Deserialize, Serialize};

use super::RetryOn;

/// Durable events: ingest, outbox, delivery (seed 004 SRS-RES-002/003).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Events {
    /// `POST` path of the ingest endpoint.
    pub route: String,
    /// The claim of the verified token that names the caller's tenant.
    pub tenant_claim: String,
    /// Largest request body accepted, in bytes.
    pub max_body_bytes: u64,
    /// Aggregate shards (and claim shards): fixed once deployed (ADR 006).
    pub shards: u32,
    /// Accepted event types, one entry per (type, schema version).
    pub types: Vec<EventType>,
    pub delivery: Delivery,
    pub retry: RetrySchedule,
    pub dead_letter: DeadLetter,
    /// Secret binding holding the AES-256-GCM key material.
    pub encryption_key_secret: String,
    /// Payload fields (dotted paths) never written to logs or shown unmasked.
    pub redact: Vec<String>,
    pub alerts: Alerts,
    /// Whether dead letters may be replayed (seed 004: off until tested).
    pub replay: bool,
    /// Delivered events' payloads are erased this long after delivery.
    pub retention_ms: u64,
}

/// One accepted schema version of one event type.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventType {
    pub name: String,
    pub version: u32,
    /// Payload fields (dotted paths) this version requires.
    pub required: Vec<String>,
}

/// Where and how events are delivered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Delivery {
    pub url: String,
    /// Secret binding holding the consumer credential.
    pub credential_secret: Option<String>,
    /// Header the credential is sent in (`Authorization` gets a `Bearer ` prefix).
    pub credential_header: String,
    /// Headers and body of one attempt must arrive within this.
    pub attempt_timeout_ms: u64,
    /// Deliveries one shard runs at once (Workers allow 6 simultaneous connections).
    pub concurrency: u32,
}

/// The retry schedule: attempts, full-jitter exponential backoff, the window they fit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetrySchedule {
    /// Attempts including the first (seed: 8).
    pub attempts: u32,
    pub backoff_base_ms: u64,
    pub backoff_max_ms: u64,
    /// Every attempt starts within this of the first (seed: 15 minutes); `check` proves the
    /// backoff alone fits.
    pub window_ms: u64,
    /// Retryable outcomes (timeout, connect, 408, 429, 5xx); permanent 4xx never are.
    pub retry_on: RetryOn,
    pub honor_retry_after: bool,
}

crate::words! {
    /// What a dead letter does to the later events of its aggregate.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
    pub enum DeadLetter {
        /// Later events wait (and are reported) until the dead letter is replayed or skipped.
        Hold = "hold",
        /// Later events go on; a replayed dead letter arrives out of order (`check` warns).
        Continue = "continue",
    }
}

/// When operations are alerted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Alerts {
    /// Alert when the oldest pending event is older than this (seed: 60 s).
    pub oldest_pending_ms: u64,
    /// Alert when more than this many events are dead letters (seed: 0).
    pub dead_letters: u64,
    /// Report an event whose predecessor has not arrived after this.
    pub gap_ms: u64,
}

impl Events {
    /// The declared versions of `name`, highest first.
    pub fn versions_of(&self, name: &str) -> Vec<&EventType> {
        let mut v: Vec<&EventType> = self.types.iter().filter(|t| t.name == name).collect();
        crate::sort::sort_by_key(&mut v, |t| std::cmp::Reverse(t.version));
        v
    }

    pub fn schema(&self, name: &str, version: u32) -> Option<&EventType> {
        self.types
            .iter()
            .find(|t| t.name == name && t.version == version)
    }
}
