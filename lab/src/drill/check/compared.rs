//! `SIMULATE_AGREES`, judged like every check: the edge against `simulate` request by
//! request (one isolate), or breaker episode by episode (`--isolates K`).
//!
//! Offenders. One isolate: each request that disagrees; a deadline miss where `simulate`
//! had none is late by the deadline less the model's latency for it (what the host must
//! have taken), any other disagreement is not a matter of time. Several isolates: each
//! isolate whose episodes differ is explained by its probings that failed after the fault's
//! end (their slow and timed-out probes: [`super::late_recovery`]); an isolate that differs
//! without one is not a matter of time.

use understudy_compiler::simulate::scenario::{ModelFault, Scenario};

use super::blame::{missed_deadline, Offender};
use super::moves::{failed_probing_offenders, fleet_scope};
use super::{Context, Verdict};
use crate::drill::compare::Disagreement;
use crate::drill::compare_fleet::IsolateCompared;
use crate::drill::observe::Observed;

/// The model's latency for request `o`, as the scenario scripts it (None: it fails).
fn model_latency(sc: &Scenario, o: &Observed) -> Option<u64> {
    match sc.fault(o.index, o.scheduled_ms as u64) {
        ModelFault::Ok { latency_ms } => Some(latency_ms),
        _ => None,
    }
}

/// `--compare-simulate` with one isolate.
pub fn requests_agree(
    obs: &[Observed],
    cx: &Context<'_>,
    sc: &Scenario,
    d: &[Disagreement],
    first: Option<&str>,
) -> Verdict {
    let v = Verdict::new(
        "SIMULATE_AGREES",
        d.is_empty(),
        if d.is_empty() {
            format!(
                "all {} requests: same status, reason and tier in simulate",
                obs.len()
            )
        } else {
            format!(
                "{} of {} requests differ from simulate; first: {}",
                d.len(),
                obs.len(),
                first.unwrap_or("")
            )
        },
    );
    let deadline = cx.policy.budget.deadline_ms as f64;
    let offenders = d
        .iter()
        .map(|x| {
            let what = format!(
                "request {}: edge {} | simulate {}",
                x.index,
                x.edge,
                x.simulate
                    .as_ref()
                    .map_or_else(|| "no answer".to_string(), ToString::to_string)
            );
            let o = obs.iter().find(|o| o.index == x.index);
            let missed = missed_deadline(x.edge.reason.as_deref())
                && !missed_deadline(x.simulate.as_ref().and_then(|s| s.reason.as_deref()));
            match (o, o.and_then(|o| model_latency(sc, o))) {
                (Some(o), Some(lat)) if missed && (lat as f64) < deadline => Offender::late(
                    what,
                    Some(x.index),
                    o.sent_ms,
                    o.sent_ms + o.latency_ms,
                    deadline - lat as f64,
                ),
                (o, _) => Offender::not_timing(what, Some(x.index), o.map_or(0.0, |o| o.sent_ms)),
            }
        })
        .collect();
    v.judged_all(offenders, cx.stalls)
}

/// `--compare-simulate --isolates K`: `detail` written by the caller; `rows` each isolate's
/// comparison within `tol_ms`.
pub fn isolates_agree(
    obs: &[Observed],
    cx: &Context<'_>,
    rows: &[IsolateCompared],
    tol_ms: f64,
    detail: String,
) -> Verdict {
    let differ: Vec<&IsolateCompared> = rows.iter().filter(|r| !r.agrees(tol_ms)).collect();
    let v = Verdict::new("SIMULATE_AGREES", differ.is_empty(), detail);
    let by_index: std::collections::HashMap<u64, &Observed> =
        obs.iter().map(|o| (o.index, o)).collect();
    let mut offenders = Vec::new();
    for r in differ {
        let Some(iso) = cx.isolates.get(r.isolate) else {
            continue;
        };
        let pool: Vec<&Observed> = if fleet_scope(cx) {
            obs.iter().collect()
        } else {
            iso.requests
                .iter()
                .filter_map(|i| by_index.get(i).copied())
                .collect()
        };
        let who = format!("isolate {}", r.isolate);
        match failed_probing_offenders(&pool, &iso.transitions, cx, &who) {
            Some(o) => offenders.extend(o),
            None => offenders.push(Offender::not_timing(
                format!("{who}: other episodes than simulate's, with no probing failed after the fault's end"),
                None,
                0.0,
            )),
        }
    }
    v.judged_all(offenders, cx.stalls)
}
