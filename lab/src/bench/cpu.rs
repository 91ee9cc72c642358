//! CPU time of the workerd processes, read from Linux's scheduler statistics: the sum over a
//! process's threads of `/proc/PID/task/TID/schedstat`'s first field (nanoseconds on a CPU).
//! Sampled before and after a measurement slice that sends requests to one Worker only, the
//! difference divided by the answers is that Worker's CPU per request — the whole runtime's
//! cost of it (Wasm, JS glue, the runtime's own I/O), not only our code's.

use std::path::Path;

/// Nanoseconds the processes `pids` have spent on a CPU so far; `None` where the counters
/// cannot be read (not Linux, or a process gone).
pub fn cpu_ns(pids: &[u32]) -> Option<u64> {
    if pids.is_empty() {
        return None;
    }
    let mut total = 0u64;
    for pid in pids {
        total += process_ns(&Path::new("/proc").join(pid.to_string()))?;
    }
    Some(total)
}

fn process_ns(proc_dir: &Path) -> Option<u64> {
    let mut total = 0u64;
    for task in std::fs::read_dir(proc_dir.join("task")).ok()? {
        // A thread may exit between the listing and the read: it is simply not counted.
        let Ok(text) = std::fs::read_to_string(task.ok()?.path().join("schedstat")) else {
            continue;
        };
        total += parse_schedstat(&text)?;
    }
    Some(total)
}

/// The first field of a `schedstat` line: time on a CPU in nanoseconds.
pub fn parse_schedstat(text: &str) -> Option<u64> {
    text.split_whitespace().next()?.parse().ok()
}

/// Microseconds of CPU per answer over a slice, from two samples; `None` without samples
/// or answers.
pub fn us_per_answer(before: Option<u64>, after: Option<u64>, answers: u64) -> Option<f64> {
    let (b, a) = (before?, after?);
    (answers > 0).then(|| a.saturating_sub(b) as f64 / 1000.0 / answers as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedstat_first_field_is_nanoseconds_on_cpu() {
        assert_eq!(parse_schedstat("123456789 42 7\n"), Some(123_456_789));
        assert_eq!(parse_schedstat(""), None);
        assert_eq!(
            us_per_answer(Some(1_000_000), Some(3_000_000), 1000),
            Some(2.0)
        );
        assert_eq!(us_per_answer(None, Some(3), 10), None);
        assert_eq!(us_per_answer(Some(1), Some(3), 0), None);
    }

    #[test]
    fn this_process_has_cpu_time() {
        // On Linux this very test has spent some CPU.
        if Path::new("/proc/self/task").is_dir() {
            assert!(cpu_ns(&[std::process::id()]).is_some_and(|n| n > 0));
        }
    }
}
