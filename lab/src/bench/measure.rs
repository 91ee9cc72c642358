//! The measurement itself: the phases in their order against the running sides, from the
//! cold wave on fresh isolates to the model's long tail, each side's answers kept for the
//! report.

use std::time::Duration;

use anyhow::{bail, Result};
use understudy_core::catalog::Catalog;
use understudy_core::policy::Policy;

use super::phases::{
    added, interleaved, interleaved_at, m_rate, new_openings, openings, speculative,
};
use super::requests::{refused_before_io, request};
use super::server::{self, Addr};
use super::{load, report, Options};
use super::{
    BARE, BARE_JS, BARE_OBLIGED, BIMODAL_FAST_MS, BIMODAL_SLOW_MS, BIMODAL_SLOW_PER_MILLE,
    COLD_GAP, COLD_SETTLE, COLD_WAVE, EDGE, EDGE_B, EDGE_EMB, EDGE_EMB_B, EDGE_HEDGE, EDGE_OFF,
    HIGH_CONCURRENCY, NOOP, NOOP_LOG, PEER,
};
use crate::drill::driver::Planned;
use crate::drill::edge::dev_secret;
use crate::origin::{Fault, OriginHandle};

/// Runs every phase against the sides at `addr` (workerd's processes `pids`), with the
/// origin the sides call, and returns what each measured.
pub(super) fn measure(
    opts: &Options,
    shipped: &Policy,
    catalog: Option<&Catalog>,
    origin: &OriginHandle,
    addr: Addr,
    pids: &[u32],
) -> Result<report::Measured> {
    let obliged = shipped.identity.as_ref();
    let req = request(shipped, catalog, None);
    let refused = refused_before_io(shipped, &req);
    let fresh = |prefix: &str, n: usize| -> Vec<Planned> {
        (0..n)
            .map(|i| request(shipped, catalog, Some(&format!("{prefix}-{i}"))))
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
    eprintln!(
        "bench: cold wave {COLD_WAVE}, {} healthy rounds, closed loops at {} and {HIGH_CONCURRENCY} connections ({:.0} s each), {} hung rounds, origin latency {} ms…",
        opts.rounds, opts.concurrency, opts.throughput_secs, opts.hung_rounds, opts.origin_latency_ms
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
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
            pids,
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
                pids,
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
            pids,
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
            pids,
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
                    pids,
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
    })
}
