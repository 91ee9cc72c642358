//! The tiers as the replayed engine meets them: each read answered with what the logged
//! request's own read of that tier found (what a tier holds for a request depends on its
//! key, not the moment: a speculative read alongside the origin call comes earlier than
//! the logged walk's, and finds the same), or with what reads of the tier found around
//! that instant.
//!
//! Two things the logs cannot settle are the cases' to decide:
//! - a read the logs saw time out at X ms, when the policy's tier waits longer: a hit at
//!   X + 1 ms (best) or no answer (worst);
//! - a hit on a write-through tier whose entry was written while the logs ran: a live
//!   answer wrote it — for the policy replayed, only if it answered as many requests live
//!   then as the logs did (the logs carry no identity to say whose entry it was); when it
//!   answered fewer, the entry stays in the best case and is a miss in the worst.

use understudy_core::classify::Observed as Fetched;
use understudy_core::engine::KvRead;
use understudy_core::tier::Read;
use understudy_core::Millis;

use super::super::observed::{Lookup, TierWas, CLOCK_MS};
use super::{key, response, Case, Doubt, ReplayWorld};

/// A tier the world answers reads of.
#[derive(Debug, Clone)]
pub(super) struct TierIo {
    pub name: String,
    /// An HTTP tier's result path (`None`: a KV tier).
    pub path: Option<Vec<String>>,
    pub published: bool,
    /// Live answers are written back to it: what it holds follows the policy's answers.
    pub write_through: bool,
}

impl ReplayWorld<'_> {
    /// Whether an entry written `w` ms after the first arrival is there for the replay: it
    /// was there before the logs began, or no logged live answer wrote it then (it came
    /// from elsewhere), or one did and the replay answered that same request live too.
    fn written_in_replay(&self, io: &TierIo, w: i64) -> bool {
        match self.writers.get(&w) {
            None => true,
            Some(_) if w < 0 => true,
            Some(by) => io.write_through && by.iter().any(|j| self.replayed_live.contains(j)),
        }
    }

    /// What tier `io` found for request `i`'s next read of it, at `t`.
    pub(super) fn tier_at(&mut self, i: usize, io: &TierIo, t: u64) -> TierWas {
        let tier = io.name.as_str();
        let k = {
            let n = self.reads[i].entry(tier.to_string()).or_insert(0);
            *n += 1;
            *n as usize - 1
        };
        let r = &self.requests[i];
        let own = r.logged.tiers.iter().filter(|s| s.tier == tier).nth(k);
        let taken = self.taken_reads.entry(tier.to_string()).or_default();
        let timeline = self.obs.tiers.get(tier);
        let looked = match own {
            Some(s) => {
                let was = TierWas::of(s, r.at_ms);
                if let Some(tl) = timeline {
                    tl.take(r.at_ms + s.start_ms, &was, taken);
                }
                Lookup::Known(was)
            }
            None => timeline.map_or(Lookup::Unseen, |tl| tl.draw(t, key(i, k + 1_000), taken)),
        };
        let unseen = TierWas {
            read: Read::TimedOut,
            ms: 0,
            written_ms: None,
        };
        // A read the logs saw time out at X ms is in doubt if the replay waited longer
        // (judged from the replayed line, once the run is over).
        let (mut was, mut doubt) = match looked {
            Lookup::Known(w) => (
                w,
                (w.read == Read::TimedOut).then_some(Doubt::Past(w.ms + CLOCK_MS)),
            ),
            Lookup::Between(a, b) => {
                let (better, worse) = if a.rank() <= b.rank() { (a, b) } else { (b, a) };
                let w = match self.case {
                    Case::Best => better,
                    Case::Worst => worse,
                };
                (w, Some(Doubt::Always))
            }
            Lookup::Unseen => (unseen, Some(Doubt::Always)),
        };
        if let (Read::Hit | Read::Stale, Some(w)) = (was.read, was.written_ms) {
            if !self.written_in_replay(io, w) {
                doubt = Some(Doubt::Always);
                if self.case == Case::Worst {
                    was.read = Read::Miss;
                    was.written_ms = None;
                }
            }
        }
        if let Some(d) = doubt {
            self.read_doubts.insert((i as u64, tier.to_string(), k), d);
        }
        was
    }

    pub(super) fn kv(&self, io: &TierIo, was: TierWas, t: u64) -> Option<(u64, KvRead)> {
        // An entry written `w` ms after the first arrival, as KV would hand it over now.
        let hit = |w: i64| {
            let written = Millis((self.start.0 as i64 + w).max(0) as u64);
            let items = vec![serde_json::json!({ "sku": "REPLAY" }).to_string()];
            let (value, mut meta) = understudy_core::entry::render(&items, written);
            if io.published {
                meta = understudy_core::entry::published_metadata(written, written);
            }
            KvRead::Value {
                value: Some(value),
                metadata: Some(meta),
            }
        };
        let absent = KvRead::Value {
            value: None,
            metadata: None,
        };
        Some(match was.read {
            // Read before the logged read found it written: not there yet.
            Read::Hit | Read::Stale => match was.written_ms {
                Some(w) if w > t as i64 => (was.ms, absent),
                w => (was.ms, hit(w.unwrap_or(t as i64))),
            },
            Read::Miss => (was.ms, absent),
            Read::Error => (was.ms, KvRead::Error("replayed: the read failed".into())),
            Read::TimedOut => match self.case {
                Case::Worst => return None,
                Case::Best => {
                    let w = self.obs.hit_written(&io.name, t).filter(|w| *w <= t as i64);
                    (was.ms + CLOCK_MS + 1, hit(w.unwrap_or(t as i64)))
                }
            },
        })
    }

    pub(super) fn http(&self, io: &TierIo, was: TierWas) -> Option<(u64, Fetched)> {
        let ok = |ms| {
            let mut body = serde_json::json!([{ "sku": "REPLAY" }]);
            for key in io.path.iter().flatten().rev() {
                body = serde_json::json!({ key.as_str(): body });
            }
            (ms, response(200, None, body.to_string().into_bytes()))
        };
        Some(match was.read {
            Read::Hit | Read::Stale => ok(was.ms),
            Read::Miss => (was.ms, response(404, None, Vec::new())),
            Read::Error => (was.ms, response(503, None, Vec::new())),
            Read::TimedOut => match self.case {
                Case::Worst => return None,
                Case::Best => ok(was.ms + CLOCK_MS + 1),
            },
        })
    }
}
