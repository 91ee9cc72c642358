//! `understudy bench`: what the shell costs, and what it buys, against what a team would run
//! instead. In ONE workerd (one Miniflare instance, routed by `Host`: [`server`]) run
//! side by side against one simulated origin ([`sides`]):
//!
//! - `edge` — the policy as shipped (breaker as the policy says);
//! - `edge-off` — the same with its breaker off, so every hung request pays the deadline
//!   and each tier's time after the deadline shows;
//! - `edge-emb` — embedded tiers only, breaker off: the baked tier's own cost;
//! - `bare` — the pass-through floor (edge/bare);
//! - `peer` — the JS Worker a frontend team would write by hand (lab/peer/worker.mjs);
//! - `noop` — a JS Worker that answers `ok` with no I/O: the runtime's own floor under load.
//!
//! Phases, interleaved so machine noise hits every side alike: a cold first wave on fresh
//! isolates; sequential healthy rounds (edge vs bare); closed loops at 16 and 64 connections
//! with a healthy origin (edge vs peer vs bare, counting live answers, workerd CPU per
//! request, breaker openings); the model hung (the embedded tier's answer against the
//! deadline, each tier's deadline-to-answer time, and 64 connections edge vs peer). Figures
//! are printed and written as JSON (`--out`); targets are reported, not asserted.

mod cpu;
mod load;
mod measure;
mod phases;
mod report;
mod requests;
mod server;
mod sides;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context as _, Result};
use serde_json::Value;
use understudy_core::policy::{Breaker, Policy};
use understudy_core::Millis;

use crate::origin::{OriginConfig, OriginServer};
use understudy_compiler::dist::{self, edge::workspace_root};
use understudy_compiler::load::load_policy;

pub use report::human;
use server::{BenchServer, Target};
use sides::Variant;

const EDGE: Target = Target("edge");
const EDGE_OFF: Target = Target("edge-off");
const EDGE_EMB: Target = Target("edge-emb");
const BARE: Target = Target("bare");
/// The bare Worker doing what the edge's promises oblige on a healthy request (a token
/// check, a log line, the disclosure headers) and nothing more.
const BARE_OBLIGED: Target = Target("bare-obliged");
const PEER: Target = Target("peer");
/// edge/bare's pass-through written in JavaScript (the JS Worker's floor).
const BARE_JS: Target = Target("bare-js");
/// The runtime's floor: a no-op JS Worker.
const NOOP: Target = Target("noop");
/// The no-op Worker writing a log line the size of the edge's degraded one each request.
const NOOP_LOG: Target = Target("noop-log");
/// The edge's log line for a degraded answer with the breaker open (`BREAKER_OPEN`, the
/// curated tier, two KV notes): 565 bytes on recommendations.toml.
const EDGE_LOG_LINE_BYTES: usize = 560;
const EDGE_HEDGE: Target = Target("edge-hedge");
/// `--compare-edge`: another prebuilt edge, baked like `edge-off`, for A/B measurements.
const EDGE_B: Target = Target("edge-b");
/// `--compare-edge`, baked like `edge-emb`: the degraded path's A/B.
const EDGE_EMB_B: Target = Target("edge-emb-b");

pub struct Options {
    pub policy: PathBuf,
    pub out: Option<PathBuf>,
    /// Sequential healthy request pairs (edge, bare).
    pub rounds: usize,
    /// Sequential requests with the model hung, per edge variant.
    pub hung_rounds: usize,
    /// Sequential requests against the long-tail model, per side (hedging or not).
    pub tail_rounds: usize,
    /// Connections of the healthy closed loop (the high one is 64).
    pub concurrency: usize,
    /// Seconds of each closed-loop phase, split into alternating slices per side.
    pub throughput_secs: f64,
    pub origin_latency_ms: u64,
    pub edge: Option<PathBuf>,
    pub bare: Option<PathBuf>,
    /// Another prebuilt edge to measure beside `edge-off` in the healthy closed loop, and
    /// beside `edge-emb` with the model hung.
    pub compare_edge: Option<PathBuf>,
}

/// The long-tail model of the hedging case: fast calls, and a few past the deadline.
pub const BIMODAL_FAST_MS: u64 = 15;
pub const BIMODAL_SLOW_MS: u64 = 200;
pub const BIMODAL_SLOW_PER_MILLE: u64 = 50;

/// Connections of the high-concurrency phases (healthy and hung).
pub const HIGH_CONCURRENCY: usize = 64;
/// Requests of the cold first wave.
pub const COLD_WAVE: usize = 10;
/// Quiet between the runtime's start and the first cold wave.
const COLD_SETTLE: Duration = Duration::from_millis(1_000);
/// Quiet between one side's cold wave and the next's.
const COLD_GAP: Duration = Duration::from_millis(500);

pub(crate) fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        (a / b * 1000.0).round() / 1000.0
    } else {
        0.0
    }
}

