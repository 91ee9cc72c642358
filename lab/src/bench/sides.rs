//! The Workers a bench runs, each as a directory `scripts/edge-server.mjs` can start:
//! - the edge, baked from the policy in three variants — as shipped (breaker as the policy
//!   says), breaker off (every hung request pays the deadline, so each tier's time after the
//!   deadline shows), and embedded tiers only (the baked tier's cost alone);
//! - the bare pass-through Worker (edge/bare: the floor);
//! - the JS peer (lab/peer/worker.mjs: what a frontend team would write by hand), with a
//!   configuration generated from the same policy and catalog;
//! - a no-op JS Worker (answers `ok`, no I/O): what the runtime alone costs under the same
//!   load — the floor under every latency the 64-connection phases print.
//!
//! Every variant drops the retry-storm limit (the bench repeats requests on purpose) and
//! gets an admin status endpoint if the policy has none (to read breaker transitions).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context as _, Result};
use serde_json::{json, Map, Value};
use understudy_compiler::dist::{self, edge::Edge};
use understudy_compiler::load::Loaded;
use understudy_core::catalog::Catalog;
use understudy_core::policy::{Admin, Breaker, EmbeddedTier, ParamSource, Policy, TierKind};
use understudy_core::Millis;

/// The admin endpoint added to a policy without one.
pub const STATUS_PATH: &str = "/__understudy/status";
pub const ADMIN_SECRET: &str = "ADMIN_TOKEN";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    AsShipped,
    BreakerOff,
    EmbeddedOnly,
    /// Breaker off, hedging after the observed p95 for up to 10% of calls (the call is
    /// declared idempotent: a scoring POST).
    Hedged,
}

/// The policy of an edge variant.
pub fn variant(base: &Policy, v: Variant) -> Result<Policy> {
    let mut p = base.clone();
    p.storm = None;
    if p.admin.is_none() {
        p.admin = Some(Admin {
            path: STATUS_PATH.into(),
            secret: ADMIN_SECRET.into(),
        });
    }
    if v != Variant::AsShipped {
        p.breaker = Breaker::Off;
    }
    if v == Variant::Hedged {
        p.origin.idempotent = true;
        p.origin.hedge = Some(understudy_core::policy::Hedge {
            after_ms: None,
            max_share: 0.1,
            burst: 10,
            min_calls: 20,
        });
    }
    if v == Variant::EmbeddedOnly {
        p.cascade
            .tiers
            .retain(|t| matches!(t.kind, TierKind::Embedded(_)));
        if p.cascade.tiers.is_empty() {
            bail!("the policy has no embedded tier to bench alone");
        }
    }
    Ok(p)
}

/// Bakes `policy` into a directory under `dir`; returns it and the module's (raw, gzip) size.
pub fn edge_dist(
    loaded: &Loaded,
    policy: &Policy,
    edge: &Edge,
    file: &str,
    validated_at: Millis,
    dir: &Path,
) -> Result<(PathBuf, u64, u64)> {
    let built = dist::assemble(&dist::Inputs::new(loaded, policy, file, validated_at), edge)?;
    dist::write_dir(dir, &built)?;
    Ok((
        dir.to_path_buf(),
        built.manifest.module.bytes,
        dist::gzip_len(&built.files[dist::edge::MODULE]),
    ))
}

fn compat_line(edge_dir: &Path) -> Result<String> {
    let wrangler = std::fs::read_to_string(edge_dir.join("wrangler.toml"))?;
    Ok(wrangler
        .lines()
        .find(|l| l.starts_with("compatibility_date"))
        .unwrap_or("compatibility_date = \"2025-01-01\"")
        .to_string())
}

