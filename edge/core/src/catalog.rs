//! The baked stub catalog: curated items answered from memory, and a keyword index for
//! search endpoints. Built once by the compiler; read once per isolate by the Worker.
//!
//! Items keep their original JSON text so the edge can answer without re-serialising.
//! The rules the policy sets on them (`[catalog]`) are declared here, below the policy, for
//! the embedded tier that applies them.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Item {
    pub sku: String,
    pub title: String,
    pub category: Option<String>,
    /// The item as the catalog owner wrote it, as compact JSON.
    pub json: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Catalog {
    /// Items in catalog order (the curated order).
    pub items: Vec<Item>,
    /// When the stubs were validated against the inventory snapshot (ms since epoch).
    pub validated_at_ms: u64,
    /// When the inventory snapshot was taken (ms since epoch).
    pub snapshot_at_ms: u64,
    /// Sorted, de-duplicated title tokens and, for each, the item indices containing it.
    pub tokens: Vec<(String, Vec<u32>)>,
}

crate::words! {
    /// What to do when the baked stubs' validation has outlived `max_age_ms`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
    pub enum OnExpired {
        /// Skip the embedded tier, with a logged reason.
        Refuse = "refuse",
        /// Serve, disclosing `X-Catalog-Expired: true`.
        Disclose = "disclose",
    }
}

/// [P-CATALOG] The stub catalog and how it is validated (the policy's `[catalog]`): how old
/// the evidence behind the stubs may grow before the embedded tier refuses or discloses them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CatalogRules {
    /// Catalog file, relative to the policy file.
    pub stubs: String,
    /// Inventory snapshot file, relative to the policy file.
    pub inventory: String,
    /// Stubs must have been validated within this (seed: 24 h).
    pub max_age_ms: u64,
    /// A stub needs stock strictly above this (seed: 50).
    pub min_stock: u64,
    pub on_expired: OnExpired,
}

/// The keyword index of `items`: every title token, sorted, with the ascending indices of
/// the items containing it. Built by sorting (token, item) pairs — one pass, no map.
fn index(items: &[Item]) -> Vec<(String, Vec<u32>)> {
    let mut pairs: Vec<(std::borrow::Cow<'_, str>, u32)> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        for tok in item
            .title
            .split(|c: char| !c.is_alphanumeric())
            .filter(|t| !t.is_empty())
        {
            // ASCII without capitals is its own lower case: no allocation.
            let tok = if tok.bytes().all(|b| b.is_ascii() && !b.is_ascii_uppercase()) {
                std::borrow::Cow::Borrowed(tok)
            } else {
                std::borrow::Cow::Owned(tok.to_lowercase())
            };
            pairs.push((tok, i as u32));
        }
    }
    pairs.sort_unstable();
    pairs.dedup();
    let mut out: Vec<(String, Vec<u32>)> = Vec::new();
    for (tok, i) in pairs {
        match out.last_mut() {
            Some((t, postings)) if *t == tok => postings.push(i),
            _ => out.push((tok.into_owned(), vec![i])),
        }
    }
    out
}

/// Splits text into lower-case alphanumeric tokens.
pub fn tokenize(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|t| !t.is_empty())
        .map(|t| t.to_lowercase())
}

impl Catalog {
    /// Builds the catalog and its keyword index. Deterministic: same items, same bytes.
    pub fn new(items: Vec<Item>, validated_at_ms: u64, snapshot_at_ms: u64) -> Catalog {
        let tokens = index(&items);
        Catalog {
            items,
            validated_at_ms,
            snapshot_at_ms,
            tokens,
        }
    }

    /// The catalog without a keyword index, for policies that never search it (curated
    /// tiers only): a smaller bake, built faster. [`Catalog::search`] then finds nothing.
    pub fn without_index(items: Vec<Item>, validated_at_ms: u64, snapshot_at_ms: u64) -> Catalog {
        Catalog {
            items,
            validated_at_ms,
            snapshot_at_ms,
            tokens: Vec::new(),
        }
    }

    /// What the stubs' freshness is measured from: the inventory snapshot they were checked
    /// against, since a re-bake today of yesterday's snapshot knows nothing newer than the
    /// snapshot. (Never later than the validation itself; 0 means unknown.)
    pub fn evidence_at_ms(&self) -> u64 {
        if self.snapshot_at_ms == 0 {
            self.validated_at_ms
        } else {
            self.snapshot_at_ms.min(self.validated_at_ms)
        }
    }

