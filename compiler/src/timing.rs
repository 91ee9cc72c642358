//! `UNDERSTUDY_TIMINGS=1`: each phase of a bake prints its wall time and the process's
//! peak memory so far to stderr (what scripts/bench-bake.sh shows, and how a slow bake is
//! taken apart). Off, it costs one relaxed load per phase.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

static ON: OnceLock<bool> = OnceLock::new();
static LAST: Mutex<Option<Instant>> = Mutex::new(None);
static PRINTED: AtomicBool = AtomicBool::new(false);

fn on() -> bool {
    *ON.get_or_init(|| std::env::var("UNDERSTUDY_TIMINGS").is_ok_and(|v| v == "1"))
}

/// The process's peak resident memory so far, in KiB (Linux; 0 elsewhere).
pub fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// Ends the phase called `what` (started at the previous mark, or at the first call).
pub fn mark(what: &str) {
    if !on() {
        return;
    }
    let now = Instant::now();
    let mut last = LAST.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(t) = *last {
        eprintln!(
            "timing: {what:<28} {:>8.1} ms  (peak {} MiB)",
            now.duration_since(t).as_secs_f64() * 1e3,
            peak_rss_kib() / 1024
        );
    } else if !PRINTED.swap(true, Ordering::Relaxed) {
        eprintln!("timing: start");
    }
    *last = Some(Instant::now());
}
