//! [C-STUBS] The stub catalog, validated against the inventory snapshot.
//!
//! File formats (both JSON; see docs/policy.md "Catalog files"):
//! - catalog: `{"items": [{"sku": "...", "title": "...", "category": "...", ...}]}` — JSON
//!   because items carry nested display fields that the edge returns as they are;
//! - inventory snapshot: see [`super::inventory`], which also holds the rule every stub
//!   must pass — the same rule, through the same code, as the published KV lists.
//!
//! A nightly catalog may hold 200,000 items, so the parse borrows from the text, keeps
//! each item's JSON as written (whitespace removed, no re-serialisation through a map),
//! and keeps the texts once.

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use sha2::{Digest, Sha256};
use understudy_core::catalog::{Catalog, Item};
use understudy_core::policy::{CatalogRules, EmbeddedTier, Policy, TierKind};
use understudy_core::Millis;

use super::catalog_files::{encoding_problem, json_error, listed, Files};
use super::inventory::{Snapshot, Stale};
use super::Ctx;
use crate::codes::Code;
use crate::diag::{Diagnostic, Span};
use crate::parse::disclose::RawCatalog;

pub use crate::files::MAX_CATALOG_BYTES;

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
struct ItemFields<'a> {
    #[serde(borrow)]
    sku: Cow<'a, str>,
    #[serde(borrow)]
    title: Cow<'a, str>,
    #[serde(default, borrow)]
    category: Option<Cow<'a, str>>,
}

/// `raw` (valid JSON) without the whitespace between tokens: the item as written, compact.
/// Deterministic: the same text gives the same bytes.
pub fn minify(raw: &str) -> String {
    // Bytes, not chars: every byte JSON gives a meaning to is ASCII, and no byte of a
    // multi-byte UTF-8 sequence is, so runs are copied whole and the result stays UTF-8.
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut in_string = false;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if in_string {
            match b {
                b'\\' => {
                    out.extend_from_slice(&bytes[i..(i + 2).min(bytes.len())]);
                    i += 2;
                    continue;
                }
                b'"' => in_string = false,
                _ => {}
            }
            out.push(b);
        } else if b == b'"' {
            in_string = true;
            out.push(b);
        } else if !matches!(b, b' ' | b'\t' | b'\n' | b'\r') {
            out.push(b);
        }
        i += 1;
    }
    // Only ASCII whitespace outside strings was removed from valid UTF-8.
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// Whether any tier searches the catalog by keyword (then the bake carries the index).
pub fn needs_keyword_index(p: &Policy) -> bool {
    p.cascade
        .tiers
        .iter()
        .any(|t| matches!(t.kind, TierKind::Embedded(EmbeddedTier::Keyword { .. })))
}

/// The catalog's hash, as baked and as the release ID counts it: the SHA-256 of the
/// catalog file's SHA-256 followed by the inventory snapshot's (raw digests).
pub fn catalog_hash(stubs: &[u8], inventory: &[u8]) -> String {
    let mut h = Sha256::new();
    h.update(Sha256::digest(stubs));
    h.update(Sha256::digest(inventory));
    hex::encode(h.finalize())
}

