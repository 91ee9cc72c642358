//! The requests the Worker's driver keeps between two steps (`edge/worker/src/serve.rs`):
//! how many may wait, and which are dropped when too many do. A request the runtime
//! cancelled never reports again, so its flight would wait forever: one whose wake-up is
//! [`OVERDUE_MS`] overdue (a live request's timer fires; a cancelled one's never does) goes
//! first, then the oldest. Decided here, on the driver's clock; the driver drops them.

use crate::time::Millis;

/// Most requests waiting for their next report.
pub const MAX_WAITING: usize = 4096;
/// A waiting request whose wake-up is this far overdue was cancelled by the runtime.
pub const OVERDUE_MS: u64 = 10_000;

/// The requests to drop before one more waits, from those waiting (`(id, wake_at)`, oldest
/// first): none while fewer than `max` wait; else every overdue one (or one that asked for
/// no wake-up), then the oldest until fewer than `max` are left.
pub fn evict(now: Millis, waiting: &[(u32, Option<Millis>)], max: usize) -> Vec<u32> {
    if waiting.len() < max {
        return Vec::new();
    }
    let overdue = |w: &Option<Millis>| w.is_none_or(|t| now.since(t) > OVERDUE_MS);
    let mut out: Vec<u32> = waiting
        .iter()
        .filter(|(_, w)| overdue(w))
        .map(|(id, _)| *id)
        .collect();
    let mut left = waiting.len() - out.len();
    for (id, w) in waiting {
        if left < max {
            break;
        }
        if !overdue(w) {
            out.push(*id);
            left -= 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_is_dropped_while_fewer_than_the_most_wait() {
        let now = Millis(100_000);
        let waiting: Vec<_> = (1..4).map(|i| (i, None)).collect();
        assert!(evict(now, &waiting, 4).is_empty());
    }

    #[test]
    fn the_overdue_go_first_then_the_oldest() {
        let now = Millis(100_000);
        let due = |ms_ago: u64| Some(Millis(now.0 - ms_ago));
        // Four waiting of at most four: 2 is overdue (its timer never fired: cancelled),
        // 3 asked for no wake-up; dropping them leaves room.
        let waiting = vec![
            (1, due(5)),
            (2, due(OVERDUE_MS + 1)),
            (3, None),
            (4, due(0)),
        ];
        assert_eq!(evict(now, &waiting, 4), vec![2, 3]);
        // Exactly OVERDUE_MS late is not yet overdue: the oldest goes.
        let waiting = vec![(1, due(OVERDUE_MS)), (2, due(1)), (3, due(0))];
        assert_eq!(evict(now, &waiting, 3), vec![1]);
        // None overdue and far over the most: the oldest, until fewer than the most wait.
        let waiting: Vec<_> = (1..=6).map(|i| (i, due(0))).collect();
        assert_eq!(evict(now, &waiting, 4), vec![1, 2, 3]);
    }
}