pub fn run(opts: &Options) -> Result<Value> {
    let root = workspace_root().context("`understudy bench` runs inside an Understudy checkout")?;
    // The scratch directory (bakes, the runtime's files) is removed when dropped, whatever
    // happens.
    let parent = root.join(".understudy/bench");
    std::fs::create_dir_all(&parent)
        .with_context(|| format!("cannot create {}", parent.display()))?;
    let scratch = tempfile::Builder::new()
        .prefix("run-")
        .tempdir_in(&parent)
        .with_context(|| format!("cannot create a directory in {}", parent.display()))?;
    let work = scratch.path().to_path_buf();
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
    let file = dist::file_name(&opts.policy);
    let edge_src = dist::edge::locate(opts.edge.as_deref())?;
    let shipped = sides::variant(base, Variant::AsShipped)?;
    // One bake per variant of the policy, each into its own directory.
    let bake = |policy: &Policy, src: &dist::edge::Edge, name: &str| {
        sides::edge_dist(&loaded, policy, src, &file, now, &work.join(name))
    };
    let (edge_dir, module_bytes, module_gzip) = bake(&shipped, &edge_src, "edge")?;
    let off = sides::variant(base, Variant::BreakerOff)?;
    let (off_dir, _, _) = bake(&off, &edge_src, "edge-off")?;
    let emb = sides::variant(base, Variant::EmbeddedOnly)?;
    let (emb_dir, _, _) = bake(&emb, &edge_src, "edge-emb")?;
    let (hedge_dir, _, _) = bake(
        &sides::variant(base, Variant::Hedged)?,
        &edge_src,
        "edge-hedge",
    )?;
    let bare_dir = work.join("bare");
    let bare_wasm = sides::bare_dist(
        &root,
        opts.bare.as_deref(),
        &bare_dir,
        &edge_dir,
        None,
        None,
    )?;
    let obliged_dir = work.join("bare-obliged");
    let obliged = shipped.identity.as_ref();
    if obliged.is_some() {
        let write = sides::write_through_tier(&shipped);
        let write = write.as_ref().map(|(b, p)| (b.as_str(), p.as_str()));
        sides::bare_dist(
            &root,
            opts.bare.as_deref(),
            &obliged_dir,
            &edge_dir,
            obliged,
            write,
        )?;
    }
    let peer_dir = work.join("peer");
    let peer_bytes = sides::peer_dist(&root, &off, loaded.catalog.as_ref(), &peer_dir, &edge_dir)?;
    let noop_dir = work.join("noop");
    sides::noop_dist(&noop_dir, &edge_dir, None)?;
    let bare_js_dir = work.join("bare-js");
    sides::bare_js_dist(&bare_js_dir, &edge_dir)?;
    let noop_log_dir = work.join("noop-log");
    sides::noop_dist(&noop_log_dir, &edge_dir, Some(EDGE_LOG_LINE_BYTES))?;

    let mut cfg = OriginConfig::new(([127, 0, 0, 1], 0).into());
    cfg.base_latency = Duration::from_millis(opts.origin_latency_ms);
    let origin = OriginServer::spawn_with(cfg)?;
    let mut workers = vec![
        (EDGE.0, edge_dir.clone()),
        (EDGE_OFF.0, off_dir),
        (EDGE_EMB.0, emb_dir),
        (BARE.0, bare_dir),
        (PEER.0, peer_dir),
        (EDGE_HEDGE.0, hedge_dir),
        (NOOP.0, noop_dir),
        (NOOP_LOG.0, noop_log_dir),
        (BARE_JS.0, bare_js_dir),
    ];
    if obliged.is_some() {
        workers.push((BARE_OBLIGED.0, obliged_dir));
    }
    if let Some(b) = &opts.compare_edge {
        let src = dist::edge::locate(Some(b))?;
        let (dir, _, _) = bake(&off, &src, "edge-b")?;
        workers.push((EDGE_B.0, dir));
        let (dir, _, _) = bake(&emb, &src, "edge-emb-b")?;
        workers.push((EDGE_EMB_B.0, dir));
    }
    let server = BenchServer::start(&root, &workers, &[], &origin.url())?;
    let (addr, pids, startup_ms) = (server.addr, server.workerd.clone(), server.startup_ms);
    // [T-WITNESS] The host's stalls beside every phase: a figure measured in one is suspect.
    let witness = crate::witness::Witness::start(
        pids.iter()
            .map(|&pid| crate::witness::Watched {
                label: "workerd".into(),
                pid: pid as i32,
            })
            .collect(),
    );
    let started = std::time::Instant::now();

    let deadline = shipped.budget.deadline_ms as f64;
    let budget = shipped.budget.total_ms as f64;
    let m = measure::measure(
        opts,
        &shipped,
        loaded.catalog.as_ref(),
        &origin,
        addr,
        &pids,
    );
    drop(server);
    origin.shutdown();
    // UNDERSTUDY_BENCH_KEEP=1 keeps the bakes for a closer look (printed on stderr).
    if std::env::var_os("UNDERSTUDY_BENCH_KEEP").is_some_and(|v| v == "1") {
        eprintln!("bench: kept {}", scratch.keep().display());
    } else {
        drop(scratch);
    }
    let m = m?;
    let witness = witness.stop(started);
    let mut doc = report::document(
        &report::Setup {
            policy: &shipped.service.name,
            breaker: !matches!(shipped.breaker, Breaker::Off),
            origin_latency_ms: opts.origin_latency_ms,
            deadline_ms: deadline,
            budget_ms: budget,
            concurrency: opts.concurrency,
            rounds: opts.rounds,
            module_bytes,
            module_gzip_bytes: module_gzip,
            bare_module_gzip_bytes: understudy_compiler::dist::gzip_len(&bare_wasm),
            peer_bytes,
            startup_ms,
        },
        &m,
    );
    doc["witness"] = witness.report();
    if let Some(out) = &opts.out {
        if let Some(parent) = out.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(out, serde_json::to_vec_pretty(&doc)?)?;
    }
    Ok(doc)
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
}
