//! [C-STUBS] [B-PUBLISH] The inventory snapshot and the one rule every curated SKU must
//! pass — the baked stubs (Tier 3) and the published KV lists (Tier 2) alike, through the
//! same code: present in the snapshot, active, with stock above the policy's minimum, and
//! the snapshot itself younger than the ceiling and not from the future (seed 000
//! ADV-UC-01: nothing served that did not pass inventory validation in the last 24 hours).
//!
//! The file (JSON, docs/policy.md "Catalog files"):
//! `{"taken_at": "RFC 3339", "skus": [{"sku", "status", "stock"}]}` — the snapshot time
//! travels inside the document it dates, and serde_json reports malformed input with a
//! line and column. Rows borrow from the text: a 200,000-row snapshot is one allocation
//! per row for the index, not four.

use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::path::Path;

use serde::Deserialize;
use understudy_core::time::format_duration;
use understudy_core::Millis;

use super::catalog_files::{json_error, listed};
use crate::codes::Code;
use crate::diag::Diagnostic;

/// A snapshot may be dated this far ahead of the validation time (clock skew) before it
/// is refused as coming from the future.
pub const FUTURE_SKEW_MS: u64 = 300_000;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct InventoryFile<'a> {
    #[serde(borrow)]
    taken_at: Cow<'a, str>,
    #[serde(borrow)]
    skus: Vec<InventoryRow<'a>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct InventoryRow<'a> {
    #[serde(borrow)]
    sku: Cow<'a, str>,
    #[serde(borrow)]
    status: Cow<'a, str>,
    stock: i64,
}

/// A parsed inventory snapshot.
pub struct Snapshot<'a> {
    /// As written in the file.
    pub taken_at: String,
    pub taken_at_ms: u64,
    rows: HashMap<Cow<'a, str>, (Cow<'a, str>, i64)>,
}

/// Why a SKU may not be served as a curated fallback.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unfit {
    Missing,
    Inactive(String),
    LowStock { stock: i64, min: u64 },
}

impl fmt::Display for Unfit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unfit::Missing => f.write_str("missing from the inventory snapshot"),
            Unfit::Inactive(s) => write!(f, "not active (status \"{s}\")"),
            Unfit::LowStock { stock, min } => write!(f, "stock {stock} ≤ {min}"),
        }
    }
}

/// Why the snapshot as a whole validates nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stale {
    InFuture { ahead_ms: u64 },
    TooOld { age_ms: u64, ceiling_ms: u64 },
}

impl Stale {
    /// The message, naming the snapshot's time.
    pub fn message(&self, taken_at: &str) -> String {
        match self {
            Stale::InFuture { ahead_ms } => format!(
                "the inventory snapshot is dated {} in the future ({taken_at})",
                human_age(*ahead_ms)
            ),
            Stale::TooOld { age_ms, ceiling_ms } => format!(
                "the inventory snapshot is {} old, over the {} ceiling: no SKU counts as validated",
                human_age(*age_ms),
                format_duration(*ceiling_ms)
            ),
        }
    }
}

/// A duration as an age reads best: `24h 17m`, `3m 20s`, `12s` (issue 10: "87447s old").
pub fn human_age(ms: u64) -> String {
    let s = ms / 1000;
    let (d, h, m, sec) = (s / 86_400, s / 3600 % 24, s / 60 % 60, s % 60);
    match (d, h, m) {
        (0, 0, 0) => format!("{sec}s"),
        (0, 0, _) => format!("{m}m {sec}s"),
        _ => format!("{}h {m}m", d * 24 + h),
    }
}

/// RFC 3339 as milliseconds since the epoch.
pub fn parse_time(s: &str) -> Option<u64> {
    let t = time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339).ok()?;
    u64::try_from(t.unix_timestamp_nanos() / 1_000_000).ok()
}

