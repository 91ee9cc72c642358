//! [T-WITNESS] A witness of the host, run beside every drill and the bench.
//!
//! Why a witness? The drills judge latencies of tens of milliseconds in real time, on a
//! machine whose two cores the edge (workerd), the simulated model, the load driver and
//! everything else running there share. When an answer comes late, the edge may have broken
//! its promise — or the host may not have run it. Without a record of what the host did, a
//! red run cannot say which; with one, a check can blame the answers the host does not
//! explain and excuse the ones it does ([`crate::drill::check`]).
//!
//! What it records, each instant on the drill's clock (ms after the first arrival):
//! - **late wakes**: a thread of this process sleeps [`TICK`] in a loop; every wake later
//!   than [`LATE_MS`] past its due time is the host's own scheduling delay, as any task
//!   that waits for a timer meets it;
//! - **the watched processes' run-queue wait** (workerd's main thread, where its isolates
//!   run): how long each was ready to run and not run, from `/proc/PID/schedstat`, per
//!   [`SAMPLE_EVERY`] ticks — the delay the edge itself met, not a proxy's;
//! - **stopped processes**: a watched process seen in state `T` (stopped: `SIGSTOP`, a
//!   freezer), for as long as it stays so;
//! - **saturation**: how much of each sample a watched process's main thread ran and waited
//!   (a thread never idle that waited a good part of the time had a queue the host made);
//! - **CPU steal**: the hypervisor's time taken from this machine's CPUs, from `/proc/stat`.
//!
//! [`Trace::stalls`] merges them into the stretches of time in which the host held the run
//! back ([`stalls`]). Where there is no `/proc` (not Linux) only the late wakes are
//! recorded, and the trace says so.

mod sample;
pub mod stalls;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::Serialize;

pub use stalls::{Stall, Stalls};

/// How long the witness sleeps between wakes.
pub const TICK: Duration = Duration::from_millis(1);
/// A wake this much later than due is recorded (a timer's usual slack is well under 1 ms).
pub const LATE_MS: f64 = 2.0;
/// Run-queue waits and process states are read every this many ticks.
pub const SAMPLE_EVERY: u32 = 4;
/// A run-queue wait of at least this much in one sample is recorded.
pub const WAIT_MS: f64 = 2.0;
/// CPU steal is read every this many ticks (`/proc/stat` counts in 10 ms steps).
pub const STEAL_EVERY: u32 = 100;

/// A process to watch: its run-queue wait and whether it is stopped.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Watched {
    /// What it is in the run ("workerd").
    pub label: String,
    pub pid: i32,
}

/// A running witness; [`Witness::stop`] ends it and returns its trace.
pub struct Witness {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<sample::Raw>>,
    watched: Vec<Watched>,
}

impl Witness {
    /// Starts the witness thread, watching `watched` besides the host.
    pub fn start(watched: Vec<Watched>) -> Witness {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let pids: Vec<i32> = watched.iter().map(|w| w.pid).collect();
        let thread = std::thread::Builder::new()
            .name("witness".into())
            .spawn(move || sample::run(&flag, &pids))
            .ok();
        Witness {
            stop,
            thread,
            watched,
        }
    }

    /// Stops the witness; its trace with every instant in ms after `origin` (the drill's
    /// first arrival: earlier instants are negative).
    pub fn stop(mut self, origin: Instant) -> Trace {
        self.stop.store(true, Ordering::Relaxed);
        let raw = self
            .thread
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default();
        raw.on_clock(origin, std::mem::take(&mut self.watched))
    }
}

impl Drop for Witness {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// ms from `origin` to `t` (negative before it).
pub(crate) fn ms_since(origin: Instant, t: Instant) -> f64 {
    match t.checked_duration_since(origin) {
        Some(d) => d.as_secs_f64() * 1000.0,
        None => -(origin.duration_since(t).as_secs_f64() * 1000.0),
    }
}

/// A watched thread's wait for a CPU that ended in one sample (the `span_ms` before
/// `at_ms`): `wait_ms` it was ready to run and did not — longer than the sample when the
/// wait began before it (the kernel counts a wait when it ends).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Wait {
    pub label: String,
    pub at_ms: f64,
    pub span_ms: f64,
    pub wait_ms: f64,
}

/// Every sample of a watched process's main thread, `[at_ms, span_ms, ran_ms, waited_ms]`:
/// how much of the span before `at_ms` it ran and waited for a CPU. Never idle (ran and
/// waited the whole span) while it waited a good part of it: the host set its pace.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Busy {
    pub label: String,
    pub samples: Vec<[f64; 4]>,
}

/// A watched process stopped from `from_ms` to `to_ms` (to the sampling's resolution).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Stopped {
    pub label: String,
    pub from_ms: f64,
    pub to_ms: f64,
}

/// CPU steal over the `span_ms` before `at_ms`: `steal_ms` per CPU on average.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Steal {
    pub at_ms: f64,
    pub span_ms: f64,
    pub steal_ms: f64,
}

/// What the witness saw, on the drill's clock; `drill.json`'s `witness`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Trace {
    /// From the witness's start to its stop (ms on the drill's clock).
    pub from_ms: f64,
    pub to_ms: f64,
    pub tick_ms: f64,
    pub late_threshold_ms: f64,
    pub wakes: u64,
    /// Every wake later than the threshold: `[at_ms, late_ms]`.
    pub late_wakes: Vec<[f64; 2]>,
    pub watched: Vec<Watched>,
    pub waits: Vec<Wait>,
    pub stopped: Vec<Stopped>,
    pub steal: Vec<Steal>,
    /// Each watched process's main thread, sample by sample.
    pub busy: Vec<Busy>,
    /// Total steal per CPU over the trace (ms); `None`: not readable here.
    pub steal_total_ms: Option<f64>,
    /// What could not be read (no `/proc`, a watched process gone).
    pub notes: Vec<String>,
}

impl Trace {
    /// The stretches in which the host held the run back, merged from every source.
    pub fn stalls(&self) -> Stalls {
        Stalls::of(self)
    }

    /// The worst late wake (ms; 0 when none).
    pub fn worst_late_ms(&self) -> f64 {
        self.late_wakes.iter().map(|w| w[1]).fold(0.0, f64::max)
    }

    /// The trace as a report holds it (`drill.json`'s and `bench.json`'s `witness`): a
    /// summary, the merged stalls, and every source.
    pub fn report(&self) -> serde_json::Value {
        let stalls = self.stalls();
        let r1 = |x: f64| (x * 10.0).round() / 10.0;
        serde_json::json!({
            "summary": {
                "wakes": self.wakes,
                "late_wakes": self.late_wakes.len(),
                "worst_late_ms": r1(self.worst_late_ms()),
                "stalls": stalls.list().len(),
                "stalled_ms": r1(stalls.total_ms()),
                "longest_stall_ms": r1(stalls.longest_ms()),
                "steal_ms": self.steal_total_ms.map(r1),
            },
            "stalls": stalls.list(),
            "trace": self,
        })
    }
}
