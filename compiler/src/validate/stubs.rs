//! [C-STUBS] The stub catalog, validated against the inventory snapshot.
//!
//! File formats (both JSON; see docs/policy.md "Catalog files"):
//! - catalog: `{"items": [{"sku": "...", "title": "...", "category": "...", ...}]}` — JSON
//!   because items carry nested display fields that the edge returns as they are;
//! - inventory snapshot: `{"taken_at": "RFC 3339", "skus": [{"sku", "status", "stock"}]}` —
//!   the snapshot time travels inside the document it dates, and serde_json reports
//!   malformed input with a line and column.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Deserialize;
use sha2::{Digest, Sha256};
use understudy_core::catalog::{Catalog, Item};
use understudy_core::policy::Policy;
use understudy_core::time::format_duration;
use understudy_core::Millis;

use crate::codes;
use crate::diag::{Diagnostic, Severity};
use crate::parse::node::Ctx;

/// Catalog and inventory files larger than this are refused.
pub const MAX_CATALOG_BYTES: u64 = 64 << 20;

pub struct CatalogCheck {
    pub catalog: Option<Catalog>,
    pub hash: String,
    pub sources: Vec<(PathBuf, String)>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CatalogFile<'a> {
    #[serde(borrow)]
    items: Vec<&'a serde_json::value::RawValue>,
}

