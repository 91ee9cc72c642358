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

use crate::drill::driver::Planned;
use crate::drill::edge::dev_secret;
use crate::origin::{Fault, OriginConfig, OriginServer};
use understudy_compiler::dist::{self, edge::workspace_root};
use understudy_compiler::load::load_policy;

use phases::{added, interleaved, interleaved_at, m_rate, new_openings, openings, speculative};
pub use report::human;
use requests::{refused_before_io, request};
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

    let catalog = loaded.catalog.as_ref();
    let req = request(&shipped, catalog, None);
    let refused = refused_before_io(&shipped, &req);
    let fresh = |prefix: &str, n: usize| -> Vec<Planned> {
        (0..n)
            .map(|i| request(&shipped, catalog, Some(&format!("{prefix}-{i}"))))
            .collect()
    };
    let cold_plans = fresh("bench-cold", COLD_WAVE);
    let hung_fresh = fresh("bench-fresh", opts.hung_rounds.div_ceil(2));
    let admin = shipped.admin.clone();
    let admin_token = admin
        .as_ref()
        .map(|a| dev_secret(&a.secret))
        .unwrap_or_default();
    let admin_path = admin.map(|a| a.path).unwrap_or_default();
    let timeout = Duration::from_secs(5);
    let deadline = shipped.budget.deadline_ms as f64;
    let budget = shipped.budget.total_ms as f64;
    eprintln!(
        "bench: cold wave {COLD_WAVE}, {} healthy rounds, closed loops at {} and {HIGH_CONCURRENCY} connections ({:.0} s each), {} hung rounds, origin latency {} ms…",
        opts.rounds, opts.concurrency, opts.throughput_secs, opts.hung_rounds, opts.origin_latency_ms
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let m = rt.block_on(async {
        // Fresh isolates: the first requests each Worker ever sees. The runtime settles
        // first (its start-up work for a dozen Workers would land on whichever wave went
        // first), and each wave's background work (write-through puts under `waitUntil`)
        // has a pause to end in before the next wave. The edge still goes first.
        tokio::time::sleep(COLD_SETTLE).await;
        let cold_edge = load::wave(addr, EDGE, &cold_plans, timeout).await;
        tokio::time::sleep(COLD_GAP).await;
        let cold_peer = load::wave(addr, PEER, &cold_plans, timeout).await;
        tokio::time::sleep(COLD_GAP).await;
        let cold_bare = load::wave(addr, BARE, &cold_plans, timeout).await;
        tokio::time::sleep(COLD_GAP).await;
        // And the bare Worker keeping the edge's promises the direct way (token, log line,
        // headers, write-through): what their first use costs any Rust Worker.
        let cold_bare_obliged = match obliged {
            Some(_) => load::wave(addr, BARE_OBLIGED, &cold_plans, timeout).await,
            None => Vec::new(),
        };
        for t in [
            EDGE, EDGE_OFF, EDGE_EMB, BARE, PEER, EDGE_HEDGE, NOOP, NOOP_LOG, BARE_JS,
        ]
        .into_iter()
        .chain(opts.compare_edge.iter().flat_map(|_| [EDGE_B, EDGE_EMB_B]))
        .chain(obliged.map(|_| BARE_OBLIGED))
        {
            let warm = load::sequential(addr, t, std::slice::from_ref(&req), 50, timeout).await;
            if !warm.iter().any(|o| o.status == 200) {
                bail!(
                    "{} never answered 200 while warming up: {:?}",
                    t.0,
                    warm.last().map(|o| (&o.status, &o.error))
                );
            }
        }
        // Sequential healthy rounds, edge and bare alternating who goes first.
        let (mut se, mut sb) = (Vec::new(), Vec::new());
        let (mut ce, mut cb) = (None, None);
        for r in 0..opts.rounds {
            let (e, b) = if r % 2 == 0 {
                let e = server::once(&mut ce, addr, EDGE, &req, timeout).await;
                (e, server::once(&mut cb, addr, BARE, &req, timeout).await)
            } else {
                let b = server::once(&mut cb, addr, BARE, &req, timeout).await;
                (server::once(&mut ce, addr, EDGE, &req, timeout).await, b)
            };
            se.push(e);
            sb.push(b);
        }
        let open_before = openings(addr, &admin_path, &admin_token).await;
        let plans = fresh("bench-load", 200);
        let mut sides = vec![EDGE, PEER, BARE, EDGE_OFF];
        if opts.compare_edge.is_some() {
            sides.push(EDGE_B);
        }
        let healthy_c = interleaved(
            addr,
            &sides,
            &plans,
            opts.concurrency,
            opts.throughput_secs,
            &pids,
        )
        .await;
        // CPU in steps: the bare pass-through, the same keeping the edge's promises on a
        // healthy request the direct workers-rs way (token, log line, headers, write-through), and the
        // edge; beside them the same pass-through in JavaScript and the JS peer, so the
        // edge's lead over the peer stands next to the Rust shell's over the JS one —
        // alternating slices, each side as long as in the other phases.
        let steps = [BARE, BARE_OBLIGED, EDGE, BARE_JS, PEER];
        let steps_phase = if obliged.is_some() {
            interleaved(
                addr,
                &steps,
                &plans,
                opts.concurrency,
                opts.throughput_secs * steps.len() as f64 / 4.0,
                &pids,
            )
            .await
        } else {
            Vec::new()
        };
        let served_before = origin.served_histogram();
        let healthy_hi = interleaved(
            addr,
            &[EDGE, PEER, NOOP],
            &plans,
            HIGH_CONCURRENCY,
            opts.throughput_secs,
            &pids,
        )
        .await;
        let open_after = openings(addr, &admin_path, &admin_token).await;
        let served_hi: Vec<u64> = origin
            .served_histogram()
            .iter()
            .zip(&served_before)
            .map(|(a, b)| a - b)
            .collect();

        // The model hangs.
        origin.set_fault(Fault::Hang)?;
        // Each hung request is followed, on the same connection, by one the edge refuses
        // before any I/O (a method the route does not take): what the loopback, the runtime
        // and the engine's start cost without the deadline — the floor under the figure.
        // And, on a connection of its own, the runtime's timer alone: the no-op Worker
        // answering after a `setTimeout` of the deadline; and, on another, the same timer
        // racing a model call that hangs (the floor with a subrequest in flight).
        let timer_req = Planned {
            method: "GET".into(),
            target: format!("/?wait={}", shipped.budget.deadline_ms),
            headers: Vec::new(),
            user: None,
            ..req.clone()
        };
        let race_req = Planned {
            target: format!("/?wait={}&race=1", shipped.budget.deadline_ms),
            ..timer_req.clone()
        };
        // With `--compare-edge`, the other build's embedded-only edge takes a turn in each
        // round too, on its own connection, first in every other round.
        let mut emb_hung = Vec::with_capacity(opts.hung_rounds);
        let mut emb_hung_b = Vec::new();
        let mut refused_hung = Vec::with_capacity(opts.hung_rounds);
        let mut timer_floor = Vec::with_capacity(opts.hung_rounds);
        let mut race_floor = Vec::with_capacity(opts.hung_rounds);
        let (mut c, mut ct, mut cb, mut cr) = (None, None, None, None);
        for r in 0..opts.hung_rounds {
            let b_first = opts.compare_edge.is_some() && r % 2 == 1;
            if b_first {
                emb_hung_b.push(server::once(&mut cb, addr, EDGE_EMB_B, &req, timeout).await);
            }
            emb_hung.push(server::once(&mut c, addr, EDGE_EMB, &req, timeout).await);
            refused_hung.push(server::once(&mut c, addr, EDGE_EMB, &refused, timeout).await);
            timer_floor.push(server::once(&mut ct, addr, NOOP, &timer_req, timeout).await);
            race_floor.push(server::once(&mut cr, addr, NOOP, &race_req, timeout).await);
            if opts.compare_edge.is_some() && !b_first {
                emb_hung_b.push(server::once(&mut cb, addr, EDGE_EMB_B, &req, timeout).await);
            }
        }
        let off_before = speculative(addr, EDGE_OFF, &admin_path, &admin_token).await;
        let mut off_hung = Vec::new();
        let mut c = None;
        for i in 0..opts.hung_rounds {
            let p = if i % 2 == 1 {
                hung_fresh.get(i / 2).unwrap_or(&req)
            } else {
                &req
            };
            off_hung.push(server::once(&mut c, addr, EDGE_OFF, p, timeout).await);
        }
        let off_after = speculative(addr, EDGE_OFF, &admin_path, &admin_token).await;
        let hi_before = speculative(addr, EDGE, &admin_path, &admin_token).await;
        // Four sides here, so the phase runs 4/3 as long: each side keeps its share of time.
        let hung_hi = interleaved(
            addr,
            &[EDGE, PEER, NOOP, NOOP_LOG],
            &plans,
            HIGH_CONCURRENCY,
            opts.throughput_secs * 4.0 / 3.0,
            &pids,
        )
        .await;
        let hi_after = speculative(addr, EDGE, &admin_path, &admin_token).await;
        // The closed loop above runs each side as fast as it answers: the edge, answering at
        // once, saturates its isolate, the peer waits its deadline every time. The same load
        // at one rate for both — the peer's own — compares them as a user sees them.
        let peer_rate = m_rate(&hung_hi, 1);
        let hung_paced = match peer_rate {
            Some(rate) => {
                interleaved_at(
                    addr,
                    &[EDGE, PEER],
                    &plans,
                    HIGH_CONCURRENCY,
                    Some(rate),
                    opts.throughput_secs * 2.0 / 3.0,
                    &pids,
                )
                .await
            }
            None => Vec::new(),
        };
        let bare_hung = server::once(&mut None, addr, BARE, &req, Duration::from_secs(1)).await;
        // A model with a long tail: most calls fast, a few past the deadline. The hedging
        // edge and the same edge without hedging, in alternating blocks; origin calls counted
        // per block. The base latency is off here, so the fast calls take `BIMODAL_FAST_MS`
        // and a hedge sent after them still has time to answer before the deadline (on top
        // of 25 ms, a 15 ms call is 40 ms: its hedge could never win inside 45 ms).
        origin.set_base_latency(Duration::ZERO)?;
        origin.set_fault(Fault::Bimodal {
            fast_ms: BIMODAL_FAST_MS,
            slow_ms: BIMODAL_SLOW_MS,
            slow_per_mille: BIMODAL_SLOW_PER_MILLE,
        })?;
        let (mut tail_plain, mut tail_hedged, mut calls_plain, mut calls_hedged) =
            (Vec::new(), Vec::new(), 0u64, 0u64);
        for _ in 0..4 {
            for (t, out, calls) in [
                (EDGE_OFF, &mut tail_plain, &mut calls_plain),
                (EDGE_HEDGE, &mut tail_hedged, &mut calls_hedged),
            ] {
                let before = origin.stats().requests;
                out.extend(load::sequential(addr, t, &plans, opts.tail_rounds / 4, timeout).await);
                *calls += origin.stats().requests - before;
            }
        }
        origin.clear_fault();
        origin.set_base_latency(Duration::from_millis(opts.origin_latency_ms))?;
        let origin_calls = origin.stats().requests;
        Ok(report::Measured {
            cold_edge,
            cold_peer,
            cold_bare,
            cold_bare_obliged,
            seq_edge: se,
            seq_bare: sb,
            healthy_c,
            healthy_hi,
            breaker_openings: new_openings(open_before, open_after),
            origin_served_hi: served_hi,
            emb_hung,
            emb_hung_b,
            refused_hung,
            timer_floor,
            race_floor,
            off_hung,
            speculative_off: added(off_before, off_after),
            speculative_hi: added(hi_before, hi_after),
            hung_hi,
            hung_paced,
            steps_phase,
            bare_hung,
            origin_calls,
            tail: report::Tail {
                plain: tail_plain,
                hedged: tail_hedged,
                calls_plain,
                calls_hedged,
                fast_ms: BIMODAL_FAST_MS,
                slow_ms: BIMODAL_SLOW_MS,
                slow_per_mille: BIMODAL_SLOW_PER_MILLE,
            },
        })
    });
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
