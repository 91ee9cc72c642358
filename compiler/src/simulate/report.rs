//! The simulation's figures: availability with and without the shell, answers per tier,
//! the breaker's transitions, latency. One struct feeds both the human table and JSON, so
//! the two can never disagree (and `drill` prints the same table from the real edge).

use std::collections::BTreeMap;

use serde::Serialize;
use understudy_core::policy::Policy;

use super::scenario::Scenario;
use super::{tier_counts, Run, Source};

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Summary {
    pub scenario: String,
    pub requests: u64,
    pub without_shell: u64,
    pub with_shell: u64,
    /// Answers per source: `origin`, each tier, and `error 504` / `error 503`.
    pub tiers: BTreeMap<String, u64>,
    pub degraded: u64,
    pub errors: u64,
    /// Origin 4xx about the caller's request, passed through (neither live nor degraded).
    pub rejected: u64,
    pub model_calls: u64,
    /// Request indices at which the breaker opened, and at which it closed again.
    pub breaker_opened_at: Vec<u64>,
    pub breaker_closed_at: Vec<u64>,
    pub breaker_transitions: Vec<Transition>,
    pub latency_p50_ms: u64,
    pub latency_p95_ms: u64,
    pub latency_max_ms: u64,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Transition {
    pub request: u64,
    pub at_ms: u64,
    pub from: String,
    pub to: String,
}

fn pct(sorted: &[u64], q: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

pub fn summarize(policy: &Policy, sc: &Scenario, run: &Run) -> Summary {
    let tiers = tier_counts(policy, run);
    let errors = run
        .results
        .iter()
        .filter(|r| matches!(r.source, Source::Error(_)))
        .count() as u64;
    let degraded = run
        .results
        .iter()
        .filter(|r| matches!(r.source, Source::Tier(_)))
        .count() as u64;
    let rejected = run
        .results
        .iter()
        .filter(|r| matches!(r.source, Source::Rejected(_)))
        .count() as u64;
    let mut lat: Vec<u64> = run.results.iter().map(|r| r.latency_ms).collect();
    lat.sort_unstable();
    let opened = |to: &str| {
        run.breaker
            .iter()
            .filter(|e| e.to == to)
            .map(|e| e.request)
            .collect::<Vec<_>>()
    };
    Summary {
        scenario: sc.name.clone(),
        requests: sc.requests,
        without_shell: run.results.iter().filter(|r| r.model_alone_ok).count() as u64,
        with_shell: run.results.len() as u64 - errors - rejected,
        tiers,
        degraded,
        errors,
        rejected,
        model_calls: run.model_calls,
        breaker_opened_at: [opened("OPEN"), opened("DEGRADED_FALLBACK")].concat(),
        breaker_closed_at: [opened("CLOSED"), opened("PRIMARY_HEALTHY")].concat(),
        breaker_transitions: run
            .breaker
            .iter()
            .map(|e| Transition {
                request: e.request,
                at_ms: e.at_ms,
                from: e.from.into(),
                to: e.to.into(),
            })
            .collect(),
        latency_p50_ms: pct(&lat, 0.50),
        latency_p95_ms: pct(&lat, 0.95),
        latency_max_ms: lat.last().copied().unwrap_or(0),
    }
}

fn share(n: u64, of: u64) -> String {
    if of == 0 {
        "0.0%".into()
    } else {
        format!("{:.1}%", n as f64 * 100.0 / of as f64)
    }
}

/// The table `simulate` and `drill` print.
pub fn human(policy: &Policy, s: &Summary) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "Scenario {}: {} requests against `{}`\n\n",
        s.scenario, s.requests, policy.service.name
    ));
    out.push_str("Availability:\n");
    out.push_str(&format!(
        "  WITHOUT the shell (model only) : {}/{} = {}\n",
        s.without_shell,
        s.requests,
        share(s.without_shell, s.requests)
    ));
    out.push_str(&format!(
        "  WITH the shell                 : {}/{} = {}\n\n",
        s.with_shell,
        s.requests,
        share(s.with_shell, s.requests)
    ));
    out.push_str("Answers WITH the shell:\n");
    out.push_str(&format!(
        "  {:<22} {:>8} {:>8}\n",
        "source", "answers", "share"
    ));
    let mut order: Vec<String> = vec!["origin".into()];
    order.extend(policy.cascade.tiers.iter().map(|t| t.name.clone()));
    order.extend(
        s.tiers
            .keys()
            .filter(|k| k.starts_with("rejected") || k.starts_with("error"))
            .cloned(),
    );
    for name in order {
        let n = s.tiers.get(&name).copied().unwrap_or(0);
        let label = if name == "origin" {
            "origin (live)".to_string()
        } else if name.starts_with("error") {
            name.clone()
        } else if let Some(code) = name.strip_prefix("rejected ") {
            format!("origin {code} (passed)")
        } else {
            format!("{name} (degraded)")
        };
        out.push_str(&format!(
            "  {:<22} {:>8} {:>8}\n",
            label,
            n,
            share(n, s.requests)
        ));
    }
    out.push_str(&format!(
        "  {:<22} {:>8} {:>8}\n\n",
        "total degraded",
        s.degraded,
        share(s.degraded, s.requests)
    ));
    out.push_str(&format!(
        "Model calls: {} ({} requests kept from the model)\n",
        s.model_calls,
        s.requests.saturating_sub(s.model_calls)
    ));
    if s.breaker_transitions.is_empty() {
        out.push_str("Breaker: no transition\n");
    } else {
        out.push_str("Breaker:\n");
        for t in &s.breaker_transitions {
            out.push_str(&format!(
                "  request {:>6} (t={:>9.3}s): {} → {}\n",
                t.request,
                t.at_ms as f64 / 1000.0,
                t.from,
                t.to
            ));
        }
        if let Some(first) = s.breaker_opened_at.iter().min() {
            out.push_str(&format!(
                "  the breaker opened at request {first} and stopped hitting the failing model\n"
            ));
        }
    }
    out.push_str(&format!(
        "Latency: p50 {} ms, p95 {} ms, max {} ms\n",
        s.latency_p50_ms, s.latency_p95_ms, s.latency_max_ms
    ));
    out
}

/// Compares the summary with the scenario's `[expect]`; returns what differs.
pub fn check_expectations(sc: &Scenario, s: &Summary) -> Vec<String> {
    let Some(e) = &sc.expect else {
        return Vec::new();
    };
    let mut bad = Vec::new();
    if let Some(n) = e.without_shell {
        if n != s.without_shell {
            bad.push(format!(
                "expected {n} answered without the shell, got {}",
                s.without_shell
            ));
        }
    }
    if let Some(n) = e.with_shell {
        if n != s.with_shell {
            bad.push(format!(
                "expected {n} answered with the shell, got {}",
                s.with_shell
            ));
        }
    }
    if let Some(tiers) = &e.tiers {
        for (t, n) in tiers {
            let got = s.tiers.get(t).copied().unwrap_or(0);
            if got != *n {
                bad.push(format!("expected {n} answers from `{t}`, got {got}"));
            }
        }
    }
    if let Some(r) = e.breaker_opened_at {
        if s.breaker_opened_at.iter().min() != Some(&r) {
            bad.push(format!(
                "expected the breaker to open at request {r}, got {:?}",
                s.breaker_opened_at.iter().min()
            ));
        }
    }
    bad
}
