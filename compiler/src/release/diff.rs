//! `releases diff A B`: what changes for the endpoint if B replaces A — the policy, setting
//! by setting (budget and deadline, origin timeouts and attempts, breaker, tiers with their
//! ceilings and timeouts, disclosure), and the catalog delta (SKUs added, removed, changed).
//!
//! The policy is compared as data (flattened to `section.key = value`), so a setting added
//! to the policy language shows up here without touching this file. Durations (`*_ms`) are
//! printed the way policies write them; tiers are matched by name, not position.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use serde_json::Value;
use understudy_core::bake::Bake;
use understudy_core::catalog::Catalog;
use understudy_core::policy::{Policy, Tier};
use understudy_core::time::format_duration;

use super::record::Record;

/// `budget.deadline_ms` → (`budget.deadline`, `45ms`).
fn show(key: &str, v: &Value) -> (String, String) {
    if let (Some(name), Some(ms)) = (key.strip_suffix("_ms"), v.as_u64()) {
        return (name.to_string(), format_duration(ms));
    }
    if let (Some(name), Some(s)) = (key.strip_suffix("_s"), v.as_u64()) {
        return (name.to_string(), format!("{s}s"));
    }
    let text = match v {
        Value::Null => "none".to_string(),
        Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
    };
    (key.to_string(), text)
}

/// Flattens `v` into `prefix.key = leaf` pairs. Enum variants (`{"Rate": {...}}`) become a
/// `mode` entry plus the variant's fields; key templates become their source text.
fn flatten(prefix: &str, v: &Value, out: &mut BTreeMap<String, Value>) {
    let join = |k: &str| {
        if prefix.is_empty() {
            k.to_string()
        } else {
            format!("{prefix}.{k}")
        }
    };
    match v {
        Value::Object(map) if map.contains_key("source") && map.contains_key("parts") => {
            out.insert(prefix.to_string(), map["source"].clone());
        }
        Value::Object(map)
            if map.len() == 1 && map.keys().all(|k| k.starts_with(char::is_uppercase)) =>
        {
            for (variant, inner) in map {
                out.insert(join("mode"), Value::String(variant.to_lowercase()));
                flatten(prefix, inner, out);
            }
        }
        Value::Object(map) => {
            for (k, inner) in map {
                flatten(&join(k), inner, out);
            }
        }
        Value::Array(items) if items.iter().all(|i| !i.is_object()) => {
            out.insert(prefix.to_string(), v.clone());
        }
        Value::Array(items) => {
            for (i, inner) in items.iter().enumerate() {
                flatten(&format!("{prefix}[{i}]"), inner, out);
            }
        }
        leaf => {
            out.insert(prefix.to_string(), leaf.clone());
        }
    }
}

fn flat<T: serde::Serialize>(prefix: &str, v: &T) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    if let Ok(v) = serde_json::to_value(v) {
        flatten(prefix, &v, &mut out);
    }
    out
}

/// Changed, added and removed settings between two flattened maps, as lines.
fn compare(a: &BTreeMap<String, Value>, b: &BTreeMap<String, Value>, indent: &str) -> Vec<String> {
    let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    let mut lines = Vec::new();
    for k in keys {
        match (a.get(k), b.get(k)) {
            (Some(x), Some(y)) if x == y => {}
            (Some(x), Some(y)) => {
                let (name, x) = show(k, x);
                let (_, y) = show(k, y);
                lines.push(format!("{indent}{name}: {x} → {y}"));
            }
            (Some(x), None) => {
                let (name, x) = show(k, x);
                lines.push(format!("{indent}{name}: {x} → (removed)"));
            }
            (None, Some(y)) => {
                let (name, y) = show(k, y);
                lines.push(format!("{indent}{name}: (none) → {y}"));
            }
            (None, None) => {}
        }
    }
    lines
}

/// A tier's settings without the `kind.` prefix: `mode`, `max_staleness_ms`, ….
fn tier_flat(t: &Tier) -> BTreeMap<String, Value> {
    let mut m = flat("", &t.kind);
    m.insert(
        "cache_control".into(),
        t.cache_control.clone().map_or(Value::Null, Value::String),
    );
    m
}

