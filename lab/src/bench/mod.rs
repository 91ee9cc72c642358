//! `understudy bench`: what the shell costs. The built edge and a bare pass-through Worker
//! (edge/bare: the same origin call, nothing else — the floor) run side by side in ONE
//! workerd (one Miniflare instance, routed by `Host`: see [`server`]) against the same
//! simulated origin, and are measured in one run, interleaved request by request so that
//! machine noise hits both alike:
//!
//! - healthy path: p50, p99 (sequential, alternating) and throughput (closed loop, slices
//!   alternating between the two);
//! - model hung: the edge's degraded answers against the deadline (the bare Worker has no
//!   deadline: it waits as long as the client does), and the time from the deadline to the
//!   answer per tier — the embedded tier's is the cascade's own cost;
//! - module size (raw and gzipped) and cold start (process start to both listening — one
//!   figure, as they share the process — and each one's first request, which instantiates
//!   its module and, for the edge, decodes the bake).
//!
//! The bench bakes the policy with its breaker off (so every hung request pays the deadline,
//! the case the targets are about) and without its retry-storm limit (the bench repeats one
//! request on purpose). Targets are reported, not asserted.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _, Result};
use serde::Serialize;
use serde_json::{json, Value};
use understudy_core::policy::{Breaker, ParamSource};
use understudy_core::Millis;

use crate::drill::check::Latency;
use crate::drill::driver::Planned;
use crate::drill::edge::dev_secret;
use crate::origin::{Fault, OriginConfig, OriginServer};
use understudy_compiler::dist::{self, edge::workspace_root};
use understudy_compiler::load::load_policy;

mod server;
use server::{BenchServer, Target};

pub struct Options {
    pub policy: PathBuf,
    pub out: Option<PathBuf>,
    pub rounds: usize,
    pub hung_rounds: usize,
    pub concurrency: usize,
    pub throughput_secs: f64,
    pub origin_latency_ms: u64,
    pub edge: Option<PathBuf>,
    pub bare: Option<PathBuf>,
    /// Drop every tier but the embedded ones, so the hung phase measures the baked tier
    /// alone (no KV read before it).
    pub embedded_only: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct Side {
    pub healthy: Latency,
    pub throughput_rps: f64,
    pub startup_ms: f64,
    pub first_request_ms: f64,
    pub module_bytes: u64,
    pub module_gzip_bytes: u64,
}

/// The bare Worker as a directory edge-server.mjs runs: worker-build's output, an entry, a
/// `wrangler.toml` with the edge's compatibility date, and a manifest with no bindings.
fn bare_dist(
    root: &Path,
    explicit: Option<&Path>,
    dir: &Path,
    edge_dist: &Path,
) -> Result<Vec<u8>> {
    let build = match explicit {
        Some(d) => d.to_path_buf(),
        None => root.join("edge/bare/build"),
    };
    if explicit.is_none() && !build.join("index_bg.wasm").is_file() {
        eprintln!("bench: building the bare Worker once (scripts/build-edge.sh --bare)…");
        let status = Command::new("bash")
            .arg(root.join("scripts/build-edge.sh"))
            .arg("--bare")
            .current_dir(root)
            .status()?;
        if !status.success() {
            bail!("scripts/build-edge.sh --bare failed ({status})");
        }
    }
    std::fs::create_dir_all(dir)?;
    for f in ["index.js", "index_bg.wasm"] {
        std::fs::copy(build.join(f), dir.join(f))
            .with_context(|| format!("{}: not a built bare Worker", build.display()))?;
    }
    std::fs::write(
        dir.join("entry.mjs"),
        "export * from \"./index.js\";\nexport { default } from \"./index.js\";\n",
    )?;
    let wrangler = std::fs::read_to_string(edge_dist.join("wrangler.toml"))?;
    let date = wrangler
        .lines()
        .find(|l| l.starts_with("compatibility_date"))
        .unwrap_or("compatibility_date = \"2025-01-01\"");
    std::fs::write(
        dir.join("wrangler.toml"),
        format!("name = \"understudy-bare\"\nmain = \"entry.mjs\"\n{date}\n"),
    )?;
    std::fs::write(
        dir.join("manifest.json"),
        json!({"bindings": {"vars": {}, "secrets": [], "kv": [], "rate_limits": []}}).to_string(),
    )?;
    Ok(std::fs::read(dir.join("index_bg.wasm"))?)
}

/// One request of the policy, signed when it carries a token; `subject` replaces the
/// identity claim (a user with nothing cached).
fn request(
    policy: &understudy_core::policy::Policy,
    catalog: Option<&understudy_core::catalog::Catalog>,
    subject: Option<&str>,
) -> Planned {
    let recipe = crate::sample::sample_request(policy, catalog);
    let mut headers: Vec<(String, String)> = recipe["headers"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.to_ascii_lowercase(), v.as_str().unwrap_or("").to_string()))
                .collect()
        })
        .unwrap_or_default();
    if let (Some(secret), Some(claims)) = (
        recipe["token"]["secret"].as_str(),
        recipe["token"]["claims"].as_object(),
    ) {
        let mut claims = claims.clone();
        if let Some(sub) = subject {
            for p in policy
                .params
                .iter()
                .filter(|p| p.identity && p.source == ParamSource::TokenClaim)
            {
                claims.insert(p.from.clone(), json!(sub));
            }
        }
        let now = Millis(crate::drill::epoch_ms()).0 / 1000;
        claims.insert("iat".into(), json!(now));
        claims.insert("exp".into(), json!(now + 3600));
        let token =
            understudy_core::token::sign(&Value::Object(claims), dev_secret(secret).as_bytes());
        headers.push(("authorization".into(), format!("Bearer {token}")));
    }
    Planned {
        index: 0,
        due_us: 0,
        method: recipe["method"].as_str().unwrap_or("GET").to_string(),
        target: recipe["path"].as_str().unwrap_or("/").to_string(),
        headers,
        user: None,
    }
}

