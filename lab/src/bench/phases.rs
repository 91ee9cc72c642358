//! The bench's phases: interleaved (and paced) closed loops over several sides, and what
//! the edge's status endpoint says between them.

use std::time::Duration;

use serde_json::Value;

use super::load::{self, Slice};
use super::server::{self, Target};
use super::EDGE;
use crate::drill::driver::Planned;
use crate::drill::status::status_once;

/// The answers a second side `i` of a phase passed, when it passed any.
pub(super) fn m_rate(phase: &[Slice], i: usize) -> Option<f64> {
    phase.get(i).map(Slice::rps).filter(|r| *r > 0.0)
}

/// Alternating closed-loop slices of each side, three rounds; one merged slice per side.
pub(super) async fn interleaved(
    addr: server::Addr,
    sides: &[Target],
    plans: &[Planned],
    c: usize,
    secs: f64,
    pids: &[u32],
) -> Vec<Slice> {
    interleaved_at(addr, sides, plans, c, None, secs, pids).await
}

/// [`interleaved`], each side paced to `rate` requests a second when given (an open loop).
pub(super) async fn interleaved_at(
    addr: server::Addr,
    sides: &[Target],
    plans: &[Planned],
    c: usize,
    rate: Option<f64>,
    secs: f64,
    pids: &[u32],
) -> Vec<Slice> {
    let rounds = 3;
    // A slice of at least 0.1 s: a closed loop of 64 connections against a 25 ms model turns
    // over a few times in it; below, ramp-up and drain are most of the slice.
    let slice = Duration::from_secs_f64((secs / (rounds * sides.len()) as f64).max(0.1));
    let mut per: Vec<Vec<Slice>> = vec![Vec::new(); sides.len()];
    for _ in 0..rounds {
        for (i, t) in sides.iter().enumerate() {
            let s = load::paced_loop(
                addr,
                *t,
                plans,
                c,
                rate,
                slice,
                pids,
                Duration::from_secs(5),
            )
            .await;
            per[i].push(s);
        }
    }
    per.iter().map(|v| Slice::merge(v)).collect()
}

/// The breaker's openings on the edge (transitions to OPEN / DEGRADED_FALLBACK), each with
/// the evidence it opened on.
pub(super) async fn openings(addr: server::Addr, path: &str, token: &str) -> Option<Vec<Value>> {
    let doc = status_once(addr.of(EDGE), path, token).await?;
    let t = doc["breaker"]["transitions"].as_array()?;
    Some(
        t.iter()
            .filter(|x| matches!(x["to"].as_str(), Some("OPEN" | "DEGRADED_FALLBACK")))
            .cloned()
            .collect(),
    )
}

/// The edge `t`'s speculative tier reads so far: (asked for, unused), from its status
/// endpoint's counters.
pub(super) async fn speculative(
    addr: server::Addr,
    t: Target,
    path: &str,
    token: &str,
) -> Option<(u64, u64)> {
    let doc = status_once(addr.of(t), path, token).await?;
    let c = &doc["counters"];
    Some((
        c["kv_prefetched"].as_u64()?,
        c["kv_prefetch_unused"].as_u64()?,
    ))
}

/// What a phase added to [`speculative`]'s counts.
pub(super) fn added(before: Option<(u64, u64)>, after: Option<(u64, u64)>) -> Option<(u64, u64)> {
    let ((a0, u0), (a1, u1)) = (before?, after?);
    Some((a1.saturating_sub(a0), u1.saturating_sub(u0)))
}

/// The openings in `after` that `before` did not hold (by time: the log keeps the latest).
pub(super) fn new_openings(
    before: Option<Vec<Value>>,
    after: Option<Vec<Value>>,
) -> Option<Vec<Value>> {
    let (before, after) = (before?, after?);
    let last = before.iter().filter_map(|t| t["at_ms"].as_u64()).max();
    Some(
        after
            .into_iter()
            .filter(|t| last.is_none_or(|l| t["at_ms"].as_u64().is_some_and(|a| a > l)))
            .collect(),
    )
}
