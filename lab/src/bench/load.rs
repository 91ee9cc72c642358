//! The bench's ways of sending load, all bounded in count and time, all on loopback:
//! sequential rounds, a wave of concurrent requests, and a closed loop of `c` connections for
//! a fixed time whose workerd CPU is sampled before and after (see [`super::cpu`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::sync::Mutex;

use super::cpu;
use super::server::{self, Target};
use crate::drill::check::Latency;
use crate::drill::driver::Planned;
use crate::drill::observe::Observed;

/// Most connections a closed loop opens.
pub const MAX_CONNECTIONS: usize = 256;

/// What one closed-loop slice measured.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Slice {
    pub secs: f64,
    /// Answers with status 200.
    pub answers: u64,
    /// Live answers (`X-Result-Source: origin`).
    pub live: u64,
    /// Answers that were no answer at all (timeouts, connection errors, non-200).
    pub failed: u64,
    pub latency: Latency,
    /// Every 200 answer's latency, ms (for merging slices).
    #[serde(skip)]
    pub latencies: Vec<f64>,
    /// workerd CPU per 200 answer, µs (None when the CPU counters cannot be read).
    pub cpu_us_per_request: Option<f64>,
    /// Per answer, the breaker mode the edge reported (`X-Breaker-Mode`), when it did.
    #[serde(skip)]
    pub modes: Vec<String>,
    /// Per 200 answer, what kind of answer it was and when: which answers make a loop's
    /// tail, and whether they cluster at the start of a slice.
    #[serde(skip)]
    pub kinds: Vec<Answer>,
}

/// One 200 answer of a closed loop.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// [`kind`].
    pub kind: String,
    pub latency_ms: f64,
    /// When it was sent, ms after its slice began.
    pub offset_ms: f64,
    /// Which of the side's slices it belongs to (0 = the side's first).
    pub slice: usize,
}

/// What kind of answer `o` is: `live`, or `REASON/TIER` for a disclosed fallback (`-` for a
/// header the answer did not carry), or `other` for a 200 that says neither (the bare and
/// no-op Workers).
pub fn kind(o: &Observed) -> String {
    if o.is_live() {
        return "live".into();
    }
    if o.is_degraded() {
        let h = &o.headers;
        return format!(
            "{}/{}",
            h.reason.as_deref().unwrap_or("-"),
            h.tier.as_deref().unwrap_or("-")
        );
    }
    "other".into()
}

impl Slice {
    pub fn rps(&self) -> f64 {
        self.answers as f64 / self.secs.max(1e-9)
    }

    pub fn live_rps(&self) -> f64 {
        self.live as f64 / self.secs.max(1e-9)
    }

    /// Several slices of the same side as one.
    pub fn merge(slices: &[Slice]) -> Slice {
        let secs: f64 = slices.iter().map(|s| s.secs).sum();
        let answers: u64 = slices.iter().map(|s| s.answers).sum();
        let cpu: Vec<(f64, u64)> = slices
            .iter()
            .filter_map(|s| s.cpu_us_per_request.map(|c| (c, s.answers)))
            .collect();
        let cpu_total: f64 = cpu.iter().map(|(c, n)| c * *n as f64).sum();
        let cpu_answers: u64 = cpu.iter().map(|(_, n)| n).sum();
        Slice {
            secs,
            answers,
            live: slices.iter().map(|s| s.live).sum(),
            failed: slices.iter().map(|s| s.failed).sum(),
            latency: Latency::of(slices.iter().flat_map(|s| s.latencies.iter().copied())),
            latencies: slices.iter().flat_map(|s| s.latencies.clone()).collect(),
            cpu_us_per_request: (cpu_answers > 0).then(|| cpu_total / cpu_answers as f64),
            modes: slices.iter().flat_map(|s| s.modes.clone()).collect(),
            kinds: slices
                .iter()
                .enumerate()
                .flat_map(|(i, s)| {
                    s.kinds.iter().map(move |a| Answer {
                        slice: i,
                        ..a.clone()
                    })
                })
                .collect(),
        }
    }
}

/// `n` requests sent one after another on one connection.
pub async fn sequential(
    addr: server::Addr,
    target: Target,
    plans: &[Planned],
    n: usize,
    timeout: Duration,
) -> Vec<Observed> {
    let mut conn = None;
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let p = &plans[i % plans.len().max(1)];
        out.push(server::once(&mut conn, addr, target, p, timeout).await);
    }
    out
}