/// Closed loop: `c` connections sending `p` to `target` back to back for `dur`; answers per
/// second.
async fn throughput(
    addr: std::net::SocketAddr,
    target: Target,
    p: &Planned,
    c: usize,
    dur: Duration,
) -> f64 {
    let done = Arc::new(AtomicU64::new(0));
    let until = Instant::now() + dur;
    let mut tasks = Vec::new();
    for _ in 0..c.clamp(1, 256) {
        let (p, done) = (p.clone(), Arc::clone(&done));
        tasks.push(tokio::spawn(async move {
            let mut conn = None;
            while Instant::now() < until {
                let o = server::once(&mut conn, addr, target, &p, Duration::from_secs(5)).await;
                if o.status == 200 {
                    done.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    let start = Instant::now();
    for t in tasks {
        let _ = t.await;
    }
    done.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64().max(1e-9)
}

fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        (a / b * 1000.0).round() / 1000.0
    } else {
        0.0
    }
}

pub fn run(opts: &Options) -> Result<Value> {
    let root = workspace_root().context("`understudy bench` runs inside an Understudy checkout")?;
    let work = root
        .join(".understudy/bench")
        .join(format!("run-{}", std::process::id()));
    std::fs::create_dir_all(&work)?;
    let now = Millis(crate::drill::epoch_ms());
    let stamped = crate::drill::stamp_policy(&opts.policy, &work, now)?;
    let loaded = load_policy(&stamped, now);
    let Some(base) = loaded.policy.as_ref().filter(|_| !loaded.has_errors()) else {
        bail!(
            "{} is invalid; run `understudy check {}`",
            opts.policy.display(),
            opts.policy.display()
        );
    };
    let mut policy = base.clone();
    policy.breaker = Breaker::Off;
    policy.storm = None;
    if opts.embedded_only {
        policy
            .cascade
            .tiers
            .retain(|t| matches!(t.kind, understudy_core::policy::TierKind::Embedded(_)));
        if policy.cascade.tiers.is_empty() {
            bail!(
                "{} has no embedded tier to keep (--embedded-only)",
                opts.policy.display()
            );
        }
    }
    let edge_src = dist::edge::locate(opts.edge.as_deref())?;
    let file = opts
        .policy
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let built = dist::assemble(
        &dist::Inputs {
            policy: &policy,
            catalog: loaded.catalog.as_ref(),
            policy_hash: &loaded.policy_hash,
            catalog_hash: &loaded.catalog_hash,
            policy_file: &file,
            validated_at_ms: now.0,
        },
        &edge_src,
    )?;
    let edge_dir = work.join("edge");
    dist::write_dir(&edge_dir, &built)?;
    let bare_dir = work.join("bare");
    let bare_wasm = bare_dist(&root, opts.bare.as_deref(), &bare_dir, &edge_dir)?;

    let mut cfg = OriginConfig::new(([127, 0, 0, 1], 0).into());
    cfg.base_latency = Duration::from_millis(opts.origin_latency_ms);
    let origin = OriginServer::spawn_with(cfg)?;
    let workerd = BenchServer::start(&root, &edge_dir, &bare_dir, &origin.url())?;
    let startup = workerd.startup_ms;

    let req = request(&policy, loaded.catalog.as_ref(), None);
    // Users with nothing cached: with the model hung their answers come from the baked
    // tier after every KV tier missed (one distinct user per request).
    let fresh: Vec<Planned> = (0..opts.hung_rounds / 2)
        .map(|i| {
            request(
                &policy,
                loaded.catalog.as_ref(),
                Some(&format!("bench-fresh-{i}")),
            )
        })
        .collect();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let timeout = Duration::from_secs(5);
    let addr = workerd.addr;
    let (ea, ba) = (Target::Edge, Target::Bare);
    eprintln!(
        "bench: {} rounds healthy, {} hung, throughput {:.0} s, origin latency {} ms…",
        opts.rounds, opts.hung_rounds, opts.throughput_secs, opts.origin_latency_ms
    );
    let result = rt.block_on(async {
        let (mut ce, mut cb) = (None, None);
        let first_edge = server::once(&mut ce, addr, ea, &req, timeout).await;
        let first_bare = server::once(&mut cb, addr, ba, &req, timeout).await;
        if first_edge.status != 200 || first_bare.status != 200 {
            bail!(
                "the first requests failed: edge HTTP {} {:?}, bare HTTP {} {:?}",
                first_edge.status,
                first_edge.error,
                first_bare.status,
                first_bare.error
            );
        }
        // Warm up both, then interleave (alternating who goes first).
        for _ in 0..50 {
            server::once(&mut ce, addr, ea, &req, timeout).await;
            server::once(&mut cb, addr, ba, &req, timeout).await;
        }
        let (mut le, mut lb, mut not_live) = (Vec::new(), Vec::new(), 0u64);
        for r in 0..opts.rounds {
            let (e, b) = if r % 2 == 0 {
                let e = server::once(&mut ce, addr, ea, &req, timeout).await;
                (e, server::once(&mut cb, addr, ba, &req, timeout).await)
            } else {
                let b = server::once(&mut cb, addr, ba, &req, timeout).await;
                (server::once(&mut ce, addr, ea, &req, timeout).await, b)
            };
            if !e.is_live() {
                not_live += 1;
            }
            le.push(e.latency_ms);
            lb.push(b.latency_ms);
        }
        let slice = Duration::from_secs_f64((opts.throughput_secs / 6.0).max(0.2));
        let (mut te, mut tb) = (0.0, 0.0);
        for _ in 0..3 {
            te += throughput(addr, ea, &req, opts.concurrency, slice).await / 3.0;
            tb += throughput(addr, ba, &req, opts.concurrency, slice).await / 3.0;
        }
        // The model hangs: the edge answers at its deadline from the cascade.
        origin.set_fault(Fault::Hang)?;
        let mut hung = Vec::new();
        let mut ch = None;
        for i in 0..opts.hung_rounds {
            // Alternate: the benchmark's user (its list is in the user tier from the
            // healthy rounds) and a user with nothing cached.
            let p = if i % 2 == 1 {
                fresh.get(i / 2).unwrap_or(&req)
            } else {
                &req
            };
            hung.push(server::once(&mut ch, addr, ea, p, timeout).await);
        }
        let bare_hung = server::once(&mut None, addr, ba, &req, Duration::from_secs(1)).await;
        origin.clear_fault();
        Ok((
            first_edge, first_bare, le, lb, not_live, te, tb, hung, bare_hung,
        ))
    });
    drop(workerd);
    origin.shutdown();
    let _ = std::fs::remove_dir_all(&work);
    let (first_edge, first_bare, le, lb, not_live, te, tb, hung, bare_hung) = result?;

    let deadline = policy.budget.deadline_ms as f64;
    let hung_lat = Latency::of(
        hung.iter()
            .filter(|o| o.status == 200)
            .map(|o| o.latency_ms),
    );
    let mut by_tier: std::collections::BTreeMap<String, Vec<f64>> = Default::default();
    for o in hung.iter().filter(|o| o.status == 200) {
        by_tier
            .entry(o.headers.tier.clone().unwrap_or_else(|| "?".into()))
            .or_default()
            .push(o.latency_ms - deadline);
    }
    let after_deadline: serde_json::Map<String, Value> = by_tier
        .into_iter()
        .map(|(t, v)| {
            (
                t,
                json!({"answers": v.len(), "ms_after_deadline": Latency::of(v)}),
            )
        })
        .collect();
    let edge_side = Side {
        healthy: Latency::of(le),
        throughput_rps: te,
        startup_ms: startup,
        first_request_ms: first_edge.latency_ms,
        module_bytes: built.manifest.module.bytes,
        module_gzip_bytes: built.manifest.module.gzip_bytes,
    };
    let bare_side = Side {
        healthy: Latency::of(lb),
        throughput_rps: tb,
        startup_ms: startup,
        first_request_ms: first_bare.latency_ms,
        module_bytes: bare_wasm.len() as u64,
        module_gzip_bytes: understudy_compiler::dist::gzip_len(&bare_wasm),
    };
    let doc = json!({
        "policy": policy.service.name,
        "release": built.release_id,
        "origin_latency_ms": opts.origin_latency_ms,
        "embedded_only": opts.embedded_only,
        "tiers": policy.cascade.tiers.iter().map(|t| t.name.clone()).collect::<Vec<_>>(),
        "rounds": opts.rounds,
        "concurrency": opts.concurrency,
        "workerd_processes": 1,
        "edge": edge_side,
        "bare": bare_side,
        "edge_not_live_on_healthy_path": not_live,
        "ratios": {
            "healthy_p50": ratio(edge_side.healthy.p50_ms, bare_side.healthy.p50_ms),
            "healthy_p99": ratio(edge_side.healthy.p99_ms, bare_side.healthy.p99_ms),
            "throughput": ratio(edge_side.throughput_rps, bare_side.throughput_rps),
            "module_gzip": ratio(edge_side.module_gzip_bytes as f64, bare_side.module_gzip_bytes as f64),
        },
        "hung": {
            "deadline_ms": deadline,
            "budget_ms": policy.budget.total_ms,
            "answers": hung.iter().filter(|o| o.status == 200).count(),
            "degraded": hung.iter().filter(|o| o.is_degraded()).count(),
            "latency": hung_lat,
            "p99_minus_deadline_ms": hung_lat.p99_ms - deadline,
            "by_tier": after_deadline,
            "bare": if bare_hung.status == 0 { json!(format!("no answer within 1000 ms ({})", bare_hung.error.unwrap_or_default())) } else { json!(bare_hung.status) },
        },
        "targets": {
            "healthy_p50_within_10_percent": ratio(edge_side.healthy.p50_ms, bare_side.healthy.p50_ms) <= 1.10,
            "healthy_p99_within_25_percent": ratio(edge_side.healthy.p99_ms, bare_side.healthy.p99_ms) <= 1.25,
            "hung_p99_within_deadline_plus_2ms": hung_lat.p99_ms <= deadline + 2.0,
        },
    });
    if let Some(out) = &opts.out {
        if let Some(parent) = out.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(out, serde_json::to_vec_pretty(&doc)?)?;
    }
    Ok(doc)
}

/// The human summary of a bench document.
pub fn human(d: &Value) -> String {
    let f = |v: &Value| v.as_f64().map_or("?".into(), |x| format!("{x:.2}"));
    let mut s = String::new();
    s.push_str(&format!(
        "Bench: {} (origin latency {} ms; edge and bare in one workerd, interleaved)\n\n",
        d["policy"].as_str().unwrap_or("?"),
        d["origin_latency_ms"]
    ));
    s.push_str(&format!(
        "{:<34} {:>12} {:>12} {:>8}\n",
        "", "edge", "bare", "ratio"
    ));
    for (label, key, r) in [
        ("healthy p50 (ms)", "/healthy/p50_ms", "healthy_p50"),
        ("healthy p99 (ms)", "/healthy/p99_ms", "healthy_p99"),
        ("throughput (req/s)", "/throughput_rps", "throughput"),
        ("module gzip (bytes)", "/module_gzip_bytes", "module_gzip"),
    ] {
        s.push_str(&format!(
            "{:<34} {:>12} {:>12} {:>8}\n",
            label,
            f(d["edge"].pointer(key).unwrap_or(&Value::Null)),
            f(d["bare"].pointer(key).unwrap_or(&Value::Null)),
            f(&d["ratios"][r])
        ));
    }
    for (label, key) in [
        ("module (bytes)", "/module_bytes"),
        ("start to listening, shared (ms)", "/startup_ms"),
        ("first request (ms)", "/first_request_ms"),
    ] {
        s.push_str(&format!(
            "{:<34} {:>12} {:>12}\n",
            label,
            f(d["edge"].pointer(key).unwrap_or(&Value::Null)),
            f(d["bare"].pointer(key).unwrap_or(&Value::Null))
        ));
    }
    let h = &d["hung"];
    s.push_str(&format!(
        "\nModel hung (deadline {} ms): {} answers, {} degraded; p50 {} ms, p99 {} ms (p99 - deadline = {} ms); bare: {}\n",
        h["deadline_ms"], h["answers"], h["degraded"], f(&h["latency"]["p50_ms"]), f(&h["latency"]["p99_ms"]), f(&h["p99_minus_deadline_ms"]),
        h["bare"]
    ));
    if let Some(tiers) = h["by_tier"].as_object() {
        for (t, v) in tiers {
            s.push_str(&format!(
                "  {t:<12} {:>5} answers, deadline to answer: p50 {} ms, p99 {} ms\n",
                v["answers"],
                f(&v["ms_after_deadline"]["p50_ms"]),
                f(&v["ms_after_deadline"]["p99_ms"])
            ));
        }
    }
    s.push_str(&format!(
        "\nTargets (reported, not asserted): {}\n",
        d["targets"]
    ));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_round_to_three_places_and_survive_a_zero_floor() {
        assert_eq!(ratio(33.0, 30.0), 1.1);
        assert_eq!(ratio(1.0, 3.0), 0.333);
        assert_eq!(ratio(5.0, 0.0), 0.0);
    }

    #[test]
    fn the_summary_prints_both_sides_the_ratios_and_the_hung_path() {
        let side = |p50: f64| {
            json!({"healthy": {"p50_ms": p50, "p99_ms": p50 * 1.5}, "throughput_rps": 400.0,
                   "module_gzip_bytes": 1000, "module_bytes": 4000, "startup_ms": 700.0, "first_request_ms": 50.0})
        };
        let doc = json!({
            "policy": "recommendation-service", "origin_latency_ms": 25,
            "edge": side(31.0), "bare": side(30.0),
            "ratios": {"healthy_p50": 1.033, "healthy_p99": 1.033, "throughput": 1.0, "module_gzip": 1.0},
            "hung": {"deadline_ms": 45.0, "answers": 10, "degraded": 10, "latency": {"p50_ms": 49.0, "p99_ms": 55.0},
                     "p99_minus_deadline_ms": 10.0, "bare": "no answer within 1000 ms",
                     "by_tier": {"curated": {"answers": 10, "ms_after_deadline": {"p50_ms": 4.0, "p99_ms": 10.0}}}},
            "targets": {"healthy_p50_within_10_percent": true},
        });
        let h = human(&doc);
        assert!(
            h.contains("healthy p50 (ms)")
                && h.contains("31.00")
                && h.contains("30.00")
                && h.contains("1.03"),
            "{h}"
        );
        assert!(h.contains("p99 - deadline = 10.00 ms"), "{h}");
        assert!(
            h.contains("curated") && h.contains("deadline to answer: p50 4.00 ms"),
            "{h}"
        );
    }
}
