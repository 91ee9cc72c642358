//! [E-LIVE] Live answers are written back to the user tier, but Workers KV takes at most one
//! write per key per second and bills every write: a key is rewritten only when this
//! isolate's last write of it is older than the tier's `refresh_ms`. The map is per isolate
//! and bounded; a fresh isolate writes once and then holds back like the others.

use std::collections::HashMap;

use crate::entry;
use crate::policy::Policy;
use crate::request::Params;
use crate::time::Millis;

/// Keys remembered per isolate. A KV key is ~40 bytes (identity hashed), so this bounds the
/// map near 400 kB, well inside an isolate's 128 MB.
pub const DEFAULT_CAPACITY: usize = 10_000;

/// Last write time per KV key (binding + key), for this isolate.
#[derive(Debug, Clone)]
pub struct WriteThrough {
    last: HashMap<String, Millis>,
    capacity: usize,
}

impl Default for WriteThrough {
    fn default() -> Self {
        WriteThrough::new(DEFAULT_CAPACITY)
    }
}

/// A write the adapter performs in the background (`wait_until`).
#[derive(Debug, Clone, PartialEq)]
pub struct KvWrite {
    pub binding: String,
    pub key: String,
    pub value: String,
    pub metadata: serde_json::Value,
}

impl WriteThrough {
    pub fn new(capacity: usize) -> WriteThrough {
        WriteThrough {
            last: HashMap::new(),
            capacity: capacity.max(1),
        }
    }

    pub fn len(&self) -> usize {
        self.last.len()
    }

    pub fn is_empty(&self) -> bool {
        self.last.is_empty()
    }

    /// Whether `key` should be written at `now`; if so, the write is recorded.
    pub fn should_write(&mut self, key: &str, now: Millis, refresh_ms: u64) -> bool {
        if let Some(at) = self.last.get(key) {
            if now.since(*at) < refresh_ms && *at <= now {
                return false;
            }
        }
        if self.last.len() >= self.capacity && !self.last.contains_key(key) {
            self.evict(now, refresh_ms);
        }
        self.last.insert(key.to_string(), now);
        true
    }

    /// A write failed: forget it so the next live answer tries again.
    pub fn forget(&mut self, key: &str) {
        self.last.remove(key);
    }

    /// Drops entries that no longer hold anything back; if none, the older half.
    fn evict(&mut self, now: Millis, refresh_ms: u64) {
        self.last.retain(|_, at| now.since(*at) < refresh_ms);
        if self.last.len() >= self.capacity {
            let mut times: Vec<Millis> = self.last.values().copied().collect();
            crate::sort::sort_by(&mut times, Millis::cmp);
            let cut = times[times.len() / 2];
            self.last.retain(|_, at| *at > cut);
        }
    }
}

/// The writes a live answer triggers at `now`: one per write-through tier
/// ([`crate::tier::Kind::write_through`]) whose key the request's parameters fill and whose
/// refresh interval has passed.
pub fn plan(
    policy: &Policy,
    params: &Params,
    items: &[String],
    now: Millis,
    wt: &mut WriteThrough,
) -> Vec<KvWrite> {
    let mut out = Vec::new();
    for tier in &policy.cascade.tiers {
        let Some(w) = tier.kind.write_through() else {
            continue;
        };
        let Some(key) = w.to.key.render(|n| params.lookup(n)) else {
            continue;
        };
        if !wt.should_write(&format!("{}/{key}", w.to.binding), now, w.refresh_ms) {
            continue;
        }
        let (value, metadata) = entry::render(items, now);
        out.push(KvWrite {
            binding: w.to.binding.to_string(),
            key,
            value,
            metadata,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::ParamValue;
    use crate::template::identity_hash;
    use crate::testing::{seed_policy, NOW};

    fn params(user: &str) -> Params {
        Params {
            values: vec![ParamValue {
                name: "user_id".into(),
                value: user.into(),
                identity: true,
            }],
        }
    }

    #[test]
    fn writes_once_per_refresh_interval() {
        let p = seed_policy();
        let mut wt = WriteThrough::default();
        let items = vec!["1".to_string()];
        let w = plan(&p, &params("alice"), &items, Millis(NOW), &mut wt);
        assert_eq!(w.len(), 1, "only the user tier writes through");
        assert_eq!(w[0].key, format!("user_rec:{}", identity_hash("alice")));
        assert_eq!(w[0].value, r#"{"items":[1]}"#);
        assert_eq!(w[0].metadata, serde_json::json!({"written_at": NOW}));
        assert!(plan(&p, &params("alice"), &items, Millis(NOW + 299_999), &mut wt).is_empty());
        assert_eq!(
            plan(&p, &params("alice"), &items, Millis(NOW + 300_000), &mut wt).len(),
            1
        );
        assert_eq!(
            plan(&p, &params("bob"), &items, Millis(NOW + 1), &mut wt).len(),
            1
        );
    }

    #[test]
    fn a_failed_write_is_retried_next_time() {
        let mut wt = WriteThrough::default();
        assert!(wt.should_write("k", Millis(10), 1_000));
        wt.forget("k");
        assert!(wt.should_write("k", Millis(11), 1_000));
    }

    #[test]
    fn the_map_stays_bounded() {
        let mut wt = WriteThrough::new(100);
        for i in 0..1_000u64 {
            assert!(wt.should_write(&format!("k{i}"), Millis(i), 1_000_000));
            assert!(wt.len() <= 100);
        }
        // Recent keys are still held back.
        assert!(!wt.should_write("k999", Millis(1_000), 1_000_000));
    }

    #[test]
    fn a_clock_jump_backwards_does_not_block_writes_forever() {
        let mut wt = WriteThrough::default();
        assert!(wt.should_write("k", Millis(1_000_000), 1_000));
        assert!(wt.should_write("k", Millis(10), 1_000));
    }
}