impl<'a> Snapshot<'a> {
    /// Parses the snapshot in `text` (read from `path`); a diagnostic naming what and where
    /// when it is malformed.
    pub fn parse(path: &Path, text: &'a str) -> Result<Snapshot<'a>, Box<Diagnostic>> {
        let file: InventoryFile<'a> = serde_json::from_str(text).map_err(|e| {
            Box::new(json_error(
                path,
                text,
                e.line(),
                e.column(),
                format!("the inventory snapshot is not valid: {e}"),
                "the snapshot is `{\"taken_at\": \"2026-11-30T00:00:00Z\", \"skus\": [{\"sku\": \"…\", \"status\": \"active\", \"stock\": 120}]}`",
            ))
        })?;
        let Some(taken_at_ms) = parse_time(&file.taken_at) else {
            let at = text.find(file.taken_at.as_ref()).unwrap_or(0);
            return Err(Box::new(
                Diagnostic::new(
                    Code::CatalogMalformed,
                    path,
                    format!(
                        "the snapshot time {} is not an RFC 3339 timestamp",
                        crate::parse::leaf::shown(&file.taken_at)
                    ),
                )
                .at((at, at + file.taken_at.len().min(64)), "not RFC 3339")
                .help("write it like \"2026-11-30T01:00:00Z\""),
            ));
        };
        let mut rows = HashMap::with_capacity(file.skus.len());
        let mut dup = BTreeSet::new();
        for row in file.skus {
            if let Some(_earlier) = rows.insert(row.sku.clone(), (row.status, row.stock)) {
                dup.insert(row.sku.into_owned());
            }
        }
        if !dup.is_empty() {
            let dup: Vec<String> = dup.iter().map(|s| format!("duplicated: {s}")).collect();
            return Err(Box::new(
                Diagnostic::new(
                    Code::CatalogMalformed,
                    path,
                    format!(
                        "the inventory snapshot lists {} SKU(s) more than once",
                        dup.len()
                    ),
                )
                .notes(listed(&dup))
                .help("export one row per SKU"),
            ));
        }
        Ok(Snapshot {
            taken_at: file.taken_at.into_owned(),
            taken_at_ms,
            rows,
        })
    }

    /// Whether the snapshot still validates anything at `now` under a `max_age_ms` ceiling.
    pub fn staleness(&self, now: Millis, max_age_ms: u64) -> Option<Stale> {
        if self.taken_at_ms > now.0.saturating_add(FUTURE_SKEW_MS) {
            return Some(Stale::InFuture {
                ahead_ms: self.taken_at_ms - now.0,
            });
        }
        let age_ms = now.since(Millis(self.taken_at_ms));
        (age_ms > max_age_ms).then_some(Stale::TooOld {
            age_ms,
            ceiling_ms: max_age_ms,
        })
    }

    /// The rule for one SKU: `None` when it may be served.
    pub fn judge(&self, sku: &str, min_stock: u64) -> Option<Unfit> {
        match self.rows.get(sku) {
            None => Some(Unfit::Missing),
            Some((status, _)) if !status.eq_ignore_ascii_case("active") => {
                Some(Unfit::Inactive(status.to_string()))
            }
            Some((_, stock)) if *stock <= i64::try_from(min_stock).unwrap_or(i64::MAX) => {
                Some(Unfit::LowStock {
                    stock: *stock,
                    min: min_stock,
                })
            }
            Some(_) => None,
        }
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = r#"{"taken_at": "2026-11-30T01:00:00Z", "skus": [
        {"sku": "A", "status": "active", "stock": 51},
        {"sku": "B", "status": "active", "stock": 50},
        {"sku": "C", "status": "discontinued", "stock": 900},
        {"sku": "D\u0021", "status": "ACTIVE", "stock": 60}
    ]}"#;

    #[test]
    fn the_rule_names_each_reason() {
        let s = Snapshot::parse(Path::new("i.json"), TEXT).unwrap();
        assert_eq!(s.judge("A", 50), None);
        assert_eq!(
            s.judge("B", 50),
            Some(Unfit::LowStock { stock: 50, min: 50 })
        );
        assert_eq!(
            s.judge("C", 50),
            Some(Unfit::Inactive("discontinued".into()))
        );
        assert_eq!(s.judge("D!", 50), None, "escaped SKUs are unescaped");
        assert_eq!(s.judge("Z", 50), Some(Unfit::Missing));
        assert_eq!(
            Unfit::LowStock { stock: 50, min: 50 }.to_string(),
            "stock 50 ≤ 50"
        );
    }

    #[test]
    fn the_snapshot_ages_against_the_ceiling() {
        let s = Snapshot::parse(Path::new("i.json"), TEXT).unwrap();
        let day = 86_400_000;
        assert_eq!(s.staleness(Millis(s.taken_at_ms + day), day), None);
        assert!(matches!(
            s.staleness(Millis(s.taken_at_ms + day + 1), day),
            Some(Stale::TooOld { .. })
        ));
        assert!(matches!(
            s.staleness(Millis(s.taken_at_ms - FUTURE_SKEW_MS - 1), day),
            Some(Stale::InFuture { .. })
        ));
    }

    #[test]
    fn malformed_snapshots_are_diagnostics_naming_the_place() {
        let p = Path::new("i.json");
        let d = Snapshot::parse(p, "{\"taken_at\": \"x\", \"skus\": []}")
            .err()
            .unwrap();
        assert!(d.message.contains("not an RFC 3339"), "{}", d.message);
        let d = Snapshot::parse(
            p,
            "{\"taken_at\": \"2026-11-30T01:00:00Z\", \"skus\": [{\"sku\": 1}]}",
        )
        .err()
        .unwrap();
        assert!(d.message.contains("not valid"), "{}", d.message);
        assert!(d.span.is_some());
        let twice = r#"{"taken_at": "2026-11-30T01:00:00Z", "skus": [
            {"sku": "A", "status": "active", "stock": 51}, {"sku": "A", "status": "active", "stock": 51}]}"#;
        let d = Snapshot::parse(p, twice).err().unwrap();
        assert_eq!(d.notes, vec!["duplicated: A"]);
    }
}