    /// The curated list: items of `category` (all items when `None`), in catalog order.
    /// Falls back to the global list when the category has no items, so the final net
    /// always holds something.
    pub fn curated(&self, category: Option<&str>, limit: usize) -> Vec<&Item> {
        if let Some(cat) = category {
            let picked: Vec<&Item> = self
                .items
                .iter()
                .filter(|i| i.category.as_deref() == Some(cat))
                .take(limit)
                .collect();
            if !picked.is_empty() {
                return picked;
            }
        }
        self.items.iter().take(limit).collect()
    }

    /// Keyword search: items whose title has a token starting with any query word, in
    /// catalog order. Words match as prefixes so `water` finds `waterproof`.
    pub fn search(&self, query: &str, limit: usize) -> Vec<&Item> {
        let mut hits: Vec<u32> = Vec::new();
        for word in tokenize(query) {
            let start = self
                .tokens
                .partition_point(|(t, _)| t.as_str() < word.as_str());
            for (tok, postings) in &self.tokens[start..] {
                if !tok.starts_with(word.as_str()) {
                    break;
                }
                hits.extend_from_slice(postings);
            }
        }
        hits.sort_unstable();
        hits.dedup();
        hits.into_iter()
            .take(limit)
            .filter_map(|i| self.items.get(i as usize))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(sku: &str, title: &str, cat: &str) -> Item {
        Item {
            sku: sku.into(),
            title: title.into(),
            category: Some(cat.into()),
            json: format!("{{\"sku\":\"{sku}\"}}"),
        }
    }

    /// Seed 002's five-item catalog.
    fn seed_catalog() -> Catalog {
        Catalog::new(
            vec![
                item("1", "wireless noise-cancelling headphones", "audio"),
                item("2", "programmable drip coffee maker", "kitchen"),
                item("3", "waterproof laptop backpack", "bags"),
                item("4", "backlit mechanical keyboard", "computing"),
                item("5", "water-resistant sports headphones", "audio"),
            ],
            0,
            0,
        )
    }

    fn skus(items: Vec<&Item>) -> Vec<&str> {
        items.into_iter().map(|i| i.sku.as_str()).collect()
    }

    #[test]
    fn keyword_search_matches_seed_002_queries() {
        let c = seed_catalog();
        assert_eq!(skus(c.search("headphones", 10)), vec!["1", "5"]);
        assert_eq!(skus(c.search("backpack", 10)), vec!["3"]);
        assert_eq!(skus(c.search("keyboard", 10)), vec!["4"]);
        assert_eq!(skus(c.search("headphones water", 10)), vec!["1", "3", "5"]);
        assert_eq!(skus(c.search("coffee maker", 10)), vec!["2"]);
    }

    #[test]
    fn search_is_case_insensitive_and_limited() {
        let c = seed_catalog();
        assert_eq!(skus(c.search("HEADPHONES", 1)), vec!["1"]);
        assert!(c.search("zebra", 10).is_empty());
        assert!(c.search("", 10).is_empty());
    }

    #[test]
    fn curated_by_category_falls_back_to_global() {
        let c = seed_catalog();
        assert_eq!(skus(c.curated(Some("audio"), 10)), vec!["1", "5"]);
        assert_eq!(skus(c.curated(Some("unknown"), 2)), vec!["1", "2"]);
        assert_eq!(skus(c.curated(None, 3)), vec!["1", "2", "3"]);
    }

    #[test]
    fn index_is_deterministic() {
        assert_eq!(seed_catalog(), seed_catalog());
    }

    /// The sort-built index equals the obvious map-built one (what earlier bakes carried).
    #[test]
    fn the_index_is_every_token_with_its_items_in_order() {
        let c = seed_catalog();
        let mut expect: std::collections::BTreeMap<String, Vec<u32>> = Default::default();
        for (i, item) in c.items.iter().enumerate() {
            for t in tokenize(&item.title) {
                let p = expect.entry(t).or_default();
                if p.last() != Some(&(i as u32)) {
                    p.push(i as u32);
                }
            }
        }
        assert_eq!(c.tokens, expect.into_iter().collect::<Vec<_>>());
        let upper = Catalog::new(vec![item("1", "Water BOTTLE water", "x")], 0, 0);
        assert_eq!(
            upper.tokens,
            vec![
                ("bottle".to_string(), vec![0]),
                ("water".to_string(), vec![0])
            ]
        );
        let bare = Catalog::without_index(c.items.clone(), 0, 0);
        assert!(bare.tokens.is_empty() && bare.search("headphones", 10).is_empty());
        assert_eq!(bare.curated(Some("audio"), 10).len(), 2);
    }
}
