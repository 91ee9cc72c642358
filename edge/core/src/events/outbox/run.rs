//! [V-DELIVER] One alarm run of a shard's delivery, as its time goes: it delivers while
//! events are due and hands over to the next run once it has delivered for
//! [`RUN_BUDGET_MS`] (the alarm set at once), and a run that failed is tried again
//! [`AFTER_FAILURE_MS`] later rather than never. Sans-IO: the Durable Object's alarm
//! (`edge/worker/src/outbox/alarm.rs`) reads its clock, asks, and performs.

use super::Plan;
use crate::time::Millis;

/// One alarm run delivers for at most this long before handing over to the next run.
pub const RUN_BUDGET_MS: u64 = 5_000;
/// A run that failed (storage, configuration) sets the alarm this much later.
pub const AFTER_FAILURE_MS: u64 = 5_000;

/// A run, from the instant it started.
#[derive(Debug, Clone, Copy)]
pub struct Run {
    started: Millis,
}

/// What the run does with a plan (`select`'s) at an instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Lease and deliver the plan's events.
    Deliver,
    /// End the run, the alarm set at `wake_at` (`None`: nothing is pending, no alarm).
    End { wake_at: Option<Millis> },
}

impl Run {
    pub fn start(now: Millis) -> Run {
        Run { started: now }
    }

    pub fn next(&self, now: Millis, plan: &Plan) -> Next {
        if plan.deliver.is_empty() {
            Next::End {
                wake_at: plan.wake_at,
            }
        } else if now.since(self.started) > RUN_BUDGET_MS {
            // Events are still due: the next run starts at once.
            Next::End { wake_at: Some(now) }
        } else {
            Next::Deliver
        }
    }

    /// When to run again after a run failed at `now`.
    pub fn after_failure(now: Millis) -> Millis {
        now.plus(AFTER_FAILURE_MS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(deliver: usize, wake_at: Option<Millis>) -> Plan {
        Plan {
            deliver: (0..deliver).map(|i| format!("e-{i}")).collect(),
            wake_at,
            ..Plan::default()
        }
    }

    #[test]
    fn a_run_delivers_while_events_are_due_and_its_budget_lasts() {
        let t0 = Millis(1_000_000);
        let run = Run::start(t0);
        assert_eq!(run.next(t0, &plan(3, Some(t0))), Next::Deliver);
        assert_eq!(
            run.next(t0.plus(RUN_BUDGET_MS), &plan(1, Some(t0))),
            Next::Deliver
        );
        // Past its budget with events still due: the next run starts at once.
        let late = t0.plus(RUN_BUDGET_MS + 1);
        assert_eq!(
            run.next(late, &plan(1, Some(t0))),
            Next::End {
                wake_at: Some(late)
            }
        );
    }

    #[test]
    fn a_run_with_nothing_due_stops_with_the_plans_wake_up() {
        let t0 = Millis(1_000_000);
        let run = Run::start(t0);
        let later = Some(t0.plus(30_000));
        assert_eq!(run.next(t0, &plan(0, later)), Next::End { wake_at: later });
        assert_eq!(run.next(t0, &plan(0, None)), Next::End { wake_at: None });
        // Even past its budget, a run with nothing due keeps the plan's wake-up.
        assert_eq!(
            run.next(t0.plus(60_000), &plan(0, later)),
            Next::End { wake_at: later }
        );
    }

    #[test]
    fn a_failed_run_is_tried_again_later() {
        assert_eq!(Run::after_failure(Millis(7)), Millis(7 + AFTER_FAILURE_MS));
    }
}
