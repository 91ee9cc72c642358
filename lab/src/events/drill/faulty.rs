//! The faulty phase: the scenario's consumer faults, out-of-order and duplicate sends, and
//! the kill — SIGKILL to node and workerd once enough events are acknowledged, then the edge
//! started again on the same storage.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Result;

use super::prepare::{Setup, Stack};
use crate::events::edge::{Edge, Launch};
use crate::events::produce::{self, Address, Produced};
use crate::origin::{ConsumerConfig, ConsumerRule};

/// The kill once it has happened: the restart's time in ms and how it ended (`"restarted"`,
/// or why not). Set by the restart thread, which may still be at it when the phase ends, so
/// it is read only after the edge is stopped.
pub(super) type Kill = Arc<Mutex<Option<(u64, String)>>>;

pub(super) struct Faulty {
    pub produced: Produced,
    /// Events sent before their predecessor.
    pub swapped: usize,
    /// Events sent twice.
    pub duplicates: usize,
    pub killed: Kill,
}

/// Produces the faulty phase's events with the consumer following `rules`; kills and
/// restarts the edge after the scenario's share of acknowledgements.
pub(super) async fn faulty(
    setup: &Setup,
    stack: &Stack,
    rules: Vec<ConsumerRule>,
) -> Result<Faulty> {
    let (shape, count) = (&setup.sc.events, setup.count);
    stack
        .origin
        .set_consumer(ConsumerConfig { rules, seed: 11 })?;
    let (faulty, swapped, duplicates) = produce::plan("faulty", &setup.run_id, count, shape, 13);
    let kill_at = if shape.kill_after > 0.0 {
        ((count as f64) * shape.kill_after).ceil() as usize
    } else {
        usize::MAX
    };
    let killed: Kill = Arc::new(Mutex::new(None));
    let on_ack = kill_switch(kill_at, &stack.edge, &stack.addr, &killed, &setup.launch);
    let f = produce::produce(
        faulty,
        Arc::clone(&stack.addr),
        setup.tokens.clone(),
        shape.producers,
        setup.events.route.clone(),
        Duration::from_secs(180),
        on_ack,
    )
    .await;
    // The restart may still be under way.
    for _ in 0..600 {
        if killed.lock().map(|k| k.is_some()).unwrap_or(true)
            || kill_at == usize::MAX
            || f.acked.len() < kill_at
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(Faulty {
        produced: f,
        swapped,
        duplicates,
        killed,
    })
}

/// The producers' `on_ack`: at the `kill_at`-th acknowledgement, a thread kills the edge,
/// starts it again from `launch` (moving `addr`), and records the outcome in `killed`.
fn kill_switch(
    kill_at: usize,
    edge: &Arc<Mutex<Option<Edge>>>,
    addr: &Address,
    killed: &Kill,
    launch: &Launch,
) -> Arc<dyn Fn(usize) + Send + Sync> {
    let (edge, addr, killed, launch_root) = (
        Arc::clone(edge),
        Arc::clone(addr),
        Arc::clone(killed),
        launch.clone(),
    );
    Arc::new(move |n| {
        if n != kill_at {
            return;
        }
        let (edge, addr, killed, launch) = (
            Arc::clone(&edge),
            Arc::clone(&addr),
            Arc::clone(&killed),
            launch_root.clone(),
        );
        std::thread::spawn(move || {
            let t0 = Instant::now();
            if let Ok(mut slot) = edge.lock() {
                if let Some(mut e) = slot.take() {
                    e.kill();
                }
                let note = match Edge::start(&launch) {
                    Ok(e) => {
                        if let Ok(mut a) = addr.lock() {
                            *a = e.addr;
                        }
                        *slot = Some(e);
                        "restarted".to_string()
                    }
                    Err(err) => format!("restart failed: {err}"),
                };
                if let Ok(mut k) = killed.lock() {
                    *k = Some((t0.elapsed().as_millis() as u64, note));
                }
            }
        });
    })
}