/// The bare Worker (edge/bare), built once by `scripts/build-edge.sh --bare` when absent.
/// Returns its directory and module bytes.
/// The bare Worker as a directory. With `obliged` (the policy's identity rules) it also
/// verifies the caller's token, logs a line the size of the edge's and answers with the
/// edge's disclosure headers (`BARE_OBLIGED`, edge/bare/src/lib.rs); with `write` (the
/// policy's write-through tier: its binding and its key's literal prefix) it writes each
/// caller's live answer back to that KV binding as well.
pub fn bare_dist(
    root: &Path,
    explicit: Option<&Path>,
    dir: &Path,
    edge_dir: &Path,
    obliged: Option<&understudy_core::policy::IdentityRules>,
    write: Option<(&str, &str)>,
) -> Result<Vec<u8>> {
    let (flag, default) = match obliged {
        None => ("--bare", "edge/bare/build"),
        Some(_) => ("--bare-obliged", "edge/bare/build-obliged"),
    };
    // `--bare DIR` names the plain floor only; the obliged build is always the checkout's.
    let explicit = explicit.filter(|_| obliged.is_none());
    let build = match explicit {
        Some(d) => d.to_path_buf(),
        None => root.join(default),
    };
    // build-edge.sh returns at once when its build is up to date with the sources, so it is
    // always asked: a floor built before a change to edge/bare would be measured stale.
    if explicit.is_none() {
        eprintln!("bench: the bare Worker (scripts/build-edge.sh {flag})…");
        let status = Command::new("bash")
            .arg(root.join("scripts/build-edge.sh"))
            .arg(flag)
            .current_dir(root)
            .status()?;
        if !status.success() {
            bail!("scripts/build-edge.sh {flag} failed ({status})");
        }
    }
    std::fs::create_dir_all(dir)?;
    for f in ["index.js", "index_bg.wasm"] {
        std::fs::copy(build.join(f), dir.join(f))
            .with_context(|| format!("{}: not a built bare Worker", build.display()))?;
    }
    std::fs::write(
        dir.join("entry.mjs"),
        // The same entry as the edge's, so the floor pays what the edge pays.
        format!(
            "export * from \"./index.js\";\n{}",
            understudy_compiler::dist::entry::direct_fetch_js("bare")
        ),
    )?;
    let bindings = match obliged {
        Some(id) => {
            let mut vars = json!({"BARE_OBLIGED": "1", "BARE_ISSUER": id.issuer, "BARE_AUDIENCE": id.audience});
            let mut kv = Vec::new();
            if let Some((binding, prefix)) = write {
                vars["BARE_WRITE_BINDING"] = json!(binding);
                vars["BARE_WRITE_PREFIX"] = json!(prefix);
                kv.push(binding);
            }
            json!({"vars": vars, "secrets": [id.secret], "kv": kv, "rate_limits": []})
        }
        None => json!({"vars": {}, "secrets": [], "kv": [], "rate_limits": []}),
    };
    side_files(
        dir,
        dir.file_name().and_then(|n| n.to_str()).unwrap_or("bare"),
        edge_dir,
        &json!({ "bindings": bindings }),
    )?;
    Ok(std::fs::read(dir.join("index_bg.wasm"))?)
}

/// The JS peer's configuration for `policy`: what its author would have written by hand.
pub fn peer_config(policy: &Policy, catalog: Option<&Catalog>) -> Value {
    let params: Vec<Value> = policy
        .params
        .iter()
        .map(|p| {
            json!({
                "name": p.name,
                "source": match p.source {
                    ParamSource::Query => "query",
                    ParamSource::Header => "header",
                    ParamSource::Path => "path",
                    ParamSource::TokenClaim => "claim",
                },
                "from": p.from,
                "pattern": p.pattern,
                "maxLen": p.max_len,
                "required": p.required,
                "default": p.default,
                "identity": p.identity,
            })
        })
        .collect();
    let mut stubs = Map::new();
    let mut tiers = Vec::new();
    for t in &policy.cascade.tiers {
        match &t.kind {
            TierKind::Kv(kv) => tiers.push(json!({
                "kind": "kv", "name": t.name, "binding": kv.binding, "key": kv.key.source,
                "maxStalenessMs": kv.max_staleness_ms, "readTimeoutMs": kv.read_timeout_ms,
                "writeThrough": kv.write_through, "refreshMs": kv.refresh_ms,
                "perUser": policy.tier_is_per_user(t),
            })),
            TierKind::Embedded(EmbeddedTier::Curated { by, limit }) => {
                if let Some(c) = catalog {
                    let list = |cat: Option<&str>| {
                        let items: Vec<&str> = c
                            .curated(cat, *limit as usize)
                            .iter()
                            .map(|i| i.json.as_str())
                            .collect();
                        Value::String(format!("[{}]", items.join(",")))
                    };
                    stubs.insert("*".into(), list(None));
                    for cat in c.items.iter().filter_map(|i| i.category.as_deref()) {
                        if !stubs.contains_key(cat) {
                            stubs.insert(cat.to_string(), list(Some(cat)));
                        }
                    }
                }
                tiers.push(json!({"kind": "embedded", "name": t.name, "by": by}));
            }
            // The peer does what the recommendations policy needs; other tiers are skipped.
            _ => {}
        }
    }
    let d = &policy.disclosure;
    json!({
        "route": policy.service.route,
        "methods": policy.service.methods.iter().map(|m| m.as_str()).collect::<Vec<_>>(),
        "params": params,
        "identity": policy.identity.as_ref().map(|i| json!({
            "secret": i.secret, "issuer": i.issuer, "audience": i.audience,
            "leewayS": i.leeway_ms / 1000,
        })),
        "budget": {"totalMs": policy.budget.total_ms, "deadlineMs": policy.budget.deadline_ms},
        "origin": {
            "url": policy.origin.url,
            "credentialSecret": policy.origin.credential_secret,
            "credentialHeader": policy.origin.credential_header,
            "resultPath": policy.origin.result_path,
        },
        "tiers": tiers,
        "stubs": stubs,
        "disclosure": {
            "cacheControl": d.cache_control.as_deref().unwrap_or("no-store"),
            "privateCacheControl": d.private_cache_control,
            "liveCacheControl": d.live_cache_control,
            "retryAfterS": d.retry_after_s.unwrap_or(1),
        },
    })
}

