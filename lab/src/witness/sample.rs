//! The witness's thread: a 1 ms sleep in a loop, the watched processes read every few
//! wakes, `/proc/stat` every hundred. Instants are kept raw and put on the drill's clock at
//! the end ([`Raw::on_clock`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use super::{
    ms_since, Busy, Steal, Stopped, Trace, Wait, Watched, LATE_MS, SAMPLE_EVERY, STEAL_EVERY, TICK,
    WAIT_MS,
};

/// What the thread gathered, on its own instants.
#[derive(Default)]
pub struct Raw {
    start: Option<Instant>,
    end: Option<Instant>,
    wakes: u64,
    late: Vec<(Instant, f64)>,
    /// (watched index, at, span ms, wait ms)
    waits: Vec<(usize, Instant, f64, f64)>,
    /// (watched index, from, to)
    stopped: Vec<(usize, Instant, Instant)>,
    /// (at, span ms, steal ms per CPU)
    steal: Vec<(Instant, f64, f64)>,
    /// Every sample of each watched process's main thread: (watched index, at, span ms,
    /// ran ms, waited ms).
    busy: Vec<(usize, Instant, f64, f64, f64)>,
    steal_total_ms: Option<f64>,
    notes: Vec<String>,
    /// This process's own threads, watched after the processes asked for.
    threads: Vec<Watched>,
}

impl Raw {
    pub fn on_clock(self, origin: Instant, mut watched: Vec<Watched>) -> Trace {
        watched.extend(self.threads.iter().cloned());
        let at = |t: Instant| ms_since(origin, t);
        let label = |i: usize| watched.get(i).map(|w| w.label.clone()).unwrap_or_default();
        Trace {
            from_ms: self.start.map_or(0.0, at),
            to_ms: self.end.map_or(0.0, at),
            tick_ms: TICK.as_secs_f64() * 1000.0,
            late_threshold_ms: LATE_MS,
            wakes: self.wakes,
            late_wakes: self.late.iter().map(|(t, l)| [at(*t), *l]).collect(),
            waits: self
                .waits
                .iter()
                .map(|(i, t, span, wait)| Wait {
                    label: label(*i),
                    at_ms: at(*t),
                    span_ms: *span,
                    wait_ms: *wait,
                })
                .collect(),
            stopped: self
                .stopped
                .iter()
                .map(|(i, a, b)| Stopped {
                    label: label(*i),
                    from_ms: at(*a),
                    to_ms: at(*b),
                })
                .collect(),
            steal: self
                .steal
                .iter()
                .map(|(t, span, s)| Steal {
                    at_ms: at(*t),
                    span_ms: *span,
                    steal_ms: *s,
                })
                .collect(),
            steal_total_ms: self.steal_total_ms,
            busy: {
                let mut out: Vec<Busy> = Vec::new();
                for (i, t, span, ran, waited) in &self.busy {
                    let l = label(*i);
                    if out.last().is_none_or(|b| b.label != l) {
                        out.push(Busy {
                            label: l.clone(),
                            samples: Vec::new(),
                        });
                    }
                    if let Some(b) = out.iter_mut().find(|b| b.label == l) {
                        let r = |x: f64| (x * 100.0).round() / 100.0;
                        b.samples.push([r(at(*t)), r(*span), r(*ran), r(*waited)]);
                    }
                }
                out
            },
            notes: self.notes,
            watched,
        }
    }
}

/// One watched process (or thread of this one) as the witness follows it.
struct Follow {
    proc: Option<host::Process>,
    /// Its last run-queue wait and time on a CPU (ns), and when they were read.
    last_wait: Option<(u64, u64, Instant)>,
    /// A process (its main thread's every sample is kept), not a thread of this one.
    whole: bool,
    /// When it was last seen running (not stopped).
    seen_running: Instant,
    stopped_since: Option<Instant>,
}

pub fn run(stop: &AtomicBool, pids: &[i32]) -> Raw {
    let mut raw = Raw::default();
    let start = Instant::now();
    raw.start = Some(start);
    let mut follow: Vec<Follow> = pids
        .iter()
        .map(|&pid| {
            let proc = host::Process::open(pid);
            if proc.is_none() {
                raw.notes.push(format!(
                    "process {pid}: not readable (no /proc here, or it is gone)"
                ));
            }
            Follow {
                proc,
                last_wait: None,
                whole: true,
                seen_running: start,
                stopped_since: None,
            }
        })
        .collect();
    // This process's threads (the load driver's, the origin's: on an answer's path too),
    // all but the witness itself.
    for (tid, name, proc) in host::Process::own_threads() {
        raw.threads.push(Watched {
            label: format!("{name} ({tid})"),
            pid: tid,
        });
        follow.push(Follow {
            proc: Some(proc),
            last_wait: None,
            whole: false,
            seen_running: start,
            stopped_since: None,
        });
    }
    let cpus = host::Steal::open();
    if cpus.is_none() {
        raw.notes
            .push("CPU steal: /proc/stat not readable here".to_string());
    }
    let mut steal_last = cpus.as_ref().and_then(|c| c.read()).map(|s| (s, start));
    let first_steal = steal_last.map(|(s, _)| s);
    let mut n: u32 = 0;
    while !stop.load(Ordering::Relaxed) {
        let before = Instant::now();
        std::thread::sleep(TICK);
        let now = Instant::now();
        raw.wakes += 1;
        let late = (now - before).as_secs_f64() * 1000.0 - TICK.as_secs_f64() * 1000.0;
        if late >= LATE_MS {
            raw.late.push((now, late));
        }
        n = n.wrapping_add(1);
        if n.is_multiple_of(SAMPLE_EVERY) {
            for (i, f) in follow.iter_mut().enumerate() {
                sample_process(&mut raw, i, f, now);
            }
        }
        if n.is_multiple_of(STEAL_EVERY) {
            if let (Some(c), Some((last, at))) = (cpus.as_ref(), steal_last) {
                if let Some(s) = c.read() {
                    let d = (s - last).max(0.0);
                    if d > 0.0 {
                        raw.steal.push((now, (now - at).as_secs_f64() * 1000.0, d));
                    }
                    steal_last = Some((s, now));
                }
            }
        }
    }
    let end = Instant::now();
    for (i, f) in follow.iter_mut().enumerate() {
        if let Some(since) = f.stopped_since.take() {
            raw.stopped.push((i, since, end));
        }
    }
    if let (Some(c), Some(first)) = (cpus.as_ref(), first_steal) {
        raw.steal_total_ms = c.read().map(|s| (s - first).max(0.0));
    }
    raw.end = Some(end);
    raw
}

