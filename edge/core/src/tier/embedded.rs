//! [E-CASCADE] [E-VERSION] The embedded tier: the baked catalog answered from memory — the
//! curated list (per category when a parameter names one) or a keyword search over the
//! titles. No I/O, so it is the final net an `always_answer` cascade ends with; its answers
//! are as old as the inventory snapshot the stubs were validated against, and past the
//! policy's `catalog.max_age` they are refused or disclosed as the policy says.

use serde::{Deserialize, Serialize};

use super::{Env, Found, Keyed, Kind, Miss, Start};
use crate::catalog::OnExpired;
use crate::classify::Items;
use crate::http::Outbound;
use crate::time::Millis;

/// The baked catalog, answered from memory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum EmbeddedTier {
    /// The curated list; per category when `by` names a parameter holding the category.
    Curated { by: Option<String>, limit: u32 },
    /// Keyword search over the catalog titles, with the query in parameter `query`.
    Keyword {
        query: String,
        limit: u32,
        /// What it answers when nothing matches (or the request has no query).
        no_match: NoMatch,
    },
}

crate::words! {
    /// What a keyword tier answers when no catalog title shares a word with the query, or
    /// the request carries no query: the final net of an `always_answer` cascade must answer.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
    pub enum NoMatch {
        /// The catalog's curated list (its first `limit` items).
        Curated = "curated",
        /// An empty, disclosed result.
        Empty = "empty",
        /// Nothing: the cascade goes on to the next tier (a 503 after the last one).
        NextTier = "next_tier",
    }
}

impl Kind for EmbeddedTier {
    fn timeout_ms(&self) -> u64 {
        0
    }

    fn timeout_label(&self) -> &'static str {
        "embedded, no I/O"
    }

    fn local(&self) -> bool {
        true
    }

    fn uses_catalog(&self) -> bool {
        true
    }

    /// The catalog is the same for everyone.
    fn per_user(&self, _: &dyn Fn(&str) -> bool) -> bool {
        false
    }

    fn params(&self) -> Vec<Keyed<'_>> {
        match self {
            EmbeddedTier::Curated { by: Some(by), .. } => vec![Keyed {
                key: "by",
                value: by,
            }],
            EmbeddedTier::Curated { by: None, .. } => Vec::new(),
            EmbeddedTier::Keyword { query, .. } => vec![Keyed {
                key: "query",
                value: query,
            }],
        }
    }

    /// Answers from the baked catalog: the items, their age (since the inventory snapshot
    /// the stubs were validated against) and whether they are past the catalog's ceiling.
    fn start<'p>(&'p self, env: &Env<'_>, _: &dyn Fn(&str) -> Outbound) -> Start<'p> {
        match self.answer(env) {
            Ok(found) => Start::Answer(found),
            Err(miss) => Start::Skip(miss),
        }
    }
}

impl EmbeddedTier {
    fn answer(&self, env: &Env<'_>) -> Result<Found, Miss> {
        let catalog = env
            .catalog
            .ok_or_else(|| Miss::new("NO_CATALOG", "the bake carries no catalog"))?;
        let age_ms = env.now.since(Millis(catalog.evidence_at_ms()));
        let mut catalog_expired = false;
        if let Some(rules) = env.catalog_rules {
            if age_ms > rules.max_age_ms {
                match rules.on_expired {
                    OnExpired::Refuse => {
                        return Err(Miss::new(
                            "CATALOG_EXPIRED",
                            format!(
                                "stubs checked against an inventory snapshot {age_ms} ms old, past the {} ms ceiling; re-bake",
                                rules.max_age_ms
                            ),
                        ))
                    }
                    OnExpired::Disclose => catalog_expired = true,
                }
            }
        }
        let found = |items| Found {
            items,
            age_ms,
            catalog_expired,
        };
        let items: Items = match self {
            EmbeddedTier::Curated { by, limit } => {
                let category = by.as_deref().and_then(|p| env.params.get(p));
                catalog
                    .curated(category, *limit as usize)
                    .into_iter()
                    .map(|i| i.json.clone())
                    .collect()
            }
            EmbeddedTier::Keyword {
                query,
                limit,
                no_match,
            } => {
                let hits = env
                    .params
                    .get(query)
                    .map(|q| catalog.search(q, *limit as usize))
                    .unwrap_or_default();
                if hits.is_empty() {
                    match no_match {
                        NoMatch::Curated => catalog.curated(None, *limit as usize),
                        NoMatch::Empty => return Ok(found(Vec::new())),
                        NoMatch::NextTier => {
                            return Err(Miss::new("NO_MATCH", "no catalog title matches the query"))
                        }
                    }
                } else {
                    hits
                }
                .into_iter()
                .map(|i| i.json.clone())
                .collect()
            }
        };
        if items.is_empty() {
            return Err(Miss::new("EMBEDDED_EMPTY", "no stub matches"));
        }
        Ok(found(items))
    }
}
