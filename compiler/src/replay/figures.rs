//! The figures of one column — as logged, or a replayed run — read from its log lines, so
//! the three columns are counted by one function: answers and their shares, model calls and
//! probes, latency percentiles, each incident's time to degrade and to recover, and the
//! same per time window.

use std::collections::BTreeMap;

use serde::Serialize;
use understudy_core::breaker::Mode;

use super::incidents::Incident;
use super::line::Line;
use super::recovery::normal_from;

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Figures {
    pub answers: u64,
    pub live: u64,
    /// Disclosed fallbacks.
    pub degraded: u64,
    /// No tier answered: 504 / 503.
    pub unavailable: u64,
    /// The origin's 4xx passed through.
    pub rejected: u64,
    /// Disclosed fallbacks by the tier that answered.
    pub by_tier: BTreeMap<String, u64>,
    pub model_calls: u64,
    /// Calls made as the breaker's probes (or half-open trials).
    pub probes: u64,
    pub latency_p50_ms: u64,
    pub latency_p95_ms: u64,
    pub latency_p99_ms: u64,
    pub incidents: Vec<Recovery>,
    pub windows: Vec<Window>,
    /// Every answer's latency, sorted (what a rollout's histogram is made of).
    #[serde(skip)]
    pub latencies_ms: Vec<u64>,
}

impl Figures {
    pub fn share(&self, n: u64) -> f64 {
        if self.answers == 0 {
            0.0
        } else {
            n as f64 / self.answers as f64
        }
    }
}

/// How one column went through one incident (ms after the first arrival).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Recovery {
    /// The first breaker to open after the onset.
    pub degraded_at_ms: Option<u64>,
    /// The last breaker back to healthy after the origin was last seen failing.
    pub breaker_healthy_at_ms: Option<u64>,
    /// From this live answer on, answers were normal again (`recovery::normal`).
    pub normal_at_ms: Option<u64>,
    /// The later of the two — or, when no breaker opened, when answers were normal.
    pub recovered_at_ms: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Window {
    pub from_ms: u64,
    pub answers: u64,
    pub live: u64,
    pub degraded: u64,
    pub unavailable: u64,
    pub model_calls: u64,
    pub p95_ms: u64,
}

/// Nearest-rank percentile (the rank rule of `simulate` and `drill`).
fn pct(sorted: &[u64], q: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// A breaker's mode change, seen at the answer that first showed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Change {
    at_ms: u64,
    to: Mode,
}

/// Each isolate's mode changes, from its lines in answer order.
fn changes(lines: &[Line], first_ms: u64) -> Vec<Change> {
    let mut by_isolate: BTreeMap<&str, Vec<(u64, Option<Mode>)>> = BTreeMap::new();
    for l in lines {
        let answered = (l.at_ms + l.latency_ms).saturating_sub(first_ms);
        by_isolate
            .entry(l.isolate.as_str())
            .or_default()
            .push((answered, Mode::from_name(&l.breaker_mode)));
    }
    let mut out = Vec::new();
    for (_, mut seen) in by_isolate {
        seen.sort_by_key(|s| s.0);
        let mut mode = seen.first().and_then(|s| s.1);
        for (at_ms, m) in seen {
            if m.is_some() && m != mode {
                if let Some(to) = m {
                    out.push(Change { at_ms, to });
                }
                mode = m;
            }
        }
    }
    out.sort_by_key(|c| c.at_ms);
    out
}

/// The figures of `lines` (sorted by arrival; `first_ms`: the first arrival, ms since the
/// epoch), for `incidents`, in windows of `window_ms`.
pub fn figures(lines: &[Line], first_ms: u64, incidents: &[Incident], window_ms: u64) -> Figures {
    let mut f = Figures::default();
    let mut lat = Vec::with_capacity(lines.len());
    let mut windows: BTreeMap<u64, (Window, Vec<u64>)> = BTreeMap::new();
    for l in lines {
        let w = l.at_ms.saturating_sub(first_ms) / window_ms.max(1);
        let (win, wl) = windows.entry(w).or_default();
        f.answers += 1;
        win.answers += 1;
        match l.outcome.as_str() {
            "live" => {
                f.live += 1;
                win.live += 1;
            }
            "fallback" => {
                f.degraded += 1;
                win.degraded += 1;
                *f.by_tier
                    .entry(l.tier.clone().unwrap_or_default())
                    .or_insert(0) += 1;
            }
            "unavailable" => {
                f.unavailable += 1;
                win.unavailable += 1;
            }
            _ => f.rejected += 1,
        }
        let calls = l.calls.len() as u64;
        f.model_calls += calls;
        win.model_calls += calls;
        f.probes += l.calls.iter().filter(|c| c.probe).count() as u64;
        lat.push(l.latency_ms);
        wl.push(l.latency_ms);
    }
    lat.sort_unstable();
    f.latency_p50_ms = pct(&lat, 0.50);
    f.latency_p95_ms = pct(&lat, 0.95);
    f.latency_p99_ms = pct(&lat, 0.99);
    f.latencies_ms = lat;
    f.windows = windows
        .into_iter()
        .map(|(w, (mut win, mut wl))| {
            wl.sort_unstable();
            win.from_ms = w * window_ms;
            win.p95_ms = pct(&wl, 0.95);
            win
        })
        .collect();
    let changes = changes(lines, first_ms);
    f.incidents = incidents
        .iter()
        .enumerate()
        .map(|(n, inc)| {
            let until = incidents.get(n + 1).map_or(u64::MAX, |next| next.onset_ms);
            recovery(lines, first_ms, &changes, inc, until)
        })
        .collect();
    f
}

/// How the column went through `inc`, looking no further than `until` (the next onset).
fn recovery(
    lines: &[Line],
    first_ms: u64,
    changes: &[Change],
    inc: &Incident,
    until: u64,
) -> Recovery {
    let end = inc.last_bad_ms;
    let degraded_at_ms = changes
        .iter()
        .find(|c| c.to == Mode::Open && c.at_ms >= inc.onset_ms && c.at_ms < until)
        .map(|c| c.at_ms);
    let breaker_healthy_at_ms = changes
        .iter()
        .filter(|c| c.to == Mode::Healthy && c.at_ms >= end && c.at_ms < until)
        .map(|c| c.at_ms)
        .max();
    let after: Vec<(u64, bool)> = lines
        .iter()
        .map(|l| (l.at_ms.saturating_sub(first_ms), l.outcome == "live"))
        .filter(|(t, _)| *t >= end && *t < until)
        .collect();
    let normal_at_ms = normal_from(&after);
    // A breaker open at the end of the incident must have closed; one that never opened
    // (a fault too short to trip it) leaves the answers to say.
    let open_at_end = changes
        .iter()
        .filter(|c| c.at_ms < until)
        .rfind(|c| c.at_ms >= inc.onset_ms)
        .is_some_and(|c| c.to != Mode::Healthy);
    let recovered_at_ms = match (breaker_healthy_at_ms, normal_at_ms) {
        (Some(b), Some(n)) => Some(b.max(n)),
        (None, n) if degraded_at_ms.is_none() => n,
        _ => None,
    }
    .filter(|_| !open_at_end);
    Recovery {
        degraded_at_ms,
        breaker_healthy_at_ms,
        normal_at_ms,
        recovered_at_ms,
    }
}

#[cfg(test)]
pub(crate) mod tests;
