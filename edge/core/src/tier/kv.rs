//! [E-CASCADE] A Workers KV tier: the key its template renders from the request, read
//! within the tier's timeout, answers when the entry is there, well-formed and younger
//! than `max_staleness`. Values are JSON `{"items": [...]}`; the write time is in the key's
//! metadata (`{"written_at": <ms>}`), falling back to a `written_at` field in the value.
//! It is the tier live answers are written back to ([E-LIVE]) and the one worth reading
//! ahead while the model is silent.

use serde::{Deserialize, Serialize};

use super::{Env, Found, Keyed, Kind, KvKey, Miss, Read, Start, WriteThrough};
use crate::entry;
use crate::http::Outbound;
use crate::io::{Done, KvRead, Op};
use crate::staleness;
use crate::template::Template;

/// A Workers KV tier's settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KvTier {
    pub binding: String,
    pub key: Template,
    pub max_staleness_ms: u64,
    pub read_timeout_ms: u64,
    /// Live origin answers are written back to this tier.
    pub write_through: bool,
    /// A key is rewritten only when its stored copy is older than this.
    pub refresh_ms: u64,
    /// [B-PUBLISH] A curated tier filled by `understudy publish`: an entry answers only with
    /// its inventory validation in the key's metadata (`snapshot_at`, `validated_at`), its
    /// age counted from the earlier of the two; an entry without one is a miss.
    pub published: bool,
}

impl KvTier {
    fn kv_key(&self) -> KvKey<'_> {
        KvKey {
            binding: &self.binding,
            key: &self.key,
        }
    }
}

impl Kind for KvTier {
    fn timeout_ms(&self) -> u64 {
        self.read_timeout_ms
    }

    fn timeout_label(&self) -> &'static str {
        "KV read timeout"
    }

    fn local(&self) -> bool {
        false
    }

    /// Keyed by an identity, its entries are one user's.
    fn per_user(&self, is_identity: &dyn Fn(&str) -> bool) -> bool {
        self.key.params().any(is_identity)
    }

    fn params(&self) -> Vec<Keyed<'_>> {
        self.key
            .params()
            .map(|value| Keyed { key: "key", value })
            .collect()
    }

    fn kv_binding(&self) -> Option<Keyed<'_>> {
        Some(Keyed {
            key: "binding",
            value: &self.binding,
        })
    }

    fn write_through(&self) -> Option<WriteThrough<'_>> {
        self.write_through.then(|| WriteThrough {
            to: self.kv_key(),
            refresh_ms: self.refresh_ms,
        })
    }

    fn max_age_ms(&self) -> Option<u64> {
        Some(self.max_staleness_ms)
    }

    fn speculative_read(&self) -> Option<KvKey<'_>> {
        Some(self.kv_key())
    }

    fn start<'p>(&'p self, env: &Env<'_>, _: &dyn Fn(&str) -> Outbound) -> Start<'p> {
        match self.key.render(|n| env.params.lookup(n)) {
            Some(key) => Start::Read(Op::ReadKv {
                binding: &self.binding,
                key,
            }),
            None => Start::Skip(Miss::new(
                "KEY_PARAM_MISSING",
                format!("no value for a parameter of `{}`", self.key.source),
            )),
        }
    }

    /// A fresh hit answers; a timeout, an error, an absent, malformed or unvalidated entry
    /// and a stale one are misses.
    fn finish(&self, env: &Env<'_>, done: Done) -> Result<Found, Miss> {
        let (value, metadata) = match done {
            Done::Kv(KvRead::Value { value, metadata }) => (value, metadata),
            Done::Kv(KvRead::TimedOut) => {
                return Err(Miss::new(
                    "KV_TIMEOUT",
                    format!("no answer within {} ms", self.read_timeout_ms),
                )
                .found(Read::TimedOut, None))
            }
            Done::Kv(KvRead::Error(e)) => {
                return Err(Miss::new("KV_ERROR", e).found(Read::Error, None))
            }
            other => return Err(Miss::unexpected(&other)),
        };
        let parsed = if self.published {
            entry::parse_published(value.as_deref(), metadata.as_ref())
        } else {
            entry::parse(value.as_deref(), metadata.as_ref())
        };
        let e = parsed.map_err(|miss| Miss::new(miss.code(), miss.detail()))?;
        let age_ms =
            staleness::judge(e.written_at, env.now, self.max_staleness_ms).map_err(|miss| {
                let age = match miss {
                    staleness::StaleMiss::TooOld { age_ms, .. } => Some(age_ms),
                    staleness::StaleMiss::InFuture { .. } => None,
                };
                Miss::new(miss.code(), miss.detail()).found(Read::Stale, age)
            })?;
        Ok(Found {
            items: e.items,
            age_ms,
            catalog_expired: false,
        })
    }
}
