//! [E-VERSION] How long the curated data this isolate serves stays servable: the baked stubs
//! (their evidence — the inventory snapshot they were validated against — plus the policy's
//! `catalog.max_age`) and each KV tier as last read (the entry's evidence plus the tier's
//! `max_staleness`). The status endpoint reports it and every data point carries the stubs'
//! hours left, so an alert can fire hours before a missed nightly re-bake becomes an outage
//! (docs/observability.md, "Curated data running out").

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::catalog::Catalog;
use crate::policy::Policy;
use crate::request::Params;
use crate::staleness::time_left;
use crate::time::Millis;
use crate::writethrough::{KvWrite, WriteThrough};

/// The curated data as the isolate keeps it (docs/adr/010, "The engine's components"): what
/// its live answers wrote through to the KV tiers, and how old the data it fell back on was.
#[derive(Debug, Default)]
pub(super) struct Curated {
    /// The write-through tiers' keys written lately ([`crate::writethrough`]).
    writes: WriteThrough,
    /// Time left on the curated data, as last seen.
    freshness: Freshness,
}

impl Curated {
    /// A live answer of `items` for `params` at `now`: the writes it triggers
    /// ([`crate::writethrough::plan`]).
    pub(super) fn live(
        &mut self,
        policy: &Policy,
        params: &Params,
        items: &[String],
        now: Millis,
    ) -> Vec<KvWrite> {
        crate::writethrough::plan(policy, params, items, now, &mut self.writes)
    }

    /// A fallback answer from `tier`, its data `age_ms` old at `now`.
    pub(super) fn fell_back(&mut self, policy: &Policy, tier: &str, age_ms: u64, now: Millis) {
        self.freshness.answered(policy, tier, age_ms, now);
    }

    /// A write through to `key` of `binding` failed: the next live answer writes again.
    pub(super) fn write_failed(&mut self, binding: &str, key: &str) {
        self.writes.forget(&format!("{binding}/{key}"));
    }

    /// The status endpoint's account of the curated data ([`Freshness::json`]).
    pub(super) fn status(&self, policy: &Policy, catalog: Option<&Catalog>, now: Millis) -> Value {
        self.freshness.json(policy, catalog, now)
    }
}

/// A KV tier's last answer: its evidence, when it was read, the tier's ceiling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Seen {
    evidence_at: Millis,
    read_at: Millis,
    ceiling_ms: u64,
}

#[derive(Debug, Default)]
pub struct Freshness {
    tiers: BTreeMap<String, Seen>,
}

/// Time left on the baked stubs' validation; `None` without a catalog or its rules.
pub fn stubs_left_ms(policy: &Policy, catalog: Option<&Catalog>, now: Millis) -> Option<u64> {
    let rules = policy.catalog.as_ref()?;
    let c = catalog?;
    Some(time_left(Millis(c.evidence_at_ms()), now, rules.max_age_ms))
}

impl Freshness {
    /// Tier `tier` answered at `now` with an entry `age_ms` old (kept for the tiers whose
    /// entries have a ceiling of their own: [`crate::tier::Kind::max_age_ms`]).
    pub fn answered(&mut self, policy: &Policy, tier: &str, age_ms: u64, now: Millis) {
        let Some(t) = policy.cascade.tiers.iter().find(|t| t.name == tier) else {
            return;
        };
        let Some(ceiling_ms) = t.kind.max_age_ms() else {
            return;
        };
        self.tiers.insert(
            tier.to_string(),
            Seen {
                evidence_at: Millis(now.0.saturating_sub(age_ms)),
                read_at: now,
                ceiling_ms,
            },
        );
    }

    /// The status endpoint's `freshness` block.
    pub fn json(&self, policy: &Policy, catalog: Option<&Catalog>, now: Millis) -> Value {
        let stubs = match (policy.catalog.as_ref(), catalog) {
            (Some(rules), Some(c)) => {
                let evidence = Millis(c.evidence_at_ms());
                json!({
                    "evidence_at_ms": evidence.0,
                    "expires_at_ms": evidence.0.saturating_add(rules.max_age_ms),
                    "left_ms": time_left(evidence, now, rules.max_age_ms),
                })
            }
            _ => Value::Null,
        };
        // Inserted, not collected: a collect into a map sorts first (`crate::sort`).
        let mut tiers = serde_json::Map::new();
        for (name, s) in &self.tiers {
            let left = json!({
                "evidence_at_ms": s.evidence_at.0,
                "expires_at_ms": s.evidence_at.0.saturating_add(s.ceiling_ms),
                "left_ms": time_left(s.evidence_at, now, s.ceiling_ms),
                "as_read_at_ms": s.read_at.0,
            });
            tiers.insert(name.clone(), left);
        }
        json!({"stubs": stubs, "tiers_as_last_read": tiers})
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{seed_catalog, seed_policy, HOUR, NOW};

    #[test]
    fn the_stubs_and_each_tier_as_last_read_report_their_time_left() {
        let (p, c) = (seed_policy(), seed_catalog());
        // The seed catalog's snapshot is two hours old, its ceiling 24 h.
        assert_eq!(stubs_left_ms(&p, Some(&c), Millis(NOW)), Some(22 * HOUR));
        assert_eq!(stubs_left_ms(&p, None, Millis(NOW)), None);
        let mut f = Freshness::default();
        f.answered(&p, "category", 3 * HOUR, Millis(NOW));
        f.answered(&p, "stubs", 0, Millis(NOW)); // not a KV tier: ignored
        let j = f.json(&p, Some(&c), Millis(NOW));
        assert_eq!(j["stubs"]["left_ms"], 22 * HOUR);
        assert_eq!(j["tiers_as_last_read"]["category"]["left_ms"], 21 * HOUR);
        assert!(j["tiers_as_last_read"].get("stubs").is_none());
    }
}
