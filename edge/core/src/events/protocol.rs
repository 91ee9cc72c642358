//! What the Worker asks an outbox shard (a Durable Object) and what it answers: postcard
//! over the object's `fetch`. Both ends are this crate, built into one module, so the shapes
//! cannot drift; the shard applies [`super::outbox`]'s decisions to its SQLite rows.
//!
//! Why postcard and not JSON: serde_json's code for these enums (internally tagged, with
//! every record field) cost ~70 KB of the Worker's module; postcard, already in it for the
//! bake, costs a fraction, and sealed payloads travel as bytes instead of base64.

use serde::{Deserialize, Serialize};

use super::outbox::{Claim, Record, Skip, State};
use super::stats::ShardStats;

/// The Durable Object binding `understudy build` declares, and its class.
pub const BINDING: &str = "UNDERSTUDY_OUTBOX";
pub const CLASS: &str = "OutboxShard";
/// The URL the Worker sends shard requests to (a Durable Object needs an absolute URL).
pub const SHARD_URL: &str = "https://outbox.shard/cmd";

/// FNV-1a, 64-bit: a stable hash (the shard of an aggregate must never change between
/// releases or platforms).
pub fn fnv1a(parts: &[&str]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for (i, p) in parts.iter().enumerate() {
        if i > 0 {
            h ^= 0x1f;
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        for b in p.bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

/// The aggregate shard holding `(tenant, aggregate)`'s events.
pub fn aggregate_shard(tenant: &str, aggregate: &str, shards: u32) -> String {
    format!(
        "agg-{}",
        fnv1a(&[tenant, aggregate]) % u64::from(shards.max(1))
    )
}

/// The claim shard holding `event_id`'s claim.
pub fn claim_shard(event_id: &str, shards: u32) -> String {
    format!("ids-{}", fnv1a(&[event_id]) % u64::from(shards.max(1)))
}

/// Every aggregate shard's name.
pub fn aggregate_shards(shards: u32) -> Vec<String> {
    (0..shards.max(1)).map(|k| format!("agg-{k}")).collect()
}

/// What to list.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Filter {
    pub state: Option<State>,
    pub tenant: Option<String>,
    pub aggregate: Option<String>,
    pub offset: u32,
    pub limit: u32,
}

/// Most rows one list answer carries.
pub const MAX_LIST: u32 = 5_000;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ShardRequest {
    /// Claim an event ID (claim shards).
    Claim {
        claim: Claim,
    },
    /// Read an event ID's claim (claim shards).
    Lookup {
        event_id: String,
    },
    /// Store an event with its sealed payload (aggregate shards).
    Store {
        record: Box<Record>,
        sealed: Vec<u8>,
    },
    List {
        filter: Filter,
    },
    /// One event with its sealed payload.
    Get {
        event_id: String,
    },
    Replay {
        event_id: String,
    },
    Skip {
        tenant: String,
        aggregate: String,
    },
    Stats,
    /// Release a claim this request made when the store refused its event (claim shards),
    /// so a corrected resend with the same event ID is not refused as a reuse.
    Unclaim {
        claim: Claim,
    },
}

/// A decision's name and, for a refusal, its status, code and message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Verdict {
    Stored,
    Duplicate,
    Refused {
        status: u16,
        code: String,
        message: String,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ShardReply {
    Claim {
        verdict: Verdict,
    },
    Lookup {
        claim: Option<Claim>,
    },
    /// The stored (or already held) record.
    Store {
        verdict: Verdict,
        record: Option<Record>,
    },
    List {
        records: Vec<Record>,
        more: bool,
    },
    Get {
        record: Option<Record>,
        sealed: Option<Vec<u8>>,
    },
    Replay {
        verdict: Verdict,
        record: Option<Record>,
    },
    Skip {
        verdict: Verdict,
        skip: Option<Skip>,
    },
    Stats {
        stats: ShardStats,
    },
    /// The shard could not do it (storage error, bad request): the Worker answers 503.
    Error {
        message: String,
    },
}

/// A request or reply as bytes.
pub fn encode<T: Serialize>(v: &T) -> Vec<u8> {
    // Serialising these plain types into a Vec cannot fail except on allocation failure.
    postcard::to_allocvec(v).unwrap_or_default()
}

/// Bytes back into a request or reply; the message says what is wrong.
pub fn decode<T: for<'de> Deserialize<'de>>(bytes: &[u8]) -> Result<T, String> {
    postcard::from_bytes(bytes).map_err(|e| format!("not a shard message ({e})"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_are_stable_and_spread() {
        // Pinned: changing the hash would move every aggregate to another shard.
        assert_eq!(fnv1a(&["a"]), 0xaf63_dc4c_8601_ec8c);
        assert_ne!(fnv1a(&["ab", "c"]), fnv1a(&["a", "bc"]));
        let mut seen = std::collections::BTreeSet::new();
        for i in 0..200 {
            seen.insert(aggregate_shard("acme", &format!("order-{i}"), 16));
        }
        assert_eq!(seen.len(), 16);
        assert_eq!(claim_shard("evt-1", 1), "ids-0");
        assert_eq!(aggregate_shards(3), ["agg-0", "agg-1", "agg-2"]);
    }

    #[test]
    fn requests_and_replies_round_trip() {
        let r = ShardRequest::List {
            filter: Filter {
                state: Some(State::DeadLetter),
                limit: 10,
                ..Default::default()
            },
        };
        assert_eq!(decode::<ShardRequest>(&encode(&r)).unwrap(), r);
        let rec = crate::events::testing::record("e1", "a", 3);
        let store = ShardRequest::Store {
            record: Box::new(rec.clone()),
            sealed: vec![1, 200, 3],
        };
        assert_eq!(decode::<ShardRequest>(&encode(&store)).unwrap(), store);
        let reply = ShardReply::Stats {
            stats: ShardStats {
                pending: 2,
                held: vec![crate::events::outbox::Held::Gap {
                    tenant: "t".into(),
                    aggregate: "a".into(),
                    missing: 2,
                    waiting: 3,
                    since: 9,
                }],
                ..Default::default()
            },
        };
        assert_eq!(decode::<ShardReply>(&encode(&reply)).unwrap(), reply);
        assert!(decode::<ShardReply>(b"\xff\xff")
            .unwrap_err()
            .starts_with("not a shard message"));
    }
}
