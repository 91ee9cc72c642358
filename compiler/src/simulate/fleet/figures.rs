//! What a fleet run did, per scope: time to degrade and to recover for the traffic and per
//! isolate, model calls during the outage, probes, live share.

use serde::Serialize;

use super::super::scenario::{ModelFault, Phase, Scenario};
use super::super::{RequestResult, Source};
use super::{FleetRun, Load};

use understudy_core::breaker::fleet::FleetMode;

mod human;
pub use human::human;

/// One scope's figures (docs/scenarios.md, "The fleet").
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Figures {
    pub scope: &'static str,
    /// From the fault's onset until the traffic is degraded: from then to the fault's end,
    /// at least 99% of the requests of every 250 ms slot met a breaker not closed.
    pub degrade_s: Option<f64>,
    /// From the fault's end until the traffic is live again: from then on, at least 99% of
    /// every slot's requests met a closed breaker.
    pub recover_s: Option<f64>,
    /// Fleet scope: the same rule as `degrade_s` over the requests within reach. A request
    /// after the fleet's verdict first opened is out of reach when its isolate had no
    /// request from [`REACH_MS`] before that opening until it came: no I/O of that isolate
    /// could bring the opening (a Worker's I/O ends at most 30 s after its response), so
    /// nothing could have told it.
    pub degrade_in_reach_s: Option<f64>,
    /// Fleet scope: the rule with every request in reach counted as degraded and every one
    /// out of reach as not — the time no design that keeps the coordinator off the request
    /// path could beat in this run, given when the fleet opened.
    pub degrade_floor_s: Option<f64>,
    /// Requests in the fault out of reach, and those of them that met a closed breaker.
    pub out_of_reach: u64,
    pub out_of_reach_closed: u64,
    /// Fleet scope: the rule of `recover_s` over the requests within reach of the fleet's
    /// last close (as `degrade_in_reach_s` is of its opening): an isolate idle from
    /// [`REACH_MS`] before the close until its next request could not hear it by then.
    pub recover_in_reach_s: Option<f64>,
    /// Fleet scope: the rule with every request in reach of the close counted as live and
    /// every one out of it as not.
    pub recover_floor_s: Option<f64>,
    /// Requests after the close out of its reach, and those of them the model answered (the
    /// request asked the coordinator with its call and heeded the close: ADR 011, "Asking
    /// first").
    pub after_close_out_of_reach: u64,
    pub after_close_out_of_reach_live: u64,
    /// Model calls made while the model was faulty, and probes (calls by requests that met
    /// RECOVERING_PROBE).
    pub outage_model_calls: u64,
    pub probes: u64,
    /// Share of all requests answered by the model.
    pub live_share: f64,
    /// Per isolate that had traffic in the fault: time from the onset to its own first
    /// DEGRADED_FALLBACK (the slowest, and the 95th percentile across isolates)…
    pub isolate_degrade_slowest_s: Option<f64>,
    pub isolate_degrade_p95_s: Option<f64>,
    /// …and from the fault's end to its last return to PRIMARY_HEALTHY.
    pub isolate_recover_slowest_s: Option<f64>,
    pub isolate_recover_p95_s: Option<f64>,
    /// Isolates with traffic during the fault that never degraded, and that never came back
    /// (of those with a request after the fault).
    pub never_degraded: u64,
    pub never_recovered: u64,
    /// The fleet's verdict (fleet scope): from the onset to its first opening, from the
    /// fault's end to its closing.
    pub fleet_opened_s: Option<f64>,
    pub fleet_closed_s: Option<f64>,
    pub reports: u64,
    pub report_failures: u64,
    /// Watches sent, and those answered with a verdict (when the fleet opened or closed, or
    /// after 25 s).
    pub watches: u64,
    pub pushed: u64,
    pub requests: u64,
    /// Each coordinator's load (fleet scope): the regions' in order, then the global one.
    pub coordinators: Vec<Load>,
    /// A fault that strikes some regions only (the figures above are of the requests in
    /// those): the requests served in the other regions, those of them that met a breaker not
    /// closed, and the largest share of such requests in any 250 ms slot of the run.
    pub elsewhere_requests: u64,
    pub elsewhere_not_closed: u64,
    pub elsewhere_worst_slot_share: f64,
}