#[derive(Deserialize)]
struct ItemFields {
    sku: String,
    title: String,
    #[serde(default)]
    category: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct InventoryFile {
    taken_at: String,
    skus: Vec<InventoryRow>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct InventoryRow {
    sku: String,
    status: String,
    stock: i64,
}

/// A problem located in a JSON file by line and column (1-based).
fn json_error(
    path: &Path,
    text: &str,
    line: usize,
    column: usize,
    message: String,
    help: &str,
) -> Diagnostic {
    let offset = offset_of(text, line, column);
    Diagnostic {
        code: codes::CATALOG_MALFORMED,
        severity: Severity::Error,
        message,
        file: path.to_path_buf(),
        span: Some((offset, (offset + 1).min(text.len().max(offset)))),
        label: "here".into(),
        secondary: vec![],
        notes: vec![],
        help: help.into(),
    }
}

fn offset_of(text: &str, line: usize, column: usize) -> usize {
    let mut off = 0;
    for (i, l) in text.split_inclusive('\n').enumerate() {
        if i + 1 == line {
            return (off + column.saturating_sub(1)).min(text.len());
        }
        off += l.len();
    }
    text.len()
}

/// The catalog's hash, as baked and as the release ID counts it: the SHA-256 of the
/// catalog file's SHA-256 followed by the inventory snapshot's (raw digests).
pub fn catalog_hash(stubs: &[u8], inventory: &[u8]) -> String {
    let mut h = Sha256::new();
    h.update(Sha256::digest(stubs));
    h.update(Sha256::digest(inventory));
    hex::encode(h.finalize())
}

fn parse_time(s: &str) -> Option<u64> {
    let t = time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339).ok()?;
    u64::try_from(t.unix_timestamp_nanos() / 1_000_000).ok()
}

pub fn check_catalog(ctx: &mut Ctx, p: &Policy, base: &Path, now: Millis) -> Option<CatalogCheck> {
    let rules = p.catalog.as_ref()?;
    let stubs_path = base.join(&rules.stubs);
    let inv_path = base.join(&rules.inventory);
    let mut sources = Vec::new();
    let mut read = |ctx: &mut Ctx, key: &str, path: &Path| -> Option<String> {
        // UTF-16 (with or without a byte-order mark) is named as such, not as bad JSON.
        if let Some(d) = super::explicit::encoding_problem(path) {
            ctx.diags.push(d);
            return None;
        }
        match super::read_text(path, MAX_CATALOG_BYTES) {
            Ok(t) => {
                sources.push((path.to_path_buf(), t.clone()));
                Some(t)
            }
            Err(msg) => {
                let sp = ctx.span_of(&format!("catalog.{key}")).unwrap_or((0, 0));
                ctx.error(codes::CATALOG_UNREADABLE, sp, msg, "named here", "check the path (relative to the policy file) and that the file is UTF-8 JSON under 64 MiB");
                None
            }
        }
    };
    let stubs_text = read(ctx, "stubs", &stubs_path);
    let inv_text = read(ctx, "inventory", &inv_path);
    let (stubs_text, inv_text) = (stubs_text?, inv_text?);
    let hash = catalog_hash(stubs_text.as_bytes(), inv_text.as_bytes());

    // The catalog.
    let mut items = Vec::new();
    let mut ok = true;
    match serde_json::from_str::<CatalogFile>(&stubs_text) {
        Err(e) => {
            ctx.diags.push(json_error(&stubs_path, &stubs_text, e.line(), e.column(), format!("the catalog is not valid: {e}"), "the catalog is `{\"items\": [{\"sku\": \"…\", \"title\": \"…\", \"category\": \"…\"}]}`"));
            ok = false;
        }
        Ok(file) => {
            let mut seen: BTreeMap<String, usize> = BTreeMap::new();
            for raw in file.items {
                let offset = raw.get().as_ptr() as usize - stubs_text.as_ptr() as usize;
                let span = Some((offset, offset + raw.get().len().min(1)));
                let mk = |message: String, help: &str| Diagnostic {
                    code: codes::CATALOG_MALFORMED,
                    severity: Severity::Error,
                    message,
                    file: stubs_path.clone(),
                    span,
                    label: "this item".into(),
                    secondary: vec![],
                    notes: vec![],
                    help: help.into(),
                };
                let fields: ItemFields = match serde_json::from_str(raw.get()) {
                    Ok(f) => f,
                    Err(e) => {
                        ctx.diags.push(mk(
                            format!("catalog item {} is not valid: {e}", seen.len() + 1),
                            "each item needs a string `sku` and `title`, and may have a `category`",
                        ));
                        ok = false;
                        continue;
                    }
                };
                if fields.sku.trim().is_empty() {
                    ctx.diags.push(mk(
                        "a catalog item has an empty `sku`".into(),
                        "give every item its SKU",
                    ));
                    ok = false;
                    continue;
                }
                if let Some(first) = seen.insert(fields.sku.clone(), items.len()) {
                    ctx.diags.push(mk(
                        format!(
                            "SKU `{}` appears twice in the catalog (items {} and {})",
                            fields.sku,
                            first + 1,
                            items.len() + 1
                        ),
                        "keep one entry per SKU",
                    ));
                    ok = false;
                    continue;
                }
                // Compact, key-sorted JSON: deterministic bytes for the bake.
                let json = serde_json::from_str::<serde_json::Value>(raw.get())
                    .map(|v| v.to_string())
                    .unwrap_or_default();
                items.push(Item {
                    sku: fields.sku,
                    title: fields.title,
                    category: fields.category,
                    json,
                });
            }
            if items.is_empty() && ok {
                let sp = ctx.span_of("catalog.stubs").unwrap_or((0, 0));
                ctx.error(
                    codes::CATALOG_MALFORMED,
                    sp,
                    format!("the catalog `{}` has no items", stubs_path.display()),
                    "empty catalog",
                    "the final net must hold something: add validated items",
                );
                ok = false;
            }
        }
    }

    // The inventory snapshot.
    let inventory = match serde_json::from_str::<InventoryFile>(&inv_text) {
        Err(e) => {
            ctx.diags.push(json_error(&inv_path, &inv_text, e.line(), e.column(), format!("the inventory snapshot is not valid: {e}"), "the snapshot is `{\"taken_at\": \"2026-11-30T00:00:00Z\", \"skus\": [{\"sku\": \"…\", \"status\": \"active\", \"stock\": 120}]}`"));
            None
        }
        Ok(inv) => Some(inv),
    };
    let inventory = inventory?;
    let Some(taken_at) = parse_time(&inventory.taken_at) else {
        let at = inv_text.find(&inventory.taken_at).unwrap_or(0);
        ctx.diags.push(Diagnostic {
            code: codes::CATALOG_MALFORMED,
            severity: Severity::Error,
            message: format!(
                "the snapshot time `{}` is not an RFC 3339 timestamp",
                inventory.taken_at
            ),
            file: inv_path.clone(),
            span: Some((at, at + inventory.taken_at.len())),
            label: "not RFC 3339".into(),
            secondary: vec![],
            notes: vec![],
            help: "write it like \"2026-11-30T01:00:00Z\"".into(),
        });
        return None;
    };
    let mut rows: BTreeMap<&str, &InventoryRow> = BTreeMap::new();
    let mut dup = BTreeSet::new();
    for row in &inventory.skus {
        if rows.insert(row.sku.as_str(), row).is_some() {
            dup.insert(row.sku.clone());
        }
    }
    if !dup.is_empty() {
        ctx.diags.push(Diagnostic {
            code: codes::CATALOG_MALFORMED,
            severity: Severity::Error,
            message: format!(
                "the inventory snapshot lists {} SKU(s) more than once",
                dup.len()
            ),
            file: inv_path.clone(),
            span: None,
            label: String::new(),
            secondary: vec![],
            notes: dup.iter().map(|s| format!("duplicated: {s}")).collect(),
            help: "export one row per SKU".into(),
        });
        return None;
    }

    let age = now.since(Millis(taken_at));
    if taken_at > now.0.saturating_add(300_000) {
        let sp = ctx.span_of("catalog.inventory").unwrap_or((0, 0));
        ctx.error(
            codes::UNTESTED_COMPENSATION,
            sp,
            format!(
                "the inventory snapshot is dated {} in the future ({})",
                format_duration(taken_at - now.0),
                inventory.taken_at
            ),
            "snapshot from the future",
            "check the exporter's clock, or pass `--now` to check as of another time",
        );
        ok = false;
    } else if age > rules.max_age_ms {
        let sp = ctx.span_of("catalog.inventory").unwrap_or((0, 0));
        ctx.error(
            codes::UNTESTED_COMPENSATION,
            sp,
            format!("the inventory snapshot is {} old, over the {} ceiling: no stub counts as validated", format_duration(age / 1000 * 1000), format_duration(rules.max_age_ms)),
            "snapshot too old",
            "export a fresh inventory snapshot and re-bake (`understudy bake`), or pass `--now` to check as of the snapshot's day",
        );
        ok = false;
    }

    let mut offending = Vec::new();
    for item in &items {
        match rows.get(item.sku.as_str()) {
            None => offending.push(format!("{}: missing from the inventory snapshot", item.sku)),
            Some(r) if !r.status.eq_ignore_ascii_case("active") => offending.push(format!(
                "{}: not active (status \"{}\")",
                item.sku, r.status
            )),
            Some(r) if r.stock <= rules.min_stock as i64 => offending.push(format!(
                "{}: stock {} ≤ {}",
                item.sku, r.stock, rules.min_stock
            )),
            Some(_) => {}
        }
    }
    if !offending.is_empty() {
        let sp = ctx.span_of("catalog.stubs").unwrap_or((0, 0));
        ctx.diags.push(Diagnostic {
            code: codes::UNTESTED_COMPENSATION,
            severity: Severity::Error,
            message: format!("{} stub SKU(s) failed inventory validation", offending.len()),
            file: ctx.file.clone(),
            span: Some(sp),
            label: "this catalog".into(),
            secondary: vec![],
            notes: offending,
            help: format!("remove these SKUs from `{}` or restock them; stubs must be active with stock above {}", rules.stubs, rules.min_stock),
        });
        ok = false;
    }

    let catalog = ok.then(|| Catalog::new(items, now.0, taken_at));
    Some(CatalogCheck {
        catalog,
        hash,
        sources,
    })
}