/// A side's `wrangler.toml` (Worker `understudy-NAME`, the edge's compatibility date) and
/// `manifest.json` (the bindings `scripts/edge-server.mjs` gives it).
fn side_files(dir: &Path, name: &str, edge_dir: &Path, manifest: &Value) -> Result<()> {
    std::fs::write(
        dir.join("wrangler.toml"),
        format!(
            "name = \"understudy-{name}\"\nmain = \"entry.mjs\"\n{}\n",
            compat_line(edge_dir)?
        ),
    )?;
    std::fs::write(dir.join("manifest.json"), manifest.to_string())?;
    Ok(())
}

/// The policy's first write-through tier ([E-LIVE]): its KV binding and the literal prefix
/// of its key, for the obliged floor's own write-through.
pub fn write_through_tier(policy: &Policy) -> Option<(String, String)> {
    policy.cascade.tiers.iter().find_map(|t| {
        let w = t.kind.write_through()?;
        let source = &w.to.key.source;
        let prefix = source.split('{').next().unwrap_or_default();
        Some((w.to.binding.to_string(), prefix.to_string()))
    })
}

/// The no-op Worker: answers `200 ok` without any I/O — after `?wait=MS` milliseconds of
/// `setTimeout` when asked (the runtime's own timer, the floor under any answer at a
/// deadline). With `&race=1` as well, it first sends the model call (`UNDERSTUDY_ORIGIN_URL`)
/// and answers when the timer wins the race, aborting the call once the answer is out, as the
/// edge does: the runtime's floor under an answer at the deadline while a subrequest is in
/// flight. With the var `NOOP_LOG_BYTES` set it also writes one log line of about that many
/// bytes a request, as the edge does (the runtime's floor with the edge's log output).
pub const NOOP_JS: &str = r#"let line;
export default {
  async fetch(request, env) {
    const pad = Number(env.NOOP_LOG_BYTES ?? 0);
    if (pad > 0) console.log((line ??= JSON.stringify({ event: "noop", pad: "x".repeat(pad) })));
    const q = new URL(request.url).searchParams;
    const wait = Number(q.get("wait") ?? 0);
    if (q.get("race") === "1" && wait > 0) {
      const ctl = new AbortController();
      const call = fetch(env.UNDERSTUDY_ORIGIN_URL, { method: "POST", body: "{}", signal: ctl.signal }).then(
        (r) => r.arrayBuffer(),
        () => null,
      );
      await Promise.race([call, new Promise((r) => setTimeout(r, wait))]);
      setTimeout(() => ctl.abort(), 0);
      return new Response("ok");
    }
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    return new Response("ok");
  },
};
"#;

/// The bare pass-through written in JavaScript: edge/bare's origin call and answer, line for
/// line (the query as a JSON object, POSTed with the correlation ID; the origin's status and
/// body passed through as JSON) — the floor a JS Worker stands on, as edge/bare is a Rust
/// one's. The CPU steps run it beside edge/bare: their difference is what the Rust shell
/// costs before any of the edge's work.
pub const BARE_JS: &str = r#"export default {
  async fetch(request, env) {
    const origin = env.UNDERSTUDY_ORIGIN_URL;
    if (!origin) return new Response("UNDERSTUDY_ORIGIN_URL is not set", { status: 500 });
    const cid = request.headers.get("X-Correlation-ID");
    const params = Object.fromEntries(new URL(request.url).searchParams);
    const headers = new Headers();
    headers.set("Accept", "application/json");
    headers.set("Content-Type", "application/json");
    if (cid !== null) headers.set("X-Correlation-ID", cid);
    const res = await fetch(new URL(origin).href, { method: "POST", headers, body: JSON.stringify(params) });
    const body = await res.arrayBuffer();
    const out = new Headers();
    out.set("Content-Type", "application/json");
    return new Response(body, { status: res.status, headers: out });
  },
};
"#;

