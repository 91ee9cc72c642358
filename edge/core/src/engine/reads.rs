//! [E-CASCADE] KV reads in the isolate: answered from the read cache ([`super::kvcache`]),
//! joined while another request's read of the same key is in flight, or started. [`Reads`]
//! owns both, the cache and the reads in flight (docs/adr/010, "The engine's components").
//!
//! Why share reads? When the model first hangs, every request in flight meets its deadline
//! at once and walks the same tiers; each found the cache empty and read the same category
//! key itself (the bench's first slice at 64 connections: 64 reads of one key, answered at
//! p50 466 ms). A request that needs a key whose read is in flight waits on that read with
//! its own timeout instead. A read stops being shared when it ends — the cache takes over —
//! or when the time of the request that started it is up: a KV read cannot be aborted, and
//! a stuck one must not hold every later request; the next request reads afresh.
//!
//! A request that joins a read does not await the other request's promise: in workerd that
//! is a cross-request promise, and resolving one request's continuation from another's
//! context lost wake-ups under load — requests that had their answer ready were cancelled
//! as hung, and the runtime answered a bare 500 (issue 23: 261 in 918,852 requests with the
//! breaker open). The read reports to the request that started it (its `waitUntil` keeps it
//! alive past that request's answer) and the engine keeps the result; a joining request
//! looks for it each time its own timer fires, every [`POLL_MS`], until its tier's timeout.

use std::collections::HashMap;

use crate::io::{IoId, KvRead};
use crate::time::Millis;

use super::kvcache::KvCache;
use super::Ios;

/// Most reads shared at once; past it, the expired ones are forgotten first.
const MAX_SHARED: usize = 1_024;

/// How often a request waiting on another request's read looks for its result.
pub const POLL_MS: u64 = 1;

/// How a request gets a key's value.
#[derive(Debug, Clone, PartialEq)]
pub enum Plan {
    /// The isolate read it lately: no I/O.
    Cached(KvRead),
    /// A read of it is in flight (this request's own speculative read, or another
    /// request's): wait for that one.
    Join(IoId),
    /// Start a read (its handle is given).
    Start(IoId),
}

#[derive(Debug, Clone)]
struct Shared {
    io: IoId,
    /// Shared until then: the starting request's time.
    until: Millis,
}

/// The isolate's KV reads: those of the last 30 s ([`super::kvcache::TTL_MS`]) and those
/// in flight that other requests may join.
#[derive(Debug, Default)]
pub(super) struct Reads {
    cache: KvCache,
    in_flight: InFlight,
}

impl Reads {
    /// `key` of `binding` is needed at `now` by a request that waits for it until `until`:
    /// answered from the cache, joined, or started (`ios` hands out its handle).
    pub(super) fn plan(
        &mut self,
        now: Millis,
        key: (&str, &str),
        until: Millis,
        ios: &mut Ios,
    ) -> Plan {
        self.in_flight.plan(&self.cache, now, key, until, ios)
    }

    /// What the isolate read of `key` of `binding` lately, as of `now`.
    pub(super) fn cached(&self, binding: &str, key: &str, now: Millis) -> Option<KvRead> {
        self.cache.get(binding, key, now)
    }

    /// Whether a read of `key` is shared right now (a speculative read need not start).
    pub(super) fn in_flight(&self, binding: &str, key: &str, now: Millis) -> bool {
        self.in_flight.in_flight(binding, key, now)
    }

    /// KV read `io` ended at `now` with `read`: the isolate remembers it and stops sharing
    /// it.
    pub(super) fn ended(&mut self, now: Millis, io: IoId, read: &KvRead) {
        if let Some((binding, key)) = self.in_flight.ended(io) {
            self.cache.put(&binding, &key, now, read);
        }
    }

    /// `read` of `key` of `binding` was written through at `now`: the isolate holds it as
    /// KV's.
    pub(super) fn put(&mut self, binding: &str, key: &str, now: Millis, read: &KvRead) {
        self.cache.put(binding, key, now, read);
    }