/// One tier in a line: kind, ceiling, timeout, limit.
fn tier_summary(t: &Tier) -> String {
    flat("", &t.kind)
        .iter()
        .filter(|(k, _)| !k.ends_with("write_through") && k.as_str() != "key")
        .map(|(k, v)| {
            let (name, v) = show(k, v);
            format!("{name} {v}")
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The policy diff, one line per change; empty when the policies mean the same.
pub fn policy_diff(a: &Policy, b: &Policy) -> Vec<String> {
    let mut lines = Vec::new();
    if a.version != b.version {
        lines.push(format!("version: {:?} → {:?}", a.version, b.version));
    }
    // Everything but the tiers, section by section, in the policy's order.
    let strip = |p: &Policy| {
        let mut v = serde_json::to_value(p).unwrap_or(Value::Null);
        if let Some(c) = v.get_mut("cascade").and_then(Value::as_object_mut) {
            c.remove("tiers");
        }
        if let Some(o) = v.as_object_mut() {
            o.remove("version");
        }
        let mut out = BTreeMap::new();
        flatten("", &v, &mut out);
        out
    };
    let (fa, fb) = (strip(a), strip(b));
    const ORDER: [&str; 11] = [
        "service",
        "params",
        "identity",
        "budget",
        "origin",
        "breaker",
        "cascade",
        "disclosure",
        "storm",
        "catalog",
        "admin",
    ];
    let section = |k: &str| {
        let head = k.split(['.', '[']).next().unwrap_or("");
        ORDER.iter().position(|s| *s == head).unwrap_or(ORDER.len())
    };
    let mut changed = compare(&fa, &fb, "");
    changed.sort_by_key(|l| section(l));
    lines.extend(changed);

    // Tiers, by name.
    let names = |p: &Policy| {
        p.cascade
            .tiers
            .iter()
            .map(|t| t.name.clone())
            .collect::<Vec<_>>()
    };
    let (na, nb) = (names(a), names(b));
    for t in &b.cascade.tiers {
        if !na.contains(&t.name) {
            lines.push(format!(
                "tier `{}` added ({}: {})",
                t.name,
                t.kind.name(),
                tier_summary(t)
            ));
        }
    }
    for t in &a.cascade.tiers {
        match b.cascade.tiers.iter().find(|u| u.name == t.name) {
            None => lines.push(format!(
                "tier `{}` removed (was {}: {})",
                t.name,
                t.kind.name(),
                tier_summary(t)
            )),
            Some(u) if u != t => {
                lines.push(format!("tier `{}` changed:", t.name));
                lines.extend(compare(&tier_flat(t), &tier_flat(u), "  "));
            }
            Some(_) => {}
        }
    }
    let common_a: Vec<&String> = na.iter().filter(|n| nb.contains(n)).collect();
    let common_b: Vec<&String> = nb.iter().filter(|n| na.contains(n)).collect();
    if na != nb && (common_a != common_b || na.len() == nb.len()) {
        lines.push(format!(
            "cascade order: {} → {}",
            na.join(" → "),
            nb.join(" → ")
        ));
    }
    lines
}

/// The catalog delta: SKUs added, removed, and kept with changed fields.
pub fn catalog_diff(a: Option<&Catalog>, b: Option<&Catalog>) -> Vec<String> {
    let index = |c: Option<&Catalog>| -> BTreeMap<String, String> {
        c.map(|c| {
            c.items
                .iter()
                .map(|i| (i.sku.clone(), i.json.clone()))
                .collect()
        })
        .unwrap_or_default()
    };
    let (ia, ib) = (index(a), index(b));
    let added: Vec<&String> = ib.keys().filter(|k| !ia.contains_key(*k)).collect();
    let removed: Vec<&String> = ia.keys().filter(|k| !ib.contains_key(*k)).collect();
    let changed: Vec<&String> = ia
        .iter()
        .filter(|(k, v)| ib.get(*k).is_some_and(|w| w != *v))
        .map(|(k, _)| k)
        .collect();
    let list = |v: &[&String]| v.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ");
    let mut lines = Vec::new();
    if !added.is_empty() {
        lines.push(format!("+ {} SKU(s) added: {}", added.len(), list(&added)));
    }
    if !removed.is_empty() {
        lines.push(format!(
            "- {} SKU(s) removed: {}",
            removed.len(),
            list(&removed)
        ));
    }
    if !changed.is_empty() {
        lines.push(format!(
            "~ {} SKU(s) with changed fields: {}",
            changed.len(),
            list(&changed)
        ));
    }
    lines
}

/// The whole report for `releases diff A B`.
pub fn report(ra: &Record, a: &Bake, rb: &Record, b: &Bake) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} → {} ({})",
        ra.id,
        rb.id,
        if ra.service == rb.service {
            ra.service.clone()
        } else {
            format!("service {} → {}", ra.service, rb.service)
        }
    );
    let policy = policy_diff(&a.policy, &b.policy);
    if policy.is_empty() {
        let _ = writeln!(
            out,
            "\npolicy: unchanged ({} {:?})",
            ra.policy.file, ra.policy.version
        );
    } else {
        let _ = writeln!(
            out,
            "\npolicy: {} change(s) ({} {:?} → {} {:?})",
            policy.iter().filter(|l| !l.starts_with(' ')).count(),
            ra.policy.file,
            ra.policy.version,
            rb.policy.file,
            rb.policy.version
        );
        for l in &policy {
            let _ = writeln!(out, "  {l}");
        }
    }
    let count = |c: Option<&Catalog>| c.map_or(0, |c| c.items.len());
    let snap = |r: &Record| {
        r.catalog
            .as_ref()
            .map_or("none".to_string(), |c| c.snapshot_at.clone())
    };
    let delta = catalog_diff(a.catalog.as_ref(), b.catalog.as_ref());
    if ra.catalog.as_ref().map(|c| &c.sha256) == rb.catalog.as_ref().map(|c| &c.sha256) {
        let _ = writeln!(
            out,
            "\ncatalog: unchanged ({} item(s), snapshot {})",
            count(a.catalog.as_ref()),
            snap(ra)
        );
    } else {
        let _ = writeln!(
            out,
            "\ncatalog: {} → {} item(s), snapshot {} → {}",
            count(a.catalog.as_ref()),
            count(b.catalog.as_ref()),
            snap(ra),
            snap(rb)
        );
        if delta.is_empty() {
            let _ = writeln!(
                out,
                "  same SKUs and fields (only the inventory snapshot changed)"
            );
        }
        for l in &delta {
            let _ = writeln!(out, "  {l}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::sample_policy;
    use understudy_core::policy::{Breaker, TierKind};

    #[test]
    fn changed_deadline_breaker_and_tiers_are_named() {
        let a = sample_policy();
        let mut b = a.clone();
        b.version = "2".into();
        b.budget.deadline_ms = 40;
        b.origin.attempts = 2;
        b.breaker = Breaker::Consecutive {
            failures: 3,
            cooldown_ms: 30_000,
        };
        if let TierKind::Kv(kv) = &mut b.cascade.tiers[0].kind {
            kv.max_staleness_ms = 3_600_000;
        }
        b.cascade.tiers.remove(1);
        let lines = policy_diff(&a, &b);
        let text = lines.join("\n");
        assert!(text.contains("budget.deadline: 45ms → 40ms"), "{text}");
        assert!(text.contains("origin.attempts: 1 → 2"), "{text}");
        assert!(text.contains("breaker.failures: 5 → 3"), "{text}");
        assert!(
            text.contains("tier `category` changed:\n  max_staleness: 1d → 1h"),
            "{text}"
        );
        assert!(
            text.contains("tier `curated` removed (was embedded:"),
            "{text}"
        );
        assert!(policy_diff(&a, &a).is_empty());
    }
}
