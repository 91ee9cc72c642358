//! [V-PROOF] The events drill: thousands of events over many aggregates against the real
//! edge in workerd and the simulated consumer, under mixed faults, with the runtime killed
//! (SIGKILL to node and workerd) mid-run and restarted on the same storage — then a
//! Jepsen-style check of what the producers were told against what the consumer's ledger
//! committed and what the edge's outbox holds.
//!
//! Phases: healthy (the delivery-latency figure, NFR-RES-003) → faulty (the scenario's
//! consumer faults, out-of-order and duplicate sends, the kill) → quiescence (every
//! acknowledged event delivered, dead-lettered, or held behind a dead letter) → replay of the
//! dead letters (same `eventId`) → quiescence → the check. The retry schedule's clock is
//! scaled (`--time-scale`, printed); the consumer's `Retry-After` seconds are not.
//!
//! One concept a file: `prepare` (scenario, policy, bake, launch), `outbox` (the drill's
//! window on the edge: listings, status, quiescence), `exercise` and `faulty` (the phases,
//! with the kill), `judge` (from what was seen to the verdicts and the report).

mod exercise;
mod faulty;
mod judge;
mod outbox;
mod prepare;

use std::path::PathBuf;

use anyhow::{Context as _, Result};
use serde_json::Value;

use crate::drill::check::Verdict;

pub use prepare::scale_events;

/// NFR-RES-003: p95 from commit to acknowledgement with a healthy consumer.
pub const P95_LIMIT_MS: f64 = 30_000.0;
/// NFR-RES-004: duplicate side effects are counted over at least this many replayed
/// deliveries in the full run.
pub const FULL_REPLAYED_DELIVERIES: u64 = 10_000;

pub struct Options {
    pub policy: PathBuf,
    pub scenario: PathBuf,
    pub report: Option<PathBuf>,
    /// Overrides the scenario's time scale.
    pub time_scale: Option<f64>,
    /// The full run: `full_count` events and the scenario's `full_faults`.
    pub full: bool,
    /// Overrides the number of events of the faulty phase.
    pub events: Option<u64>,
    pub edge: Option<PathBuf>,
}

pub struct Outcome {
    pub json: Value,
    pub lines: Vec<String>,
    pub verdicts: Vec<Verdict>,
}

impl Outcome {
    pub fn broken(&self) -> Vec<&Verdict> {
        self.verdicts.iter().filter(|v| v.broken()).collect()
    }
}

pub fn run(opts: &Options) -> Result<Outcome> {
    let prepared = prepare::prepare(opts)?;
    // [T-WITNESS] The host beside the run; no process is watched, for the edge is killed
    // and started again half-way.
    let witness = crate::witness::Witness::start(Vec::new());
    let started = std::time::Instant::now();
    let observed = exercise::exercise(opts, &prepared.setup, &prepared.stack)?;
    let ledger = prepared.stack.stop();
    let mut outcome = judge::judge(opts, &prepared.setup, &observed, &ledger);
    outcome.json["witness"] = witness.stop(started).report();
    if let Some(dir) = &opts.report {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        std::fs::write(
            dir.join("events-drill.json"),
            serde_json::to_vec_pretty(&outcome.json)?,
        )?;
    }
    drop(prepared.scratch);
    Ok(outcome)
}

/// An event's state in an outbox listing (`""` when it has none).
fn state(v: &Value) -> &str {
    v["state"].as_str().unwrap_or("")
}
