//! [B-PUBLISH] Publishing a KV-backed curated tier (seed 000's category top sellers, Tier
//! 2): per-key lists validated against the inventory snapshot with the stubs' rule and the
//! stubs' code ([`crate::validate::inventory`]), written as the file `wrangler kv bulk put`
//! takes — keys from the tier's template, values in the form the edge reads
//! (`{"items": [...]}`), and in each key's metadata the validation the edge checks
//! (`snapshot_at`, `validated_at`, and `written_at` = the earlier of the two; see
//! `understudy_core::entry`).
//!
//! Nothing unvalidated is published: one SKU that fails refuses the run, every offender
//! listed with its key and reason — or, when asked (`drop_invalid`), that SKU is left out
//! and named. A list left empty is not published (the edge would refuse an empty list)
//! and is named too. Same inputs, same bytes: keys sorted, values and metadata rendered by
//! hand-fixed rules.

pub mod lists;

use std::path::Path;

use serde::Serialize;
use understudy_core::policy::{Policy, TierKind};
use understudy_core::request::Validator;
use understudy_core::Millis;

use crate::codes::Code;
use crate::diag::{Diagnostic, Severity};
use crate::validate::inventory::Snapshot;

/// Workers KV refuses keys longer than this (bytes).
pub const MAX_KEY_BYTES: usize = 512;
/// Metadata keys of a published entry (the edge reads them: `understudy_core::entry`).
pub use understudy_core::entry::{SNAPSHOT_AT, VALIDATED_AT};

pub struct Request<'a> {
    pub policy: &'a Policy,
    /// The tier's name in the policy's cascade.
    pub tier: &'a str,
    pub lists_path: &'a Path,
    pub lists_text: &'a str,
    pub inventory_path: &'a Path,
    pub inventory_text: &'a str,
    /// The validation time.
    pub now: Millis,
    /// Leave out (and name) SKUs that fail, instead of refusing the run.
    pub drop_invalid: bool,
}

/// A published tier, in memory.
#[derive(Debug, Clone)]
pub struct Published {
    /// The KV binding the entries are for.
    pub binding: String,
    /// The `wrangler kv bulk put` file.
    pub bulk: String,
    pub keys: usize,
    pub items: usize,
    pub snapshot_at_ms: u64,
    pub validated_at_ms: u64,
    /// When the edge stops answering from these entries: the evidence (the snapshot) plus
    /// the tier's staleness ceiling.
    pub expires_at_ms: u64,
    /// `KEY: SKU: reason` of each SKU left out (with `drop_invalid`).
    pub dropped: Vec<String>,
    /// Keys whose every SKU was left out: not published.
    pub emptied: Vec<String>,
}

/// One line of the bulk file. Field order is the output's (deterministic).
#[derive(Serialize)]
struct BulkEntry<'a> {
    key: &'a str,
    value: &'a str,
    metadata: Metadata,
}

/// A published entry's metadata. `written_at` (the evidence time) lets an edge that does
/// not know the tier is published — a policy without `published = true` — still judge its
/// age correctly; a published tier requires the other two.
#[derive(Serialize)]
struct Metadata {
    snapshot_at: u64,
    validated_at: u64,
    written_at: u64,
}

fn diag(code: Code, file: &Path, message: String, notes: Vec<String>, help: &str) -> Diagnostic {
    Diagnostic {
        code,
        severity: Severity::Error,
        message,
        file: file.to_path_buf(),
        span: None,
        label: String::new(),
        secondary: vec![],
        notes,
        help: help.into(),
    }
}

/// The hash of a release's curated data: the stub catalog and inventory (`catalog_hash`) and,
/// when the release publishes KV tiers, each tier's lists (tier name → SHA-256 of the lists
/// file). It is the release's `catalog_hash`, so the release ID covers the lists too — but
/// not when they were validated, as for the stubs.
pub fn curated_hash(
    catalog_hash: &str,
    lists: &std::collections::BTreeMap<String, String>,
) -> String {
    if lists.is_empty() {
        return catalog_hash.to_string();
    }
    let mut text = format!("understudy-curated-v1\n{catalog_hash}\n");
    for (tier, sha) in lists {
        text.push_str(&format!("{tier}\n{sha}\n"));
    }
    crate::dist::sha256_hex(text.as_bytes())
}