fn sample_process(raw: &mut Raw, i: usize, f: &mut Follow, now: Instant) {
    let Some(p) = f.proc.as_ref() else { return };
    let Some(s) = p.read() else {
        raw.notes.push(format!(
            "process {}: gone before the witness stopped",
            p.pid()
        ));
        f.proc = None;
        return;
    };
    if s.stopped {
        if f.stopped_since.is_none() {
            // It ran at the last sample; it stopped somewhere since.
            f.stopped_since = Some(f.seen_running);
        }
    } else {
        if let Some(since) = f.stopped_since.take() {
            raw.stopped.push((i, since, now));
        }
        f.seen_running = now;
    }
    if let Some((last, ran, at)) = f.last_wait {
        let wait = s.run_delay_ns.saturating_sub(last) as f64 / 1e6;
        let span = (now - at).as_secs_f64() * 1000.0;
        if wait >= WAIT_MS {
            raw.waits.push((i, now, span, wait));
        }
        if f.whole {
            let ran = s.run_ns.saturating_sub(ran) as f64 / 1e6;
            raw.busy.push((i, now, span, ran, wait));
        }
    }
    f.last_wait = Some((s.run_delay_ns, s.run_ns, now));
}

/// The host's side: `/proc` on Linux, nothing elsewhere.
#[cfg(target_os = "linux")]
mod host {
    use procfs::CurrentSI;

    /// A watched process, opened once (its `/proc/PID` directory), or a thread of this
    /// process (its run-queue wait only: a thread of ours is never stopped alone).
    pub enum Process {
        Whole(procfs::process::Process),
        Thread(procfs::process::Task),
    }

    pub struct State {
        pub stopped: bool,
        /// Its main thread's time ready to run and not running, since it started.
        pub run_delay_ns: u64,
        /// Its main thread's time on a CPU, since it started.
        pub run_ns: u64,
    }

    impl Process {
        pub fn open(pid: i32) -> Option<Process> {
            procfs::process::Process::new(pid).ok().map(Process::Whole)
        }

        /// This process's threads but the calling one: (tid, name, handle).
        pub fn own_threads() -> Vec<(i32, String, Process)> {
            let me = rustix::thread::gettid().as_raw_nonzero().get();
            let Ok(tasks) = procfs::process::Process::myself().and_then(|p| p.tasks()) else {
                return Vec::new();
            };
            tasks
                .filter_map(Result::ok)
                .filter(|t| t.tid != me)
                .filter_map(|t| {
                    let name = t.stat().ok()?.comm;
                    Some((t.tid, name, Process::Thread(t)))
                })
                .collect()
        }

        pub fn pid(&self) -> i32 {
            match self {
                Process::Whole(p) => p.pid,
                Process::Thread(t) => t.tid,
            }
        }

        pub fn read(&self) -> Option<State> {
            match self {
                Process::Whole(p) => {
                    let stat = p.stat().ok()?;
                    let sched = p.schedstat().ok();
                    Some(State {
                        stopped: matches!(stat.state, 'T' | 't'),
                        run_delay_ns: sched.as_ref().map_or(0, |s| s.run_delay),
                        run_ns: sched.as_ref().map_or(0, |s| s.sum_exec_runtime),
                    })
                }
                Process::Thread(t) => {
                    let sched = t.schedstat().ok()?;
                    Some(State {
                        stopped: false,
                        run_delay_ns: sched.run_delay,
                        run_ns: sched.sum_exec_runtime,
                    })
                }
            }
        }
    }

    /// `/proc/stat`'s steal, per CPU on average.
    pub struct Steal {
        cpus: f64,
        ticks_per_ms: f64,
    }

    impl Steal {
        pub fn open() -> Option<Steal> {
            let k = procfs::KernelStats::current().ok()?;
            let tps = procfs::ticks_per_second() as f64;
            Some(Steal {
                cpus: k.cpu_time.len().max(1) as f64,
                ticks_per_ms: tps / 1000.0,
            })
        }

        /// Total steal since boot, ms per CPU.
        pub fn read(&self) -> Option<f64> {
            let k = procfs::KernelStats::current().ok()?;
            let ticks = k.total.steal? as f64;
            Some(ticks / self.ticks_per_ms / self.cpus)
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod host {
    pub struct Process(i32);

    pub struct State {
        pub stopped: bool,
        pub run_delay_ns: u64,
        pub run_ns: u64,
    }

    impl Process {
        pub fn open(_pid: i32) -> Option<Process> {
            None
        }

        pub fn own_threads() -> Vec<(i32, String, Process)> {
            Vec::new()
        }

        pub fn pid(&self) -> i32 {
            self.0
        }

        pub fn read(&self) -> Option<State> {
            None
        }
    }

    pub struct Steal;

    impl Steal {
        pub fn open() -> Option<Steal> {
            None
        }

        pub fn read(&self) -> Option<f64> {
            None
        }
    }
}