    /// KV refused to store `key` of `binding`: the isolate must not go on serving it as KV's.
    pub(super) fn forget(&mut self, binding: &str, key: &str) {
        self.cache.forget(binding, key);
    }
}

/// The reads in flight that other requests may join, by key.
#[derive(Debug, Default)]
struct InFlight {
    by_key: HashMap<(String, String), Shared>,
    keys: HashMap<IoId, (String, String)>,
}

impl InFlight {
    /// `key` of `binding` is needed at `now` by a request that waits for it until `until`.
    /// `ios` hands out a fresh handle.
    fn plan(
        &mut self,
        cache: &KvCache,
        now: Millis,
        (binding, key): (&str, &str),
        until: Millis,
        ios: &mut Ios,
    ) -> Plan {
        if let Some(read) = cache.get(binding, key, now) {
            return Plan::Cached(read);
        }
        let k = (binding.to_string(), key.to_string());
        if let Some(s) = self.by_key.get(&k) {
            if s.until > now {
                return Plan::Join(s.io);
            }
            let io = s.io;
            self.by_key.remove(&k);
            self.keys.remove(&io);
        }
        if self.by_key.len() >= MAX_SHARED {
            self.expire(now);
        }
        let io = ios.next();
        if self.by_key.len() < MAX_SHARED {
            self.by_key.insert(k.clone(), Shared { io, until });
            self.keys.insert(io, k);
        }
        Plan::Start(io)
    }

    /// Whether a read of `key` is shared right now.
    fn in_flight(&self, binding: &str, key: &str, now: Millis) -> bool {
        self.by_key
            .get(&(binding.to_string(), key.to_string()))
            .is_some_and(|s| s.until > now)
    }

    /// Read `io` ended: it is no longer shared. Returns its binding and key when it was.
    fn ended(&mut self, io: IoId) -> Option<(String, String)> {
        let k = self.keys.remove(&io)?;
        if self.by_key.get(&k).is_some_and(|s| s.io == io) {
            self.by_key.remove(&k);
        }
        Some(k)
    }

    fn expire(&mut self, now: Millis) {
        let keys = &mut self.keys;
        self.by_key.retain(|_, s| {
            let keep = s.until > now;
            if !keep {
                keys.remove(&s.io);
            }
            keep
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_in_flight_is_joined_until_its_starters_time_is_up_then_read_afresh() {
        let (mut r, cache, mut ios) = (InFlight::default(), KvCache::default(), Ios::default());
        let t = Millis(1_000);
        let mut plan =
            |now: Millis, until: Millis| r.plan(&cache, now, ("B", "k"), until, &mut ios);
        let first = plan(t, t.plus(8));
        let Plan::Start(io) = first else {
            panic!("{first:?}")
        };
        assert_eq!(plan(t.plus(3), t.plus(20)), Plan::Join(io));
        // The starter's 8 ms are up: a stuck read is not joined any more.
        let again = plan(t.plus(8), t.plus(16));
        let Plan::Start(second) = again else {
            panic!("{again:?}")
        };
        assert_ne!(second, io);
        assert!(r.in_flight("B", "k", t.plus(9)));
        assert_eq!(r.ended(io), None, "already forgotten");
        assert_eq!(r.ended(second), Some(("B".into(), "k".into())));
        assert!(!r.in_flight("B", "k", t.plus(9)));
    }

    #[test]
    fn a_cached_read_needs_no_io() {
        let (mut r, mut cache, mut ios) = (InFlight::default(), KvCache::default(), Ios::default());
        let t = Millis(1_000);
        let v = KvRead::Value {
            value: Some("{}".into()),
            metadata: None,
        };
        cache.put("B", "k", t, &v);
        assert_eq!(
            r.plan(&cache, t.plus(1), ("B", "k"), t.plus(9), &mut ios),
            Plan::Cached(v)
        );
    }
}