/// Checks the catalog against the inventory snapshot. `raw` gives the spans of the
/// policy's `[catalog]` keys (absent for a baked policy); `keyword_index` says whether a
/// tier searches the catalog (then the bake carries the index).
pub fn check_catalog(
    ctx: &mut Ctx,
    rules: &CatalogRules,
    raw: Option<&RawCatalog>,
    files: Files<'_>,
    keyword_index: bool,
    now: Millis,
) -> Option<CatalogCheck> {
    let key_span = |key: &str| -> Span {
        raw.map(|r| match key {
            "stubs" => r.stubs.span,
            "inventory" => r.inventory.span,
            _ => r.span,
        })
        .unwrap_or((0, 0))
    };
    let (stubs_path, inv_path) = match files {
        Files::Given(f) => (f.stubs.to_path_buf(), f.inventory.to_path_buf()),
        Files::Declared {
            base,
            allow_outside,
        } => {
            let mut paths = Vec::new();
            for (key, rel) in [("stubs", &rules.stubs), ("inventory", &rules.inventory)] {
                match crate::files::confine(base, rel, allow_outside) {
                    Ok(p) => paths.push(p),
                    Err(msg) => ctx.push(
                        ctx.diag(Code::PathOutsidePolicyDir, msg)
                            .at(key_span(key), "outside the policy's directory")
                            .help("move the file next to the policy (or below it), or pass `--allow-outside-paths` if this layout is intended"),
                    ),
                }
            }
            let [stubs, inv] = <[PathBuf; 2]>::try_from(paths).ok()?;
            (stubs, inv)
        }
    };
    let unreadable_help = match files {
        Files::Declared { .. } => "check the path (relative to the policy file) and that the file is a UTF-8 JSON file under 64 MiB",
        Files::Given(_) => "check the path given on the command line and that the file is a UTF-8 JSON file under 64 MiB",
    };
    let mut sources: Vec<(PathBuf, String)> = Vec::new();
    // The text of `path`, or a diagnostic on `catalog.KEY` and `None`.
    let read = |ctx: &mut Ctx, key: &str, path: &Path| -> Option<String> {
        // UTF-16 (with or without a byte-order mark) is named as such, not as bad JSON.
        if let Some(d) = encoding_problem(path) {
            ctx.diags.push(d);
            return None;
        }
        match crate::files::read_text(path, MAX_CATALOG_BYTES) {
            Ok(t) => Some(t),
            Err(msg) => {
                ctx.push(
                    ctx.diag(Code::CatalogUnreadable, msg)
                        .at(key_span(key), "named here")
                        .help(unreadable_help),
                );
                None
            }
        }
    };
    crate::timing::mark("policy");
    // One file at a time, each dropped as soon as nothing needs it: a 200,000-item catalog
    // and its inventory are never in memory together with the parsed items of both.
    let Some(stubs_text) = read(ctx, "stubs", &stubs_path) else {
        let _ = read(ctx, "inventory", &inv_path); // its problems too, in the same run
        return None;
    };
    let stubs_digest = Sha256::digest(stubs_text.as_bytes());
    crate::timing::mark("read + hash catalog");
    let stubs_text_ref = stubs_text.as_str();

    // The catalog.
    let mut items = Vec::new();
    let mut ok = true;
    match serde_json::from_str::<CatalogFile>(stubs_text_ref) {
        Err(e) => {
            ctx.diags.push(json_error(&stubs_path, stubs_text_ref, e.line(), e.column(), format!("the catalog is not valid: {e}"), "the catalog is `{\"items\": [{\"sku\": \"…\", \"title\": \"…\", \"category\": \"…\"}]}`"));
            ok = false;
        }
        Ok(file) => {
            items.reserve(file.items.len());
            let mut seen: HashMap<Cow<str>, usize> = HashMap::with_capacity(file.items.len());
            // Problems are grouped by kind: one diagnostic each, at most MAX_LISTED named.
            let mut bad_items: Vec<(Span, String)> = Vec::new();
            let mut duplicates: Vec<(Span, String)> = Vec::new();
            for (n, raw) in file.items.into_iter().enumerate() {
                let offset = raw.get().as_ptr() as usize - stubs_text_ref.as_ptr() as usize;
                let span = (offset, offset + raw.get().len().min(1));
                let fields: ItemFields = match serde_json::from_str(raw.get()) {
                    Ok(f) => f,
                    Err(e) => {
                        bad_items.push((span, format!("item {}: {e}", n + 1)));
                        continue;
                    }
                };
                if fields.sku.trim().is_empty() {
                    bad_items.push((span, format!("item {}: empty `sku`", n + 1)));
                    continue;
                }
                if let Some(first) = seen.get(&fields.sku) {
                    duplicates.push((
                        span,
                        format!(
                            "SKU `{}` appears twice: items {} and {}",
                            fields.sku,
                            first + 1,
                            n + 1
                        ),
                    ));
                    continue;
                }
                seen.insert(fields.sku.clone(), n);
                items.push(Item {
                    sku: fields.sku.into_owned(),
                    title: fields.title.into_owned(),
                    category: fields.category.map(Cow::into_owned),
                    json: minify(raw.get()),
                });
            }
            for (what, found, help) in [
                ("malformed item(s)", bad_items, "each item needs a string `sku` (not empty) and `title`, and may have a `category`"),
                ("duplicate SKU(s)", duplicates, "keep one entry per SKU"),
            ] {
                let Some((first, _)) = found.first() else {
                    continue;
                };
                ok = false;
                let notes: Vec<String> = found.iter().map(|(_, n)| n.clone()).collect();
                ctx.push(
                    Diagnostic::new(Code::CatalogMalformed, &stubs_path, format!("the catalog has {} {what}", found.len()))
                        .at(*first, "the first one")
                        .notes(listed(&notes))
                        .help(help),
                );
            }
            if items.is_empty() && ok {
                ctx.push(
                    ctx.diag(
                        Code::CatalogMalformed,
                        format!("the catalog `{}` has no items", stubs_path.display()),
                    )
                    .at(key_span("stubs"), "empty catalog")
                    .help("the final net must hold something: add validated items"),
                );
                ok = false;
            }
        }
    }
    crate::timing::mark("parse catalog");
    // The catalog's text is needed again only to show a diagnostic in it: otherwise it goes
    // now, before the inventory is indexed (peak memory of a large bake).
    let about = |diags: &[Diagnostic], p: &Path| diags.iter().any(|d| d.file == p);
    if about(&ctx.diags, &stubs_path) {
        sources.push((stubs_path.clone(), stubs_text));
    } else {
        drop(stubs_text);
    }

    // The inventory snapshot, and the rule every stub must pass.
    let Some(inv_text) = read(ctx, "inventory", &inv_path) else {
        return Some(CatalogCheck {
            catalog: None,
            hash: String::new(),
            sources,
        });
    };
    let hash = {
        let mut h = Sha256::new();
        h.update(stubs_digest);
        h.update(Sha256::digest(inv_text.as_bytes()));
        hex::encode(h.finalize())
    };
    crate::timing::mark("read + hash inventory");
    let snapshot = match Snapshot::parse(&inv_path, &inv_text) {
        Ok(s) => s,
        Err(d) => {
            ctx.diags.push(*d);
            sources.push((inv_path.clone(), inv_text));
            return Some(CatalogCheck {
                catalog: None,
                hash,
                sources,
            });
        }
    };
    crate::timing::mark("parse inventory");
    if let Some(stale) = snapshot.staleness(now, rules.max_age_ms) {
        let (label, help) = match stale {
            Stale::InFuture { .. } => ("snapshot from the future", "check the exporter's clock, or pass `--now` to check as of another time"),
            Stale::TooOld { .. } => ("snapshot too old", "export a fresh inventory snapshot and re-bake (`understudy bake`), or pass `--now` to check as of the snapshot's day"),
        };
        ctx.push(
            ctx.diag(
                Code::UntestedCompensation,
                stale.message(&snapshot.taken_at),
            )
            .at(key_span("inventory"), label)
            .help(help),
        );
        ok = false;
    }

    let offending: Vec<String> = items
        .iter()
        .filter_map(|item| {
            snapshot
                .judge(&item.sku, rules.min_stock)
                .map(|why| format!("{}: {why}", item.sku))
        })
        .collect();
    if !offending.is_empty() {
        ctx.push(
            ctx.diag(Code::UntestedCompensation, format!("{} stub SKU(s) failed inventory validation", offending.len()))
                .at(key_span("stubs"), "this catalog")
                .notes(offending)
                .help(format!("remove these SKUs from `{}` or restock them; stubs must be active with stock above {}", rules.stubs, rules.min_stock)),
        );
        ok = false;
    }
    crate::timing::mark("validate SKUs");

    let taken_at = snapshot.taken_at_ms;
    drop(snapshot);
    if about(&ctx.diags, &inv_path) {
        sources.push((inv_path.clone(), inv_text));
    } else {
        drop(inv_text);
    }
    let catalog = ok.then(|| {
        if keyword_index {
            Catalog::new(items, now.0, taken_at)
        } else {
            Catalog::without_index(items, now.0, taken_at)
        }
    });
    crate::timing::mark("keyword index");
    Some(CatalogCheck {
        catalog,
        hash,
        sources,
    })
}

#[cfg(test)]
mod minify_tests {
    use super::minify;

    #[test]
    fn whitespace_goes_strings_stay() {
        assert_eq!(
            minify("{ \"a\" : [ 1, 2 ],\n \"b\": \"x  y\\\" z\", \"é\": \"\\u00e9 ü\" }"),
            "{\"a\":[1,2],\"b\":\"x  y\\\" z\",\"é\":\"\\u00e9 ü\"}"
        );
        assert_eq!(minify("\"\\\\\" , 1"), "\"\\\\\",1");
    }
}
