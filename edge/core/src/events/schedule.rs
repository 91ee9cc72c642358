//! [V-DELIVER] When the next delivery attempt happens.
//!
//! Why full jitter and a window, not "retry every N seconds"? A consumer that comes back
//! after an outage meets every event retried at once if the waits are equal; full jitter —
//! uniform in `[0, min(max, base × 2^(n−1)))` — spreads them (AWS, "Exponential Backoff
//! and Jitter"). And the seed promises delivery attempts *over about 15 minutes*: the
//! window is a bound the compiler proves the backoff fits ([`RetrySchedule::worst_case`]),
//! and at run time an attempt that would start past the window is not made — the event is
//! dead-lettered as exhausted instead. A consumer's `Retry-After` is honoured (the wait is
//! the longer of the two) and may use up the window sooner.

use crate::policy::events::RetrySchedule;
use crate::time::format_duration as fmt;

/// The next attempt's delay after `attempts_made` attempts, or `None` when none is left.
///
/// `unit` is a uniform draw in `[0, 1)` from the driver's random source; `retry_after_s` is
/// the consumer's `Retry-After`; `since_first_ms` is the time since the first attempt
/// started.
pub fn next_delay(
    s: &RetrySchedule,
    attempts_made: u32,
    retry_after_s: Option<u64>,
    unit: f64,
    since_first_ms: u64,
) -> Option<u64> {
    if attempts_made >= s.attempts {
        return None;
    }
    let ceiling = ceiling_ms(s, attempts_made);
    let jitter = ((unit.clamp(0.0, 1.0) * ceiling as f64) as u64).min(ceiling.saturating_sub(1));
    let wait = match retry_after_s {
        Some(secs) if s.honor_retry_after => secs.saturating_mul(1000).max(jitter),
        _ => jitter,
    };
    (since_first_ms.saturating_add(wait) <= s.window_ms).then_some(wait)
}

/// The full-jitter ceiling of the wait after attempt `attempt` (1-based).
pub fn ceiling_ms(s: &RetrySchedule, attempt: u32) -> u64 {
    let shift = attempt.saturating_sub(1).min(40);
    s.backoff_base_ms
        .saturating_mul(1u64 << shift)
        .min(s.backoff_max_ms)
}

impl RetrySchedule {
    /// The latest the last attempt can end, without `Retry-After`: every wait at its
    /// ceiling and every attempt taking its whole timeout — and the arithmetic, one line per
    /// term, for `check`.
    pub fn worst_case(&self, attempt_timeout_ms: u64) -> (u64, Vec<String>) {
        let mut total = 0u64;
        let mut waits = Vec::new();
        for a in 1..self.attempts {
            let c = ceiling_ms(self, a);
            total = total.saturating_add(c);
            waits.push(fmt(c));
        }
        let attempts_ms = u64::from(self.attempts).saturating_mul(attempt_timeout_ms);
        let notes = vec![
            format!(
                "waits between {} attempts (full-jitter ceilings, base {} doubling to at most {}): {} = {}",
                self.attempts,
                fmt(self.backoff_base_ms),
                fmt(self.backoff_max_ms),
                if waits.is_empty() { "none".to_string() } else { waits.join(" + ") },
                fmt(total)
            ),
            format!(
                "+ {} attempts × the attempt timeout {} = {}",
                self.attempts,
                fmt(attempt_timeout_ms),
                fmt(attempts_ms)
            ),
        ];
        (total.saturating_add(attempts_ms), notes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::testing::events_policy;

    #[test]
    fn the_seed_schedule_fits_fifteen_minutes() {
        let p = events_policy();
        let (worst, notes) = p.retry.worst_case(p.delivery.attempt_timeout_ms);
        // 7 + 14 + 28 + 56 + 112 + 224 + 300 s of waits, 8 × 10 s of attempts.
        assert_eq!(worst, 741_000 + 80_000);
        assert!(worst <= p.retry.window_ms);
        assert!(
            notes[0].contains("7s + 14s + 28s + 56s + 112s + 224s + 5m"),
            "{}",
            notes[0]
        );
    }

    #[test]
    fn waits_are_full_jitter_below_the_doubling_ceiling() {
        let s = events_policy().retry;
        assert_eq!(next_delay(&s, 1, None, 0.0, 0), Some(0));
        assert_eq!(next_delay(&s, 1, None, 0.5, 0), Some(3_500));
        assert_eq!(next_delay(&s, 3, None, 0.5, 0), Some(14_000));
        // The ceiling caps the doubling, and a draw of 1.0 stays below it.
        assert_eq!(next_delay(&s, 7, None, 0.999_999_9, 0), Some(299_999));
    }

    #[test]
    fn the_eighth_attempt_is_the_last() {
        let s = events_policy().retry;
        assert!(next_delay(&s, 7, None, 0.1, 0).is_some());
        assert_eq!(next_delay(&s, 8, None, 0.1, 0), None);
    }

    #[test]
    fn retry_after_is_honoured_and_may_use_up_the_window() {
        let mut s = events_policy().retry;
        assert_eq!(next_delay(&s, 1, Some(30), 0.1, 0), Some(30_000));
        // A Retry-After shorter than the jitter does not shorten the wait.
        assert_eq!(next_delay(&s, 6, Some(1), 0.5, 0), Some(112_000));
        // One that would start the attempt past the window: no attempt.
        assert_eq!(next_delay(&s, 2, Some(600), 0.1, 400_000), None);
        s.honor_retry_after = false;
        assert_eq!(next_delay(&s, 1, Some(30), 0.5, 0), Some(3_500));
    }
}
