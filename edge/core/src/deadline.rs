//! [P-BUDGET] The request's time budget: how much is left, how long the origin may race, and
//! whether a step still fits. Every answer must leave inside `total_ms`, so every step asks
//! here first.
//!
//! A step "fits" when its whole timeout fits in what is left: a step that might run past the
//! budget is skipped rather than cut short, because a KV read cut short is only a slower miss.

use crate::policy::Budget;
use crate::time::Millis;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadline {
    start: Millis,
    total_ms: u64,
    origin_ms: u64,
}

impl Deadline {
    /// The budget starts when the request arrived.
    pub fn new(start: Millis, budget: Budget) -> Deadline {
        Deadline {
            start,
            total_ms: budget.total_ms,
            origin_ms: budget.deadline_ms.min(budget.total_ms),
        }
    }

    pub fn start(&self) -> Millis {
        self.start
    }

    pub fn elapsed(&self, now: Millis) -> u64 {
        now.since(self.start)
    }

    /// Time left in the whole budget.
    pub fn remaining(&self, now: Millis) -> u64 {
        self.total_ms.saturating_sub(self.elapsed(now))
    }

    /// Time left before the origin race deadline.
    pub fn origin_remaining(&self, now: Millis) -> u64 {
        self.origin_ms.saturating_sub(self.elapsed(now))
    }

    /// The timeout an origin attempt gets: its own timeout clipped to the race deadline
    /// (an attempt *is* cut short: the race deadline is the point of the race).
    /// `None` when the race deadline has passed.
    pub fn origin_timeout(&self, now: Millis, attempt_timeout_ms: u64) -> Option<u64> {
        match self.origin_remaining(now) {
            0 => None,
            left => Some(left.min(attempt_timeout_ms)),
        }
    }

    /// The timeout a fallback step gets: `Some(timeout_ms)` when it fits whole in the
    /// remaining budget, `None` when it must be skipped.
    pub fn step_timeout(&self, now: Millis, timeout_ms: u64) -> Option<u64> {
        (timeout_ms <= self.remaining(now)).then_some(timeout_ms)
    }

    /// The instant the origin race ends.
    pub fn origin_end(&self) -> Millis {
        self.start.plus(self.origin_ms)
    }

    /// The whole budget is spent.
    pub fn expired(&self, now: Millis) -> bool {
        self.remaining(now) == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: Millis = Millis(1_000_000);

    fn seed() -> Deadline {
        Deadline::new(
            T0,
            Budget {
                total_ms: 60,
                deadline_ms: 45,
            },
        )
    }

    #[test]
    fn seed_000_arithmetic_all_tiers_fit_after_the_race() {
        let d = seed();
        assert_eq!(d.origin_timeout(T0, 45), Some(45));
        // The race lost at its deadline: 15 ms left for the user tier (8) and the
        // category tier (5), read one after the other, worst case 58 ms.
        let at = T0.plus(45);
        assert_eq!(d.remaining(at), 15);
        assert_eq!(d.step_timeout(at, 8), Some(8));
        let after_user_miss = at.plus(8);
        assert_eq!(d.step_timeout(after_user_miss, 5), Some(5));
        assert_eq!(d.remaining(after_user_miss.plus(5)), 2);
    }

    #[test]
    fn seed_000_arithmetic_with_50_ms_spent() {
        let d = seed();
        let at = T0.plus(50);
        assert_eq!(d.remaining(at), 10);
        assert_eq!(d.origin_timeout(at, 45), None);
        // 10 ms left: the user tier (8) still fits on its own, but the category tier (5)
        // cannot follow a user-tier miss (2 ms left); the embedded tier (0) always fits.
        assert_eq!(d.step_timeout(at, 8), Some(8));
        assert_eq!(d.step_timeout(at.plus(8), 5), None);
        assert_eq!(d.step_timeout(at.plus(8), 0), Some(0));
        // From 56 ms on neither KV tier fits (4 ms left): only the embedded tier does.
        assert_eq!(d.step_timeout(T0.plus(55), 5), Some(5));
        let late = T0.plus(56);
        assert_eq!(d.step_timeout(late, 8), None);
        assert_eq!(d.step_timeout(late, 5), None);
        assert_eq!(d.step_timeout(late, 0), Some(0));
    }

    #[test]
    fn origin_attempts_are_clipped_to_the_race_deadline() {
        let d = seed();
        assert_eq!(d.origin_timeout(T0.plus(30), 45), Some(15));
        assert_eq!(d.origin_timeout(T0.plus(30), 10), Some(10));
        assert_eq!(d.origin_timeout(T0.plus(45), 45), None);
    }

    #[test]
    fn a_deadline_longer_than_the_budget_is_clipped() {
        let d = Deadline::new(
            T0,
            Budget {
                total_ms: 30,
                deadline_ms: 45,
            },
        );
        assert_eq!(d.origin_timeout(T0, 100), Some(30));
    }

    #[test]
    fn time_running_backwards_counts_as_no_time_spent() {
        let d = seed();
        assert_eq!(d.remaining(Millis(T0.0 - 5)), 60);
        assert!(d.expired(T0.plus(60)));
        assert!(!d.expired(T0.plus(59)));
    }
}
