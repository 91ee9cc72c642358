//! A drill's outcome: the table (the same as `simulate`'s), every invariant's verdict, the
//! differential comparison with `simulate` when asked, the timeline picture and the JSON
//! report.

use serde_json::{json, Value};

use understudy_compiler::simulate::report;

use super::check::{self, Context};
use super::play::Played;
use super::setup::Prepared;
use super::{compare, compare_fleet, observe, plot, script, Options, Outcome, SLACK_MARGIN_MS};

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

pub fn outcome(prep: Prepared, p: Played, opts: &Options) -> Outcome {
    let (policy, sc, limits, loaded) = (&prep.policy, &prep.sc, prep.limits, &prep.loaded);
    let Played {
        obs,
        transitions,
        initial_mode,
        breaker_visible,
        status_visible,
        calibration,
        calib,
        slack_ms,
        start_epoch,
        origin_stats,
        user_probes,
        fault,
        per_isolate,
        witness,
        injected,
    } = p;
    let stalls = witness.stalls();
    let model_calls = origin_stats.requests;
    // The table, the same as simulate's.
    let run = observe::to_run(policy, sc, &obs, &transitions, model_calls);
    let summary = report::summarize(policy, sc, &run);
    let mut table = report::human(policy, &summary);

    let cx = Context {
        policy,
        limits,
        fault,
        transitions: &transitions,
        breaker_visible,
        slack_ms,
        user_probes: user_probes.as_deref(),
        time_scale: opts.time_scale,
        stalls: &stalls,
        healthy_model_ms: sc.model_latency_ms as f64,
        isolates: if per_isolate.len() > 1 {
            &per_isolate
        } else {
            &[]
        },
    };
    let (rec, isolates) = if per_isolate.len() > 1 {
        fleet_recovery(&obs, &cx, &per_isolate, &mut table)
    } else {
        (check::recovery(&obs, &cx), Value::Null)
    };
    let mut verdicts = check::check(&obs, &cx, &rec);
    let mut disagreements = Vec::new();
    if opts.compare_simulate && per_isolate.len() > 1 {
        let v = compare_fleet(&prep, opts.regions, start_epoch, &obs, &cx, &mut table);
        disagreements = v.1;
        verdicts.push(v.0);
    } else if opts.compare_simulate {
        let d = compare::compare(policy, loaded.catalog.as_ref(), sc, start_epoch, &obs);
        disagreements = compare::describe(&d, 10);
        let first = disagreements.first().map(String::as_str);
        verdicts.push(check::compared::requests_agree(&obs, &cx, sc, &d, first));
    }
    if (opts.time_scale - 1.0).abs() < f64::EPSILON && opts.rate.is_none() && sc.expect.is_some() {
        // Counts over the whole run: no answer to single out, so never excused.
        let unmet = report::check_expectations(sc, &summary);
        verdicts.push(check::Verdict::new(
            "EXPECT",
            unmet.is_empty(),
            if unmet.is_empty() {
                "the scenario's [expect] holds".into()
            } else {
                unmet.join("; ")
            },
        ));
    }
    if !breaker_visible {
        verdicts.push(check::Verdict::skipped(
            "BREAKER_VISIBLE",
            "the edge exposed no breaker mode (no X-Breaker-Mode header, no admin status): recorded as UNKNOWN",
        ));
    }
    let figures = check::figures(&obs);
    let tiers: Vec<String> = policy
        .cascade
        .tiers
        .iter()
        .map(|t| t.name.clone())
        .collect();
    let svg = plot::render(&plot::Picture {
        title: format!(
            "{} — {} requests, {:.0} req/s, time scale {}",
            sc.name,
            sc.requests,
            1e6 / sc.interval_us as f64,
            opts.time_scale
        ),
        obs: &obs,
        tiers,
        faults: script::origin_script(sc)
            .rules
            .iter()
            .filter_map(|r| r.seconds)
            .map(|t| (t.from * 1000.0, t.to.unwrap_or(t.from) * 1000.0))
            .collect(),
        transitions: &transitions,
        initial_mode: if breaker_visible { initial_mode } else { None },
        budget_ms: policy.budget.total_ms as f64,
        stalls: stalls.list(),
        blamed: verdicts
            .iter()
            .flat_map(|v| v.blamed.iter().filter_map(|o| o.index))
            .collect(),
    })
    .map_err(|e| anyhow::anyhow!("cannot draw the timeline: {e}"))
    .ok();

    let requests: Vec<Value> = obs
        .iter()
        .map(|o| {
            json!([
                o.index,
                round1(o.scheduled_ms),
                round1(o.sent_ms),
                round1(o.latency_ms),
                o.status,
                o.headers
                    .tier
                    .as_deref()
                    .unwrap_or(if o.is_live() { "origin" } else { "" }),
                o.headers.reason,
                o.headers.breaker_mode
            ])
        })
        .collect();
    let json = json!({
        "scenario": sc.name,
        "policy": policy.service.name,
        "release": prep.release_id,
        "time_scale": opts.time_scale,
        "rate_rps": 1e6 / sc.interval_us as f64,
        "concurrency": opts.concurrency,
        "started_at_ms": start_epoch,
        "limits": limits,
        "fault_window_ms": fault,
        "calibration": { "requests": calibration.len(), "latency": calib, "slack_ms": slack_ms, "margin_ms": SLACK_MARGIN_MS },
        "summary": summary,
        "figures": figures,
        "recovery": rec,
        "isolates": isolates,
        "alerts": rec.alerts,
        "breaker": { "visible": breaker_visible, "from_status_endpoint": status_visible, "initial_mode": initial_mode, "transitions": transitions },
        "model_calls": model_calls,
        "origin": { "requests": origin_stats.requests, "completed": origin_stats.completed, "disconnected": origin_stats.disconnected, "by_fault": origin_stats.by_fault },
        "user_probes": user_probes,
        "verdicts": verdicts,
        "witness": witness.report(),
        "injected_stalls": injected,
        "simulate_disagreements": disagreements,
        "request_columns": ["index", "scheduled_ms", "sent_ms", "latency_ms", "status", "answered_by", "reason", "breaker_mode"],
        "requests": requests,
    });
    Outcome {
        table,
        verdicts,
        alerts: rec.alerts.clone(),
        json,
        svg,
        disagreements,
    }
}