/// One request per plan, all at once, each on its own connection.
pub async fn wave(
    addr: server::Addr,
    target: Target,
    plans: &[Planned],
    timeout: Duration,
) -> Vec<Observed> {
    let mut tasks = Vec::new();
    for p in plans {
        let p = p.clone();
        tasks.push(tokio::spawn(async move {
            let mut conn = None;
            server::once(&mut conn, addr, target, &p, timeout).await
        }));
    }
    let mut out = Vec::new();
    for t in tasks {
        if let Ok(o) = t.await {
            out.push(o);
        }
    }
    out
}

/// `c` connections sending `plans` in turn for `dur`: back to back (`rate` None, a closed
/// loop), or paced to `rate` requests a second in all, each connection on its own schedule
/// (an open loop while every answer comes within a connection's interval). A paced request
/// sent late — its connection still waiting for the one before — counts its latency from
/// when it was due, so a slow side is not flattered by sending less (no coordinated
/// omission). The workerd processes `pids` are sampled for CPU before and after.
#[allow(clippy::too_many_arguments)]
pub async fn paced_loop(
    addr: server::Addr,
    target: Target,
    plans: &[Planned],
    c: usize,
    rate: Option<f64>,
    dur: Duration,
    pids: &[u32],
    timeout: Duration,
) -> Slice {
    let seen = Arc::new(Mutex::new(Vec::<(f64, Observed)>::new()));
    let plans = Arc::new(plans.to_vec());
    let cpu_before = cpu::cpu_ns(pids);
    let start = Instant::now();
    let until = start + dur;
    let mut tasks = Vec::new();
    let conns = c.clamp(1, MAX_CONNECTIONS);
    // Each connection's interval, and its first send staggered within it.
    let every = rate
        .filter(|r| r.is_finite() && *r > 0.0)
        .map(|r| Duration::from_secs_f64(conns as f64 / r));
    for k in 0..conns {
        let (seen, plans) = (Arc::clone(&seen), Arc::clone(&plans));
        tasks.push(tokio::spawn(async move {
            let mut conn = None;
            let mut mine = Vec::new();
            let mut i = k;
            let mut due = every.map(|e| start + e.mul_f64(k as f64 / conns as f64));
            while Instant::now() < until {
                let mut late_ms = 0.0;
                if let Some(d) = due {
                    if d >= until {
                        break;
                    }
                    tokio::time::sleep_until(d.into()).await;
                    late_ms = d.elapsed().as_secs_f64() * 1e3;
                }
                let p = &plans[i % plans.len().max(1)];
                let offset_ms = start.elapsed().as_secs_f64() * 1e3 - late_ms;
                let mut o = server::once(&mut conn, addr, target, p, timeout).await;
                o.latency_ms += late_ms;
                mine.push((offset_ms, o));
                i += 1;
                due = due.zip(every).map(|(d, e)| d + e);
            }
            seen.lock().await.extend(mine);
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    let secs = start.elapsed().as_secs_f64();
    let cpu_after = cpu::cpu_ns(pids);
    let sent = seen.lock().await;
    let obs: Vec<&Observed> = sent.iter().map(|(_, o)| o).collect();
    let answers = obs.iter().filter(|o| o.status == 200).count() as u64;
    let latencies: Vec<f64> = obs
        .iter()
        .filter(|o| o.status == 200)
        .map(|o| o.latency_ms)
        .collect();
    Slice {
        secs,
        answers,
        live: obs.iter().filter(|o| o.is_live()).count() as u64,
        failed: obs.iter().filter(|o| o.status != 200).count() as u64,
        latency: Latency::of(latencies.iter().copied()),
        latencies,
        cpu_us_per_request: cpu::us_per_answer(cpu_before, cpu_after, answers),
        modes: obs
            .iter()
            .filter_map(|o| o.headers.breaker_mode.clone())
            .collect(),
        kinds: sent
            .iter()
            .filter(|(_, o)| o.status == 200)
            .map(|(offset_ms, o)| Answer {
                kind: kind(o),
                latency_ms: o.latency_ms,
                offset_ms: *offset_ms,
                slice: 0,
            })
            .collect(),
    }
}