/// The JS bare pass-through as a directory.
pub fn bare_js_dist(dir: &Path, edge_dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join("entry.mjs"), BARE_JS)?;
    side_files(
        dir,
        dir.file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("bare-js"),
        edge_dir,
        &json!({"bindings": {"vars": {}, "secrets": [], "kv": [], "rate_limits": []}}),
    )
}

/// The no-op Worker as a directory; `log_bytes`: the size of the log line it writes a
/// request (none when `None`).
pub fn noop_dist(dir: &Path, edge_dir: &Path, log_bytes: Option<usize>) -> Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join("entry.mjs"), NOOP_JS)?;
    let vars = match log_bytes {
        Some(n) => json!({"NOOP_LOG_BYTES": n.to_string()}),
        None => json!({}),
    };
    side_files(
        dir,
        dir.file_name().and_then(|n| n.to_str()).unwrap_or("noop"),
        edge_dir,
        &json!({"bindings": {"vars": vars, "secrets": [], "kv": [], "rate_limits": []}}),
    )?;
    Ok(())
}

/// The JS peer as a directory: lab/peer/worker.mjs, its generated config.mjs, an entry, a
/// `wrangler.toml` and a manifest with the policy's KV bindings and secrets.
pub fn peer_dist(
    root: &Path,
    policy: &Policy,
    catalog: Option<&Catalog>,
    dir: &Path,
    edge_dir: &Path,
) -> Result<u64> {
    std::fs::create_dir_all(dir)?;
    let src = root.join("lab/peer/worker.mjs");
    std::fs::copy(&src, dir.join("worker.mjs"))
        .with_context(|| format!("cannot copy {}", src.display()))?;
    let config = peer_config(policy, catalog);
    std::fs::write(
        dir.join("config.mjs"),
        format!("export default {};\n", serde_json::to_string(&config)?),
    )?;
    std::fs::write(
        dir.join("entry.mjs"),
        "export { default } from \"./worker.mjs\";\n",
    )?;
    let kv: Vec<&str> = policy
        .cascade
        .tiers
        .iter()
        .filter_map(|t| match &t.kind {
            TierKind::Kv(k) => Some(k.binding.as_str()),
            _ => None,
        })
        .collect();
    let secrets: Vec<&str> = [
        policy.identity.as_ref().map(|i| i.secret.as_str()),
        policy.origin.credential_secret.as_deref(),
    ]
    .into_iter()
    .flatten()
    .collect();
    side_files(
        dir,
        "peer",
        edge_dir,
        &json!({"bindings": {"vars": {}, "secrets": secrets, "kv": kv, "rate_limits": []}}),
    )?;
    let bytes = std::fs::metadata(dir.join("worker.mjs"))?.len()
        + std::fs::metadata(dir.join("config.mjs"))?.len();
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use understudy_compiler::fixtures::{sample_catalog, sample_policy};

    #[test]
    fn variants_drop_the_storm_limit_and_keep_or_switch_off_the_breaker() {
        let mut base = sample_policy();
        base.breaker = Breaker::Consecutive {
            failures: 3,
            cooldown_ms: 1000,
        };
        let shipped = variant(&base, Variant::AsShipped).unwrap();
        assert!(shipped.storm.is_none());
        assert_eq!(shipped.breaker, base.breaker);
        assert!(shipped.admin.is_some());
        let off = variant(&base, Variant::BreakerOff).unwrap();
        assert_eq!(off.breaker, Breaker::Off);
        let emb = variant(&base, Variant::EmbeddedOnly).unwrap();
        assert!(emb
            .cascade
            .tiers
            .iter()
            .all(|t| matches!(t.kind, TierKind::Embedded(_))));
    }

    #[test]
    fn the_obliged_floor_writes_through_where_the_policy_does() {
        let mut p = sample_policy();
        assert_eq!(write_through_tier(&p), None);
        for t in &mut p.cascade.tiers {
            if let TierKind::Kv(kv) = &mut t.kind {
                kv.write_through = true;
            }
        }
        assert_eq!(
            write_through_tier(&p),
            Some(("CATEGORY_TOP".to_string(), "category_top:".to_string()))
        );
    }

    #[test]
    fn the_peer_config_carries_the_policy_and_the_stubs_per_category() {
        let c = peer_config(&sample_policy(), Some(&sample_catalog()));
        assert_eq!(c["route"], "/v1/recommendations");
        assert_eq!(c["budget"]["deadlineMs"], 45);
        assert!(c["stubs"]["audio"].as_str().unwrap().contains("SKU-1"));
        assert!(c["stubs"]["*"].is_string());
    }
}