/// The scenario's faulty phases: all but those in which the model answers as fast as its
/// baseline.
pub fn faulty_phases(sc: &Scenario) -> Vec<&Phase> {
    sc.phases
        .iter()
        .filter(|p| !matches!(p.fault, ModelFault::Ok { latency_ms } if latency_ms <= sc.model_latency_ms))
        .collect()
}

/// The fault's span in ms after the start: the first faulty phase's start to the last's end.
pub fn fault_span(sc: &Scenario) -> Option<(u64, u64)> {
    let spans: Vec<(u64, u64)> = faulty_phases(sc)
        .into_iter()
        .map(|p| sc.window_us(p))
        .collect();
    let from = spans.iter().map(|s| s.0).min()? / 1000;
    let to = spans.iter().map(|s| s.1).max()?;
    let last_ms = sc.requests.saturating_mul(sc.interval_us) / 1000;
    Some((from, (to / 1000).min(last_ms)))
}

const SLOT_MS: u64 = 250;
/// How long after its answer an isolate can still be told anything: a Worker's `waitUntil`
/// runs at most 30 s after its response, and a watch's answer must come back within it
/// (the driver's timeout on top of the longest hold).
pub const REACH_MS: u64 = understudy_core::breaker::fleet::WAIT_UNTIL_MS
    - understudy_core::breaker::member::REPORT_TIMEOUT_MS;
const SHARE: f64 = 0.99;

/// The first slot start in `[from, to)` from which every slot's share of requests `pred`
/// holds for is at least [`SHARE`]; the time from `from` to that slot's end, in s.
fn settled<'a>(
    results: impl IntoIterator<Item = &'a RequestResult>,
    from: u64,
    to: u64,
    pred: impl Fn(&RequestResult) -> bool,
) -> Option<f64> {
    let slots = (to.saturating_sub(from)).div_ceil(SLOT_MS) as usize;
    let mut tally = vec![(0u64, 0u64); slots];
    for r in results
        .into_iter()
        .filter(|r| (from..to).contains(&r.arrival_ms))
    {
        let s = ((r.arrival_ms - from) / SLOT_MS) as usize;
        tally[s].0 += 1;
        tally[s].1 += u64::from(pred(r));
    }
    let mut first = None;
    for (s, (n, yes)) in tally.iter().enumerate().rev() {
        if *n == 0 {
            continue;
        }
        if (*yes as f64) < SHARE * *n as f64 {
            break;
        }
        first = Some(s);
    }
    first.map(|s| ((s as u64 + 1) * SLOT_MS) as f64 / 1000.0)
}

/// For each request (by index), whether it was within reach of the fleet's opening at
/// `opened` (ms after the start): it came before it, or its isolate had a request from
/// [`REACH_MS`] before it on. All are, with no opening.
fn in_reach(run: &FleetRun, opened: Option<u64>) -> Vec<bool> {
    let Some(opened) = opened else {
        return vec![true; run.isolate_of.len()];
    };
    let since = opened.saturating_sub(REACH_MS);
    let mut order: Vec<&RequestResult> = run.results.iter().collect();
    order.sort_by_key(|r| (r.arrival_ms, r.index));
    let mut last: Vec<Option<u64>> = vec![None; run.changes.len()];
    let mut reach = vec![true; run.isolate_of.len()];
    for r in order {
        let k = run.isolate_of[r.index as usize] as usize;
        reach[r.index as usize] = r.arrival_ms < opened || last[k].is_some_and(|t| t >= since);
        last[k] = Some(r.arrival_ms);
    }
    reach
}

fn p95(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let i = ((0.95 * v.len() as f64).ceil() as usize).saturating_sub(1);
    Some(v[i.min(v.len() - 1)])
}

