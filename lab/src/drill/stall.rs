//! `drill --inject-stall AT+FOR`: the edge's runtime (workerd) stopped with `SIGSTOP` at a
//! chosen moment of the run and continued with `SIGCONT` FOR later — a stall of the host made
//! on purpose, at the moment a proof needs it (the trip, the last probing, the settling),
//! to show that the witness sees it and the verdicts tell it apart from the edge's own
//! faults (docs/scenarios.md). What was injected is in `drill.json`, beside the witness's
//! trace, which must see it on its own.

use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use serde::Serialize;

/// Longest stall a drill may inject (a stop longer than this would only test the client's
/// timeout).
pub const MAX_STALL: Duration = Duration::from_secs(2);

/// One stall to inject: at `at` after the first arrival, for `length`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Planned {
    pub at: Duration,
    pub length: Duration,
}

impl Planned {
    /// `AT+FOR` in the policy's duration grammar, e.g. `4200ms+150ms`.
    pub fn parse(text: &str) -> Result<Planned> {
        let Some((at, length)) = text.split_once('+') else {
            bail!("--inject-stall {text}: write AT+FOR, e.g. 4200ms+150ms (stop the edge's runtime 4.2 s after the first arrival for 150 ms)");
        };
        let ms = |s: &str, what: &str| {
            understudy_compiler::parse::duration::parse(s.trim())
                .map_err(|e| anyhow::anyhow!("--inject-stall {text}: {what}: {e}"))
        };
        let p = Planned {
            at: Duration::from_millis(ms(at, "AT")?),
            length: Duration::from_millis(ms(length, "FOR")?),
        };
        if p.length.is_zero() || p.length > MAX_STALL {
            bail!(
                "--inject-stall {text}: FOR must be from 1ms to {} ms",
                MAX_STALL.as_millis()
            );
        }
        Ok(p)
    }
}

/// A stall as injected: the process stopped from `from_ms` to `to_ms` (the drill's clock,
/// as the injecting thread saw it).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Injected {
    pub pid: i32,
    pub from_ms: f64,
    pub to_ms: f64,
}

/// Injects `plan` into the processes `pids`, counted from `start`, on a thread of its own;
/// joined, it returns what it did. Every stop is followed by its continue, whatever happens
/// to the rest of the drill.
pub fn inject(
    pids: Vec<i32>,
    mut plan: Vec<Planned>,
    start: Instant,
) -> std::thread::JoinHandle<Result<Vec<Injected>>> {
    plan.sort_by_key(|p| p.at);
    std::thread::spawn(move || {
        let mut done = Vec::new();
        for p in plan {
            let due = start + p.at;
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
            for &pid in &pids {
                let from = Instant::now();
                signal::stop(pid)?;
                std::thread::sleep(p.length);
                let to = Instant::now();
                signal::resume(pid)?;
                done.push(Injected {
                    pid,
                    from_ms: crate::witness::ms_since(start, from),
                    to_ms: crate::witness::ms_since(start, to),
                });
            }
        }
        Ok(done)
    })
}

#[cfg(target_os = "linux")]
mod signal {
    use anyhow::{Context as _, Result};
    use rustix::process::{kill_process, Pid, Signal};

    fn send(pid: i32, sig: Signal) -> Result<()> {
        let p = Pid::from_raw(pid).context("no such process id")?;
        kill_process(p, sig).with_context(|| format!("cannot signal process {pid}"))
    }

    pub fn stop(pid: i32) -> Result<()> {
        send(pid, Signal::STOP)
    }

    pub fn resume(pid: i32) -> Result<()> {
        send(pid, Signal::CONT)
    }
}

#[cfg(not(target_os = "linux"))]
mod signal {
    use anyhow::{bail, Result};

    pub fn stop(_pid: i32) -> Result<()> {
        bail!("--inject-stall stops the runtime with SIGSTOP: Linux only")
    }

    pub fn resume(_pid: i32) -> Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stalls_are_written_at_plus_for() {
        let p = Planned::parse("4200ms+150ms").expect("parses");
        assert_eq!(
            (p.at, p.length),
            (Duration::from_millis(4200), Duration::from_millis(150))
        );
        for bad in ["4200ms", "4s+0ms", "1s+3s", "x+1ms", "1s+1.5s"] {
            assert!(Planned::parse(bad).is_err(), "{bad}");
        }
    }
}