/// Validates and renders; the diagnostics (every one) when anything is refused.
pub fn publish(req: &Request<'_>) -> Result<Published, Vec<Diagnostic>> {
    let policy_file = Path::new(&req.policy.service.name);
    let lists_file = req.lists_path;
    let tier = req.policy.cascade.tiers.iter().find(|t| t.name == req.tier);
    let kv = match tier.map(|t| &t.kind) {
        Some(TierKind::Kv(kv)) => kv,
        Some(other) => {
            return Err(vec![diag(
                Code::InvalidValue,
                policy_file,
                format!(
                    "tier `{}` is a {} tier; only KV tiers are published",
                    req.tier,
                    other.name()
                ),
                vec![],
                "name a `kind = \"kv\"` tier with --tier",
            )])
        }
        None => {
            let names: Vec<&str> = req
                .policy
                .cascade
                .tiers
                .iter()
                .filter(|t| matches!(t.kind, TierKind::Kv(_)))
                .map(|t| t.name.as_str())
                .collect();
            return Err(vec![diag(
                Code::InvalidValue,
                policy_file,
                format!("the policy has no tier `{}`", req.tier),
                vec![format!("its KV tiers: {}", names.join(", "))],
                "name one of its KV tiers with --tier",
            )]);
        }
    };
    if !kv.published {
        return Err(vec![diag(
            Code::InvalidValue,
            policy_file,
            format!(
                "tier `{}` is not declared published: the edge would serve its entries without \
                 checking their inventory validation",
                req.tier
            ),
            vec![],
            &format!(
                "add `published = true` to tier `{}` in the policy (and re-deploy it) before \
                 publishing to it",
                req.tier
            ),
        )]);
    }
    let params: Vec<&str> = kv.key.params().collect();
    let [param] = params.as_slice() else {
        return Err(vec![diag(
            Code::InvalidValue,
            policy_file,
            format!(
                "tier `{}`'s key `{}` has {} parameters; publishing takes a key with exactly one \
                 (a list per value of it)",
                req.tier,
                kv.key.source,
                params.len()
            ),
            vec![],
            "publish to a tier keyed by one parameter, e.g. `category_top:{category_id}`",
        )]);
    };
    let Some(rules) = req.policy.catalog.as_ref() else {
        return Err(vec![diag(
            Code::InvalidValue,
            policy_file,
            "the policy has no [catalog] table: its min_stock and max_age are the rule published \
             SKUs must pass"
                .into(),
            vec![],
            "add the [catalog] table (seed 000: min_stock = 50, max_age = \"24h\")",
        )]);
    };
    let identity = req.policy.param(param).is_some_and(|p| p.identity);

    let mut problems: Vec<Diagnostic> = Vec::new();
    let lists = match lists::parse(lists_file, req.lists_text, param) {
        Ok(l) => l,
        Err(notes) => {
            problems.push(diag(
                Code::CatalogMalformed,
                lists_file,
                format!("the lists file is malformed ({} problem(s))", notes.len()),
                notes,
                "see docs/publish.md for the JSON and CSV formats",
            ));
            lists::Lists::default()
        }
    };
    let snapshot = match Snapshot::parse(req.inventory_path, req.inventory_text) {
        Ok(s) => Some(s),
        Err(d) => {
            problems.push(*d);
            None
        }
    };
    let Some(snapshot) = snapshot else {
        return Err(problems);
    };
    if let Some(stale) = snapshot.staleness(req.now, rules.max_age_ms) {
        problems.push(diag(
            Code::UntestedCompensation,
            req.inventory_path,
            stale.message(&snapshot.taken_at),
            vec![],
            "export a fresh inventory snapshot and publish again, or pass --now to check as of \
             another time",
        ));
    }

    // Keys the edge can reach, within KV's limit.
    let validator = Validator::new(req.policy).map_err(|e| {
        vec![diag(
            Code::InvalidValue,
            policy_file,
            e,
            vec![],
            "fix the parameter's pattern",
        )]
    })?;
    let mut bad_keys = Vec::new();
    let mut empty = Vec::new();
    let mut rendered: Vec<(String, &String)> = Vec::new();
    for (value, entries) in &lists.lists {
        if entries.is_empty() {
            empty.push(format!("`{value}`"));
            continue;
        }
        let line = entries[0].line;
        if let Err(why) = validator.check(param, value) {
            bad_keys.push(format!("line {line}: key `{value}`: {why}"));
            continue;
        }
        let Some(key) = kv.key.render(|_| Some((value.as_str(), identity))) else {
            bad_keys.push(format!("line {line}: key `{value}`: does not render"));
            continue;
        };
        if key.len() > MAX_KEY_BYTES {
            bad_keys.push(format!(
                "line {line}: key `{value}` renders to {} bytes, over Workers KV's {MAX_KEY_BYTES}",
                key.len()
            ));
            continue;
        }
        rendered.push((key, value));
    }
    if !bad_keys.is_empty() {
        problems.push(diag(
            Code::InvalidValue,
            lists_file,
            format!(
                "{} list key(s) are values no request for `{param}` can have",
                bad_keys.len()
            ),
            bad_keys,
            "the keys are values of the tier's key parameter, as a request gives them",
        ));
    }
    if !empty.is_empty() {
        problems.push(diag(
            Code::CatalogMalformed,
            lists_file,
            format!("{} list(s) are empty: {}", empty.len(), empty.join(", ")),
            vec![],
            "give every list at least one SKU, or leave the key out",
        ));
    }

    // The rule, per SKU: the stubs' own code.
    let mut offenders = Vec::new();
    let mut dups = Vec::new();
    for (value, entries) in &lists.lists {
        let mut seen = std::collections::HashSet::new();
        for e in entries {
            if !seen.insert(e.sku.as_str()) {
                dups.push(format!("line {}: `{value}` lists {} twice", e.line, e.sku));
            }
            if let Some(why) = snapshot.judge(&e.sku, rules.min_stock) {
                offenders.push((
                    value.clone(),
                    e.sku.clone(),
                    format!("line {}: {value}: {}: {why}", e.line, e.sku),
                ));
            }
        }
    }
    if !dups.is_empty() {
        problems.push(diag(
            Code::CatalogMalformed,
            lists_file,
            format!("{} SKU(s) appear twice in their list", dups.len()),
            dups,
            "keep one entry per SKU in a list",
        ));
    }
    if !offenders.is_empty() && !req.drop_invalid {
        let keys: std::collections::BTreeSet<&str> =
            offenders.iter().map(|(k, _, _)| k.as_str()).collect();
        problems.push(diag(
            Code::UntestedCompensation,
            lists_file,
            format!(
                "{} SKU(s) in {} list(s) of tier `{}` failed inventory validation; nothing was published",
                offenders.len(),
                keys.len(),
                req.tier
            ),
            offenders.iter().map(|(_, _, n)| n.clone()).collect(),
            &format!(
                "remove these SKUs or restock them (active, stock above {}), or pass \
                 --drop-invalid to publish the lists without them",
                rules.min_stock
            ),
        ));
    }
    if !problems.is_empty() {
        return Err(problems);
    }

    // Render: sorted keys, each list minus what was dropped.
    rendered.sort();
    let dropped: std::collections::HashSet<(&str, &str)> = offenders
        .iter()
        .map(|(k, s, _)| (k.as_str(), s.as_str()))
        .collect();
    let snapshot_at_ms = snapshot.taken_at_ms;
    let validated_at_ms = req.now.0;
    let mut bulk = String::from("[\n");
    let mut keys = 0;
    let mut items = 0;
    let mut emptied = Vec::new();
    for (key, value) in &rendered {
        let kept: Vec<&str> = lists.lists[*value]
            .iter()
            .filter(|e| !dropped.contains(&(value.as_str(), e.sku.as_str())))
            .map(|e| e.json.as_str())
            .collect();
        if kept.is_empty() {
            emptied.push((*value).clone());
            continue;
        }
        let text = format!("{{\"items\":[{}]}}", kept.join(","));
        let line = BulkEntry {
            key,
            value: &text,
            metadata: Metadata {
                snapshot_at: snapshot_at_ms,
                validated_at: validated_at_ms,
                written_at: snapshot_at_ms.min(validated_at_ms),
            },
        };
        if keys > 0 {
            bulk.push_str(",\n");
        }
        // Strings, integers: serialising cannot fail.
        bulk.push_str(&serde_json::to_string(&line).unwrap_or_default());
        keys += 1;
        items += kept.len();
    }
    bulk.push_str("\n]\n");
    if keys == 0 {
        return Err(vec![diag(
            Code::UntestedCompensation,
            lists_file,
            format!(
                "every SKU of tier `{}` failed inventory validation; nothing to publish",
                req.tier
            ),
            offenders.iter().map(|(_, _, n)| n.clone()).collect(),
            "fix the lists or the inventory",
        )]);
    }
    Ok(Published {
        binding: kv.binding.clone(),
        bulk,
        keys,
        items,
        snapshot_at_ms,
        validated_at_ms,
        expires_at_ms: snapshot_at_ms
            .min(validated_at_ms)
            .saturating_add(kv.max_staleness_ms),
        dropped: offenders.into_iter().map(|(_, _, n)| n).collect(),
        emptied,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use understudy_core::entry;
    use understudy_core::policy::{CatalogRules, OnExpired};

    const NOW: Millis = Millis(1_796_040_000_000); // 2026-11-30T12:00:00Z
    const INVENTORY: &str = r#"{"taken_at": "2026-11-30T01:00:00Z", "skus": [
        {"sku": "A-1", "status": "active", "stock": 400},
        {"sku": "A-2", "status": "active", "stock": 51},
        {"sku": "K-1", "status": "active", "stock": 90},
        {"sku": "LOW", "status": "active", "stock": 50},
        {"sku": "GONE", "status": "discontinued", "stock": 300}
    ]}"#;

    fn policy() -> Policy {
        let mut p = crate::fixtures::sample_policy();
        p.catalog = Some(CatalogRules {
            stubs: "c.json".into(),
            inventory: "i.json".into(),
            max_age_ms: 86_400_000,
            min_stock: 50,
            on_expired: OnExpired::Refuse,
        });
        for t in &mut p.cascade.tiers {
            if let TierKind::Kv(kv) = &mut t.kind {
                kv.published = t.name == "category";
            }
        }
        p
    }

    fn run(
        p: &Policy,
        lists: &str,
        ext: &str,
        drop_invalid: bool,
    ) -> Result<Published, Vec<Diagnostic>> {
        let path = format!("lists.{ext}");
        publish(&Request {
            policy: p,
            tier: "category",
            lists_path: Path::new(&path),
            lists_text: lists,
            inventory_path: Path::new("i.json"),
            inventory_text: INVENTORY,
            now: NOW,
            drop_invalid,
        })
    }

    fn entries(p: &Published) -> Vec<serde_json::Value> {
        serde_json::from_str(&p.bulk).unwrap()
    }

    #[test]
    fn lists_become_bulk_entries_the_edge_reads_as_validated() {
        let p = policy();
        let out = run(
            &p,
            r#"{"lists": {"kitchen": ["K-1"], "audio": ["A-1", {"sku": "A-2", "title": "x"}]}}"#,
            "json",
            false,
        )
        .unwrap();
        assert_eq!(
            (out.keys, out.items, out.binding.as_str()),
            (2, 3, "CATEGORY_TOP")
        );
        let e = entries(&out);
        assert_eq!(e[0]["key"], "category_top:audio");
        assert_eq!(e[1]["key"], "category_top:kitchen");
        let value = e[0]["value"].as_str().unwrap();
        assert_eq!(
            value,
            r#"{"items":[{"sku":"A-1"},{"sku":"A-2","title":"x"}]}"#
        );
        // Read back by the edge's own parsers: as a published tier, and as a plain KV tier.
        let read = entry::parse_published(Some(value), Some(&e[0]["metadata"])).unwrap();
        assert_eq!(read.items.len(), 2);
        assert_eq!(read.written_at, Millis(out.snapshot_at_ms));
        let plain = entry::parse(Some(value), Some(&e[0]["metadata"])).unwrap();
        assert_eq!(plain.written_at, Millis(out.snapshot_at_ms));
        assert_eq!(out.expires_at_ms, out.snapshot_at_ms + 86_400_000);
        // Deterministic: same inputs, same bytes; the file's key order does not matter.
        let again = run(
            &p,
            r#"{"lists": {"audio": ["A-1", {"title": "x", "sku": "A-2"}], "kitchen": ["K-1"]}}"#,
            "json",
            false,
        )
        .unwrap();
        assert_eq!(e[1], entries(&again)[1]);
        assert_eq!(out.bulk, run(&p, r#"{"lists": {"kitchen": ["K-1"], "audio": ["A-1", {"sku": "A-2", "title": "x"}]}}"#, "json", false).unwrap().bulk);
    }

    #[test]
    fn every_offender_is_listed_with_its_key_and_reason_and_nothing_is_published() {
        let p = policy();
        let csv = "category_id,sku\naudio,A-1\naudio,LOW\nkitchen,GONE\nkitchen,K-1\nbags,NOPE\n";
        let diags = run(&p, csv, "csv", false).unwrap_err();
        assert_eq!(diags.len(), 1, "{diags:?}");
        let d = &diags[0];
        assert_eq!(d.code, Code::UntestedCompensation);
        assert!(d.message.contains("3 SKU(s) in 3 list(s)"), "{}", d.message);
        assert_eq!(
            d.notes,
            vec![
                "line 3: audio: LOW: stock 50 ≤ 50",
                "line 6: bags: NOPE: missing from the inventory snapshot",
                "line 4: kitchen: GONE: not active (status \"discontinued\")",
            ]
        );
        assert!(d.help.contains("--drop-invalid"));
    }

    #[test]
    fn drop_invalid_leaves_out_and_names_each_offender_and_emptied_list() {
        let p = policy();
        let csv = "category_id,sku\naudio,A-1\naudio,LOW\nkitchen,GONE\nbags,NOPE\n";
        let out = run(&p, csv, "csv", true).unwrap();
        assert_eq!((out.keys, out.items), (1, 1));
        assert_eq!(out.dropped.len(), 3);
        assert_eq!(out.emptied, vec!["bags", "kitchen"]);
        assert!(!out.bulk.contains("LOW") && !out.bulk.contains("kitchen"));
        let all_bad = run(&p, "category_id,sku\naudio,LOW\n", "csv", true).unwrap_err();
        assert!(all_bad[0].message.contains("nothing to publish"));
    }

    #[test]
    fn keys_no_request_can_have_and_malformed_lists_are_refused_together() {
        let p = policy();
        let json = r#"{"lists": {"Audio!": ["A-1"], "empty": [], "audio": ["A-1", "A-1"]}}"#;
        let diags = run(&p, json, "json", false).unwrap_err();
        let all: Vec<String> = diags
            .iter()
            .map(|d| format!("{} {:?}", d.message, d.notes))
            .collect();
        assert!(
            all.iter()
                .any(|m| m.contains("Audio!") && m.contains("pattern")),
            "{all:?}"
        );
        assert!(
            all.iter()
                .any(|m| m.contains("1 list(s) are empty: `empty`")),
            "{all:?}"
        );
        assert!(all.iter().any(|m| m.contains("lists A-1 twice")), "{all:?}");
        let diags = run(&p, "{\"lists\": ", "json", false).unwrap_err();
        assert_eq!(diags[0].code, Code::CatalogMalformed);
    }

    #[test]
    fn a_stale_snapshot_validates_nothing() {
        let p = policy();
        let r = publish(&Request {
            policy: &p,
            tier: "category",
            lists_path: Path::new("l.json"),
            lists_text: r#"{"lists": {"audio": ["A-1"]}}"#,
            inventory_path: Path::new("i.json"),
            inventory_text: INVENTORY,
            now: Millis(NOW.0 + 2 * 86_400_000),
            drop_invalid: true,
        });
        let d = r.unwrap_err();
        assert!(
            d[0].message.contains("over the 1d ceiling"),
            "{}",
            d[0].message
        );
    }

    #[test]
    fn only_kv_tiers_with_one_key_parameter_are_published() {
        let p = policy();
        let r = publish(&Request {
            policy: &p,
            tier: "curated",
            lists_path: Path::new("l.json"),
            lists_text: "{}",
            inventory_path: Path::new("i.json"),
            inventory_text: INVENTORY,
            now: NOW,
            drop_invalid: false,
        });
        assert!(r.unwrap_err()[0].message.contains("only KV tiers"));
        let r = publish(&Request {
            tier: "nope",
            ..Request {
                policy: &p,
                tier: "",
                lists_path: Path::new("l.json"),
                lists_text: "{}",
                inventory_path: Path::new("i.json"),
                inventory_text: INVENTORY,
                now: NOW,
                drop_invalid: false,
            }
        });
        assert!(r.unwrap_err()[0].notes[0].contains("category"));
    }

    /// Publishing to a tier the policy does not declare published would put entries the edge
    /// serves without checking their validation: refused, with the fix named.
    #[test]
    fn a_tier_not_declared_published_is_refused() {
        let mut p = policy();
        for t in &mut p.cascade.tiers {
            if let TierKind::Kv(kv) = &mut t.kind {
                kv.published = false;
            }
        }
        let lists = r#"{"lists": {"audio": ["A-1"]}}"#;
        let d = run(&p, lists, "json", false).unwrap_err();
        assert!(
            d[0].message.contains("not declared published"),
            "{}",
            d[0].message
        );
        assert!(d[0].help.contains("published = true"), "{}", d[0].help);
        assert!(run(&policy(), lists, "json", false).is_ok());
    }

    /// A tier keyed by an identity parameter gets hashed keys, as the edge looks them up.
    #[test]
    fn identity_keys_are_hashed_like_the_edge_hashes_them() {
        let mut p = policy();
        p.params[0].identity = true;
        let out = run(&p, r#"{"lists": {"audio": ["A-1"]}}"#, "json", false).unwrap();
        let key = entries(&out)[0]["key"].as_str().unwrap().to_string();
        assert_eq!(
            key,
            format!(
                "category_top:{}",
                understudy_core::template::identity_hash("audio")
            )
        );
    }
}
