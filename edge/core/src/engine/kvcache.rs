//! [E-CASCADE] What this isolate read from KV lately, so a burst of degraded answers — every
//! request of an outage walks the same tiers — costs one read per key, not one per request.
//!
//! Why 30 seconds and not 1. KV is eventually consistent: a write reaches other locations
//! in about a minute, and each location serves a read from its own cache for `cacheTtl`
//! (60 s by default). Holding a read in the isolate for half of that adds no staleness of a
//! new kind, and every use still judges the entry's own age against the tier's ceiling
//! (`written_at` travels with it). What it saves is the reads: with the model hung and the
//! breaker open, `understudy bench` (64 connections, 200 users) sent ~200 KV reads a second
//! with a 1 s cache, and their queue made the tail — p99 141–471 ms against 73 ms with 30 s,
//! at 2,170–3,145 against 4,644 answers a second (docs/history/2026-12-bench.md). In production a
//! read costs money and a round trip; a hot category key was read once a second per isolate.
//!
//! Hits and misses are both kept; timeouts and errors are not (the next request tries
//! again). The edge's own write-through updates the cache, and a write-through KV refused
//! takes its entry out again. Bounded: when full it is cleared.

use std::collections::HashMap;

use crate::cascade::KvRead;
use crate::time::Millis;

/// How long a read is reused.
pub const TTL_MS: u64 = 30_000;
/// Most keys kept per isolate.
pub const CAPACITY: usize = 4_096;

#[derive(Debug, Default)]
pub struct KvCache {
    map: HashMap<(String, String), (Millis, KvRead)>,
}

impl KvCache {
    /// A read of `key` in `binding` made less than [`TTL_MS`] before `now`.
    pub fn get(&self, binding: &str, key: &str, now: Millis) -> Option<KvRead> {
        let (at, read) = self.map.get(&(binding.to_string(), key.to_string()))?;
        (*at <= now && now.since(*at) < TTL_MS).then(|| read.clone())
    }

    /// Remembers a completed read (a value or its absence) made at `now`.
    pub fn put(&mut self, binding: &str, key: &str, now: Millis, read: &KvRead) {
        if !matches!(read, KvRead::Value { .. }) {
            return;
        }
        if self.map.len() >= CAPACITY {
            self.map.clear();
        }
        self.map
            .insert((binding.to_string(), key.to_string()), (now, read.clone()));
    }

    /// Drops what the isolate believes `key` in `binding` holds (a write-through KV refused).
    pub fn forget(&mut self, binding: &str, key: &str) {
        self.map.remove(&(binding.to_string(), key.to_string()));
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit() -> KvRead {
        KvRead::Value {
            value: Some("{}".into()),
            metadata: None,
        }
    }

    #[test]
    fn reads_are_reused_for_their_ttl_and_failures_never() {
        let mut c = KvCache::default();
        c.put("B", "k", Millis(1_000), &hit());
        assert_eq!(c.get("B", "k", Millis(1_000 + TTL_MS - 1)), Some(hit()));
        assert_eq!(c.get("B", "k", Millis(1_000 + TTL_MS)), None, "expired");
        assert_eq!(c.get("B", "k", Millis(999)), None, "from the future");
        assert_eq!(c.get("C", "k", Millis(1_500)), None, "per binding");
        c.put("B", "t", Millis(1_000), &KvRead::TimedOut);
        c.put("B", "e", Millis(1_000), &KvRead::Error("x".into()));
        assert_eq!(c.len(), 1);
        c.forget("B", "k");
        assert_eq!(c.get("B", "k", Millis(1_500)), None, "forgotten");
        assert!(c.is_empty());
    }
}