/// `--isolates K`: each isolate's recovery from its own transitions and requests, and the
/// fleet's as the checks judge it — the slowest isolate to degrade and to recover (an
/// isolate that never did makes the fleet's `None`). Adds a line per isolate to the table.
fn fleet_recovery(
    obs: &[observe::Observed],
    cx: &Context<'_>,
    per_isolate: &[observe::IsolateSeen],
    table: &mut String,
) -> (check::Recovery, Value) {
    let overall = check::recovery(obs, cx);
    let mut rows = Vec::new();
    let mut recs = Vec::new();
    let by_index: std::collections::HashMap<u64, &observe::Observed> =
        obs.iter().map(|o| (o.index, o)).collect();
    table.push_str(&format!("\n{} isolates:\n", per_isolate.len()));
    for (i, iso) in per_isolate.iter().enumerate() {
        let mine: Vec<observe::Observed> = iso
            .requests
            .iter()
            .filter_map(|r| by_index.get(r).map(|o| (*o).clone()))
            .collect();
        let cxi = Context {
            transitions: &iso.transitions,
            ..*cx
        };
        let r = check::recovery(&mine, &cxi);
        let show = |v: Option<f64>| v.map_or("never".to_string(), |ms| format!("{ms:.0} ms"));
        table.push_str(&format!(
            "  isolate {i}: {} requests, degraded {} after the onset, healthy again {} after the fault's end\n",
            mine.len(),
            show(r.degraded_after_ms),
            show(r.recovered_after_ms)
        ));
        rows.push(json!({
            "isolate": i,
            "requests": mine.len(),
            "transitions": iso.transitions,
            "degraded_after_ms": r.degraded_after_ms,
            "recovered_after_ms": r.recovered_after_ms,
        }));
        recs.push(r);
    }
    let worst = |f: fn(&check::Recovery) -> Option<f64>| -> Option<f64> {
        recs.iter()
            .map(f)
            .try_fold(0.0f64, |acc, v| v.map(|v| acc.max(v)))
    };
    let mut alerts = overall.alerts.clone();
    for r in &recs {
        for a in &r.alerts {
            if !alerts.contains(a) {
                alerts.push(a.clone());
            }
        }
    }
    let rec = check::Recovery {
        degraded_after_ms: worst(|r| r.degraded_after_ms),
        breaker_healthy_after_ms: worst(|r| r.breaker_healthy_after_ms),
        normalized_after_ms: overall.normalized_after_ms,
        recovered_after_ms: worst(|r| r.recovered_after_ms)
            .zip(overall.normalized_after_ms)
            .map(|(a, b)| a.max(b)),
        observed_after_end_ms: overall.observed_after_end_ms,
        alerts,
    };
    (rec, Value::Array(rows))
}

/// `--isolates K --compare-simulate`: each isolate's breaker against `simulate --isolates K`
/// (the verdict, and the lines of the isolates that differ). Adds a line per isolate.
fn compare_fleet(
    prep: &Prepared,
    regions: usize,
    start_epoch: u64,
    obs: &[observe::Observed],
    cx: &Context<'_>,
    table: &mut String,
) -> (check::Verdict, Vec<String>) {
    let edge: Vec<&[observe::SeenTransition]> = cx
        .isolates
        .iter()
        .map(|i| i.transitions.as_slice())
        .collect();
    let tol = compare_fleet::tolerance_ms(&prep.policy, &prep.sc, edge.len());
    let catalog = prep.loaded.catalog.as_ref();
    let compared = compare_fleet::compare(
        &prep.policy,
        catalog,
        &prep.sc,
        (start_epoch, regions),
        &edge,
    );
    let rows = match compared {
        Ok(rows) => rows,
        Err(e) => {
            let detail = format!("simulate --isolates {} could not run: {e}", edge.len());
            return (
                check::Verdict::new("SIMULATE_AGREES", false, detail),
                Vec::new(),
            );
        }
    };
    let lines = compare_fleet::describe(&rows, tol);
    table.push_str(&format!(
        "\nsimulate --isolates {} (each moment within {tol:.0} ms):\n",
        rows.len()
    ));
    for l in &lines {
        table.push_str(&format!("  {l}\n"));
    }
    let differ: Vec<String> = rows
        .iter()
        .zip(&lines)
        .filter(|(r, _)| !r.agrees(tol))
        .map(|(_, l)| l.clone())
        .take(10)
        .collect();
    let worst = rows
        .iter()
        .filter_map(|r| r.worst_ms)
        .fold(0.0f64, f64::max);
    let detail = if differ.is_empty() {
        format!(
            "all {} isolates: the same breaker episodes as in simulate, each moment within {tol:.0} ms (worst {worst:.0} ms)",
            rows.len()
        )
    } else {
        format!(
            "{} of {} isolates differ from simulate (tolerance {tol:.0} ms); first: {}",
            differ.len(),
            rows.len(),
            differ[0]
        )
    };
    (
        check::compared::isolates_agree(obs, cx, &rows, tol, detail),
        differ,
    )
}