/// A run's figures, the fault spanning `[onset, end)` ms after the start.
pub fn figures(scope: &'static str, run: &FleetRun, onset: u64, end: u64) -> Figures {
    let healthy = |m: &str| m == "PRIMARY_HEALTHY" || m == "CLOSED";
    let struck = |r: &RequestResult| {
        run.struck
            .get(run.isolate_of[r.index as usize] as usize)
            .copied()
            .unwrap_or(true)
    };
    let (hit, elsewhere): (Vec<&RequestResult>, Vec<&RequestResult>) =
        run.results.iter().partition(|r| struck(r));
    let run_end = run
        .results
        .iter()
        .map(|r| r.arrival_ms + 1)
        .max()
        .unwrap_or(end);
    let n = run.changes.len();
    let (mut in_fault, mut after) = (vec![false; n], vec![false; n]);
    for r in &run.results {
        let k = run.isolate_of[r.index as usize] as usize;
        in_fault[k] |= (onset..end).contains(&r.arrival_ms);
        after[k] |= r.arrival_ms >= end;
    }
    let (mut degrade, mut recover) = (Vec::new(), Vec::new());
    let (mut never_degraded, mut never_recovered) = (0, 0);
    for (k, ch) in run
        .changes
        .iter()
        .enumerate()
        .filter(|(k, _)| in_fault[*k] && run.struck.get(*k).copied().unwrap_or(true))
    {
        match ch.iter().find(|(t, m)| *t >= onset && !healthy(m)) {
            Some((t, _)) => degrade.push((t - onset) as f64 / 1000.0),
            None => never_degraded += 1,
        }
        let Some(first_open) = ch.iter().position(|(t, m)| *t >= onset && !healthy(m)) else {
            continue;
        };
        match ch[first_open..].last() {
            Some((t, m)) if healthy(m) => recover.push(t.saturating_sub(end) as f64 / 1000.0),
            // Not back, with a request after the fault that met its breaker open. One with
            // no request since (and out of a watch's reach) is not counted either way.
            _ if after[k] => never_recovered += 1,
            _ => {}
        }
    }
    let max = |v: &[f64]| v.iter().copied().reduce(f64::max);
    let opened = run
        .fleet_moves
        .iter()
        .find(|(t, m)| *t >= onset && *m != FleetMode::Closed)
        .map(|(t, _)| *t);
    let reach = in_reach(run, opened);
    let fleet = |v: Option<f64>| opened.and(v);
    let closed = run
        .fleet_moves
        .iter()
        .rev()
        .find(|(t, m)| *t >= onset && *m == FleetMode::Closed)
        .map(|(t, _)| *t);
    let reach_close = in_reach(run, closed);
    let after_close_out = |r: &&RequestResult| {
        closed.is_some_and(|c| r.arrival_ms >= c) && !reach_close[r.index as usize]
    };
    let closes = |v: Option<f64>| closed.and(v);
    let in_fault_out =
        |r: &&RequestResult| (onset..end).contains(&r.arrival_ms) && !reach[r.index as usize];
    let reachable = || hit.iter().copied().filter(|r| reach[r.index as usize]);
    let live = run
        .results
        .iter()
        .filter(|r| r.source == Source::Origin)
        .count();
    Figures {
        scope,
        degrade_s: settled(hit.iter().copied(), onset, end, |r| !healthy(r.mode)),
        recover_s: settled(hit.iter().copied(), end, run_end, |r| healthy(r.mode)),
        degrade_in_reach_s: fleet(settled(reachable(), onset, end, |r| !healthy(r.mode))),
        degrade_floor_s: fleet(settled(hit.iter().copied(), onset, end, |r| {
            reach[r.index as usize]
        })),
        out_of_reach: hit.iter().copied().filter(in_fault_out).count() as u64,
        out_of_reach_closed: hit
            .iter()
            .copied()
            .filter(in_fault_out)
            .filter(|r| healthy(r.mode))
            .count() as u64,
        recover_in_reach_s: closes(settled(
            hit.iter()
                .copied()
                .filter(|r| reach_close[r.index as usize]),
            end,
            run_end,
            |r| healthy(r.mode),
        )),
        recover_floor_s: closes(settled(hit.iter().copied(), end, run_end, |r| {
            reach_close[r.index as usize]
        })),
        after_close_out_of_reach: hit.iter().copied().filter(after_close_out).count() as u64,
        after_close_out_of_reach_live: hit
            .iter()
            .copied()
            .filter(after_close_out)
            .filter(|r| r.source == Source::Origin)
            .count() as u64,
        outage_model_calls: run.outage_calls,
        probes: run
            .results
            .iter()
            .filter(|r| r.mode == "RECOVERING_PROBE" && r.model_attempts > 0)
            .count() as u64,
        live_share: live as f64 / run.results.len().max(1) as f64,
        isolate_degrade_slowest_s: max(&degrade),
        isolate_degrade_p95_s: p95(degrade),
        isolate_recover_slowest_s: if never_recovered > 0 {
            None
        } else {
            max(&recover)
        },
        isolate_recover_p95_s: p95(recover),
        never_degraded,
        never_recovered,
        fleet_opened_s: opened.map(|t| (t - onset) as f64 / 1000.0),
        fleet_closed_s: run
            .fleet_moves
            .iter()
            .rev()
            .find(|(t, m)| *t >= onset && *m == FleetMode::Closed)
            .map(|(t, _)| t.saturating_sub(end) as f64 / 1000.0),
        reports: run.reports,
        report_failures: run.report_failures,
        watches: run.watches,
        pushed: run.pushed,
        requests: run.results.len() as u64,
        coordinators: run.coordinators.clone(),
        elsewhere_requests: elsewhere.len() as u64,
        elsewhere_not_closed: elsewhere.iter().filter(|r| !healthy(r.mode)).count() as u64,
        elsewhere_worst_slot_share: worst_slot(&elsewhere, |r| !healthy(r.mode)),
    }
}

