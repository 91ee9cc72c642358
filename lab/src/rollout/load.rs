//! Steady traffic through the rollout's front until the rollout ends: the planned requests
//! on their schedule over at most `concurrency` connections (open loop with a cap, as the
//! drill's driver), stopped by a flag, bounded by the plan's length and a time limit.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::drill::driver::{once, Conn, Planned};
use crate::drill::observe::Observed;

/// What one request saw, and when (ms since the epoch) it was sent.
pub struct Seen {
    pub sent_epoch_ms: u64,
    pub obs: Observed,
}

/// Plays `plan` against `addr` until `stop` is set, the plan ends or `limit` passes.
pub async fn run(
    addr: SocketAddr,
    plan: Vec<Planned>,
    concurrency: usize,
    timeout: Duration,
    limit: Duration,
    stop: Arc<AtomicBool>,
    epoch_at_start: u64,
) -> Vec<Seen> {
    let start = Instant::now();
    let plan = Arc::new(plan);
    let next = Arc::new(AtomicU64::new(0));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for _ in 0..concurrency.clamp(1, crate::drill::driver::MAX_CONCURRENCY) {
        let (plan, next, seen, stop) = (
            Arc::clone(&plan),
            Arc::clone(&next),
            Arc::clone(&seen),
            Arc::clone(&stop),
        );
        tasks.push(tokio::spawn(async move {
            let mut conn: Option<Conn> = None;
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed) as usize;
                let Some(p) = plan.get(i) else { break };
                let due = start + Duration::from_micros(p.due_us);
                if due > start + limit {
                    break;
                }
                tokio::time::sleep_until(due.into()).await;
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let sent = Instant::now();
                let mut obs = once(&mut conn, addr, p, timeout).await;
                obs.scheduled_ms = p.due_us as f64 / 1000.0;
                obs.sent_ms = sent.duration_since(start).as_secs_f64() * 1000.0;
                let sent_epoch_ms = epoch_at_start + sent.duration_since(start).as_millis() as u64;
                if let Ok(mut s) = seen.lock() {
                    s.push(Seen { sent_epoch_ms, obs });
                }
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    let mut out = std::mem::take(&mut *seen.lock().unwrap_or_else(|e| e.into_inner()));
    out.sort_by_key(|s| s.obs.index);
    out
}
