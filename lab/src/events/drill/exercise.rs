//! The run itself, on a tokio runtime: the healthy phase (the latency figure), the faulty
//! phase with the kill (`faulty`), quiescence, then the dead letters replayed round by round
//! until none is left.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use serde_json::Value;

use super::faulty::{self, Faulty};
use super::outbox::Outbox;
use super::prepare::{Setup, Stack};
use super::{state, Options};
use crate::events::produce::{self, Produced};
use crate::origin::ConsumerConfig;

/// What the run saw, phase by phase.
pub(super) struct Observed {
    pub healthy: Healthy,
    pub faulty: Faulty,
    /// Every event acknowledged to the producers, healthy and faulty.
    pub acked: BTreeSet<String>,
    /// The edge's listing at the first quiescence, before replay.
    pub before_replay: BTreeMap<String, Value>,
    pub status_before: Option<Value>,
    pub replay: Replay,
    pub status_after: Option<Value>,
    /// Seconds from the healthy phase to the end of the replay.
    pub elapsed_s: f64,
}

/// The healthy phase: a healthy consumer, no faults.
pub(super) struct Healthy {
    pub produced: Produced,
    /// Quiescence was reached within the limit.
    pub settled: bool,
    /// From commit to acknowledgement, in ms.
    pub p50: Option<f64>,
    pub p95: Option<f64>,
}

/// The replay of the dead letters, and the quiescence after it.
pub(super) struct Replay {
    /// Every event seen dead-lettered, with its last error.
    pub dead_ever: BTreeMap<String, String>,
    /// Replays the edge accepted (202).
    pub replayed: u64,
    /// The first replays it refused, described.
    pub refused: Vec<String>,
    /// The final listing.
    pub listing: BTreeMap<String, Value>,
    /// The final quiescence was reached within the limit.
    pub settled: bool,
}

pub(super) fn exercise(opts: &Options, setup: &Setup, stack: &Stack) -> Result<Observed> {
    let outbox = Outbox {
        admin: &stack.admin,
        addr: Arc::clone(&stack.addr),
        policy: &setup.policy,
        events: &setup.events,
    };
    let started = Instant::now();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        // 1. Healthy phase: the latency figure.
        let healthy = healthy(setup, stack, &outbox).await?;

        // 2. Faulty phase, with the kill.
        // The full run's rules come first: every first delivery commits and resets, so every
        // event is delivered again (NFR-RES-004's replayed deliveries).
        let full_rules = if opts.full {
            setup.sc.full_faults.clone()
        } else {
            Vec::new()
        };
        let mut rules = full_rules.clone();
        rules.extend(setup.sc.faults.clone());
        let faulty = faulty::faulty(setup, stack, rules).await?;

        // 3. Quiescence.
        let mut acked: BTreeSet<String> = healthy.produced.acked.keys().cloned().collect();
        acked.extend(faulty.produced.acked.keys().cloned());
        let (before_replay, settled) = outbox.quiesce(&acked, setup.settle_limit).await?;
        let status_before = outbox.status().await;

        // 4. Replay. The operator fixes what dead-lettered the events (the scenario's faults
        // stop; the full run's transient resets go on), then replays them.
        stack.origin.set_consumer(ConsumerConfig {
            rules: full_rules,
            seed: 17,
        })?;
        let replay = replay(setup, &outbox, &acked, before_replay.clone(), settled).await?;
        let status_after = outbox.status().await;
        Ok(Observed {
            healthy,
            faulty,
            acked,
            before_replay,
            status_before,
            replay,
            status_after,
            elapsed_s: started.elapsed().as_secs_f64(),
        })
    })
}

/// Healthy events produced, waited for, and their delivery latencies.
async fn healthy(setup: &Setup, stack: &Stack, outbox: &Outbox<'_>) -> Result<Healthy> {
    let shape = &setup.sc.events;
    let (healthy, _, _) = produce::plan("healthy", &setup.run_id, shape.healthy, shape, 7);
    let healthy_ids: BTreeSet<String> = healthy.iter().map(|e| e.event_id.clone()).collect();
    let h = produce::produce(
        healthy,
        Arc::clone(&stack.addr),
        setup.tokens.clone(),
        shape.producers,
        setup.events.route.clone(),
        Duration::from_secs(120),
        Arc::new(|_| {}),
    )
    .await;
    let h_acked: BTreeSet<String> = h.acked.keys().cloned().collect();
    let (_, settled) = outbox.quiesce(&h_acked, setup.settle_limit).await?;
    let ledger = stack.origin.ledger();
    let mut lat = Vec::new();
    for c in &ledger.commits {
        if let Some(ack) = h
            .acked
            .get(&c.event_id)
            .filter(|_| healthy_ids.contains(&c.event_id))
        {
            lat.push(c.committed_at_ms.saturating_sub(*ack) as f64);
        }
    }
    let p95 = percentile(lat.clone(), 0.95);
    let p50 = percentile(lat, 0.5);
    Ok(Healthy {
        produced: h,
        settled,
        p50,
        p95,
    })
}

/// Up to the scenario's `replay_rounds`: every dead letter in the listing replayed with its
/// event ID, then quiescence again.
async fn replay(
    setup: &Setup,
    outbox: &Outbox<'_>,
    acked: &BTreeSet<String>,
    mut listing: BTreeMap<String, Value>,
    mut settled: bool,
) -> Result<Replay> {
    let mut dead_ever: BTreeMap<String, String> = BTreeMap::new();
    let mut replayed = 0u64;
    let mut refused = Vec::new();
    for _ in 0..setup.sc.events.replay_rounds {
        let dead: Vec<(String, String)> = listing
            .iter()
            .filter(|(_, v)| state(v) == "DEAD_LETTER" && v["skipped"] != Value::Bool(true))
            .map(|(id, v)| {
                (
                    id.clone(),
                    v["last_error"].as_str().unwrap_or("").to_string(),
                )
            })
            .collect();
        if dead.is_empty() {
            break;
        }
        for (id, why) in &dead {
            dead_ever.entry(id.clone()).or_insert_with(|| why.clone());
            let a = outbox.client().replay(id, Duration::from_secs(30)).await?;
            if a.status == 202 {
                replayed += 1;
            } else if refused.len() < 10 {
                refused.push(format!("{id}: {} {}", a.status, a.text));
            }
        }
        let (l, s) = outbox.quiesce(acked, setup.settle_limit).await?;
        listing = l;
        settled = s;
    }
    Ok(Replay {
        dead_ever,
        replayed,
        refused,
        listing,
        settled,
    })
}

/// The nearest-rank percentile `q` of `v`.
fn percentile(mut v: Vec<f64>, q: f64) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    Some(v[rank - 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_use_the_nearest_rank() {
        assert_eq!(percentile(vec![], 0.95), None);
        assert_eq!(
            percentile((1..=100).map(f64::from).collect(), 0.95),
            Some(95.0)
        );
        assert_eq!(percentile(vec![3.0], 0.5), Some(3.0));
    }
}