/// The largest share of any 250 ms slot's requests that `pred` holds for.
fn worst_slot(results: &[&RequestResult], pred: impl Fn(&RequestResult) -> bool) -> f64 {
    let mut slots: std::collections::BTreeMap<u64, (u64, u64)> = Default::default();
    for r in results {
        let s = slots.entry(r.arrival_ms / SLOT_MS).or_default();
        s.0 += 1;
        s.1 += u64::from(pred(r));
    }
    slots
        .values()
        .map(|(n, yes)| *yes as f64 / *n as f64)
        .fold(0.0, f64::max)
}

/// What the fleet scope's figures miss of the scenario's `degrade_within` and
/// `recover_within`, and every coordinator over its capacity. The time to degrade is met
/// when the traffic meets it, or when the traffic within reach of the fleet's opening meets
/// it and the traffic as a whole is no later than its floor (what the requests out of reach
/// alone impose; `never` is later than any time). A coordinator whose busiest second is over
/// its capacity, or that refused a request, breaks the run whatever its times.
pub fn unmet(sc: &Scenario, fleet: &Figures) -> Vec<String> {
    let mut out: Vec<String> = fleet.coordinators.iter().filter_map(Load::over).collect();
    let Some(spec) = &sc.fleet else {
        return out;
    };
    let within = |bound: u64, got: Option<f64>| got.is_some_and(|s| s * 1000.0 <= bound as f64);
    let secs = |got: Option<f64>| got.map_or("never".to_string(), |s| format!("{s:.2} s"));
    if let Some(bound) = spec.degrade_within_ms {
        let inf = |v: Option<f64>| v.unwrap_or(f64::INFINITY);
        let floor = inf(fleet.degrade_floor_s).max(bound as f64 / 1000.0);
        let met = within(bound, fleet.degrade_s)
            || (within(bound, fleet.degrade_in_reach_s) && inf(fleet.degrade_s) <= floor);
        if !met {
            out.push(format!(
                "fleet scope: time to degrade {} (within reach {}, floor {}), over {:.1} s",
                secs(fleet.degrade_s),
                secs(fleet.degrade_in_reach_s),
                secs(fleet.degrade_floor_s),
                bound as f64 / 1000.0
            ));
        }
    }
    if fleet.elsewhere_requests > 0 && fleet.elsewhere_worst_slot_share > 1.0 - SHARE {
        out.push(format!(
            "fleet scope: {} of {} requests in regions the fault did not strike met a breaker not closed ({:.1}% of the worst 250 ms slot, over 1%)",
            fleet.elsewhere_not_closed,
            fleet.elsewhere_requests,
            100.0 * fleet.elsewhere_worst_slot_share
        ));
    }
    if let Some(bound) = spec.recover_within_ms {
        // As the time to degrade: met by the traffic, or by the traffic within reach of the
        // fleet's close with the whole no later than what the requests out of reach impose.
        let inf = |v: Option<f64>| v.unwrap_or(f64::INFINITY);
        let floor = inf(fleet.recover_floor_s).max(bound as f64 / 1000.0);
        let met = within(bound, fleet.recover_s)
            || (within(bound, fleet.recover_in_reach_s) && inf(fleet.recover_s) <= floor);
        if !met {
            out.push(format!(
                "fleet scope: time to recover {} (within reach {}, floor {}), over {:.1} s",
                secs(fleet.recover_s),
                secs(fleet.recover_in_reach_s),
                secs(fleet.recover_floor_s),
                bound as f64 / 1000.0
            ));
        }
    }
    out
}
