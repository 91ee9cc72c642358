//! Getting a drill ready: the policy copied with a fresh inventory stamp, the KV seed file
//! for the edge server, and each scenario request as an HTTP request (parameters where the
//! policy reads them, a signed token when they are claims).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, Result};
use serde_json::{json, Value};
use understudy_core::policy::Policy;
use understudy_core::Millis;

use super::driver::Planned;
use understudy_compiler::simulate::request;
use understudy_compiler::simulate::scenario::Scenario;

/// A policy copied next to a fresh inventory snapshot (taken an hour ago).
pub fn stamp_policy(policy: &Path, dir: &Path, now: Millis) -> Result<PathBuf> {
    let text = std::fs::read_to_string(policy)
        .with_context(|| format!("cannot read {}", policy.display()))?;
    let name = policy
        .file_name()
        .context("the policy path has no file name")?;
    let dst = dir.join(name);
    std::fs::write(&dst, &text)?;
    let table: toml::Table = toml::from_str(&text).unwrap_or_default();
    let base = policy.parent().unwrap_or(Path::new("."));
    if let Some(cat) = table.get("catalog").and_then(|c| c.as_table()) {
        for key in ["stubs", "inventory"] {
            let Some(file) = cat.get(key).and_then(|v| v.as_str()) else {
                continue;
            };
            let (from, to) = (base.join(file), dir.join(file));
            if let Some(parent) = to.parent() {
                std::fs::create_dir_all(parent)?;
            }
            if key == "inventory" {
                let mut inv: Value = serde_json::from_str(
                    &std::fs::read_to_string(&from)
                        .with_context(|| format!("cannot read {}", from.display()))?,
                )
                .with_context(|| format!("{} is not JSON", from.display()))?;
                if let Some(obj) = inv.as_object_mut().filter(|o| o.contains_key("taken_at")) {
                    obj.insert(
                        "taken_at".into(),
                        json!(rfc3339(now.0.saturating_sub(3_600_000))?),
                    );
                }
                std::fs::write(&to, serde_json::to_string_pretty(&inv)?)?;
            } else {
                std::fs::copy(&from, &to)
                    .with_context(|| format!("cannot copy {}", from.display()))?;
            }
        }
    }
    Ok(dst)
}

pub fn rfc3339(ms: u64) -> Result<String> {
    let t = time::OffsetDateTime::from_unix_timestamp((ms / 1000) as i64)
        .context("time out of range")?;
    Ok(t.format(&time::format_description::well_known::Rfc3339)?)
}

pub fn epoch_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// The HTTP request for scenario request `i` — [`request::plan`], with tokens issued now.
pub fn plan_request(
    policy: &Policy,
    sc: &Scenario,
    i: u64,
    tokens: &mut BTreeMap<String, String>,
) -> Planned {
    request::plan(policy, sc, i, tokens, epoch_ms() / 1000)
}

/// The KV seed file for edge-server.mjs: `[[kv]]` entries written `age` before now.
pub fn kv_seed(sc: &Scenario, now: Millis) -> Value {
    let mut by: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for k in &sc.kv {
        let items: Vec<Value> = k.items.iter().map(|s| json!({ "sku": s })).collect();
        let written = (now.0 as i64 - k.age_ms).max(0);
        let mut entry = json!({ "key": k.key, "value": { "items": items }, "written_at": written });
        if k.published {
            let at = Millis(written as u64);
            entry["metadata"] = understudy_core::entry::published_metadata(at, at);
        }
        by.entry(k.binding.clone()).or_default().push(entry);
    }
    json!(by)
}

#[cfg(test)]
mod tests {
    use super::*;
    use understudy_compiler::load::load_policy;
    use understudy_compiler::simulate::scenario::{self, RawScenario};

    #[test]
    fn the_policy_copy_has_a_fresh_inventory_stamp_and_kv_seeds_are_aged() {
        let tmp = tempfile::tempdir().expect("temp dir");
        let dir = tmp.path();
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../policies/recommendations.toml");
        let now = Millis(1_800_000_000_000);
        let copy = stamp_policy(&root, dir, now).expect("stamped");
        let loaded = load_policy(&copy, now);
        assert!(!loaded.has_errors(), "{:?}", loaded.diagnostics);
        let inv: Value = serde_json::from_str(
            &std::fs::read_to_string(dir.join("recommendations.inventory.json"))
                .expect("inventory"),
        )
        .expect("json");
        assert_eq!(
            inv["taken_at"],
            json!(rfc3339(now.0 - 3_600_000).expect("time"))
        );
        let policy = loaded.policy.expect("valid");
        let raw: RawScenario = toml::from_str(
            "name = \"t\"\nstart = \"2026-11-30T12:00:00Z\"\nrequests = 1\ninterval = \"1s\"\n\
             [params]\nuser_id = [\"u-1\"]\n[model]\nlatency = \"5ms\"\n\
             [[kv]]\ntier = \"user\"\nparams = { user_id = \"u-1\" }\nitems = [\"SKU-1001\"]\nage = \"1h\"\n",
        )
        .expect("scenario");
        let sc = scenario::build(raw, &policy).expect("valid scenario");
        let seed = kv_seed(&sc, now);
        let entry = &seed["USER_RECS"][0];
        assert_eq!(entry["written_at"], json!(now.0 - 3_600_000));
        assert_eq!(entry["value"]["items"][0]["sku"], "SKU-1001");
        assert!(
            entry["key"]
                .as_str()
                .is_some_and(|k| k.starts_with("user_rec:") && !k.contains("u-1")),
            "identity hashed: {entry}"
        );
    }
}
