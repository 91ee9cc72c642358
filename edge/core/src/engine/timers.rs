//! A request's named timers (quinn-proto's `TimerTable`): each thing the request waits for
//! with a limit arms its own [`Timer`]; the driver's one timer is the earliest of them
//! ([`Timers::earliest`], [`super::Output::wake_at`]); when it fires, the table says which
//! named timers expired ([`Timers::expire`], then [`Timers::next_fired`]) and each is
//! handled by its name — no handler works out what fired by comparing the time with a
//! deadline of its own (docs/adr/010-the-engine-owns-time.md, "The timer table").

use crate::time::Millis;

/// What a request's timer is for. The order is the order timers that expire together are
/// handled in: an attempt's timeout before its hedge (the attempt is cut, the hedge never
/// goes out), a last look for a joined read before the tier's timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Timer {
    /// The storm limiter's verdict is awaited until the race deadline (`start`; `Step::report`).
    Limiter,
    /// The origin attempt's timeout (`Step::attempt`; `Step::race_timer`, `race.rs`).
    Attempt,
    /// The attempt's hedge goes out (`Step::attempt`; `Step::race_timer`).
    Hedge,
    /// A retry's wait ends (`Step::attempt_ended`; `Step::race_timer`).
    Backoff,
    /// Look again for the result of a KV read another request started (`walk.rs`;
    /// `Step::tier_timer`).
    TierPoll,
    /// The tier read's timeout (`walk.rs`; `Step::tier_timer`).
    TierEnd,
    /// An event request's shard calls' timeout (`events.rs`).
    Shards,
}

impl Timer {
    const COUNT: usize = 7;
    const VALUES: [Timer; Timer::COUNT] = [
        Timer::Limiter,
        Timer::Attempt,
        Timer::Hedge,
        Timer::Backoff,
        Timer::TierPoll,
        Timer::TierEnd,
        Timer::Shards,
    ];

    fn bit(self) -> u8 {
        1 << self as u8
    }
}

/// When each named timer is due (`None`: not armed), and those the last
/// [`Timers::expire`] fired that have not been handed out yet.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(super) struct Timers {
    at: [Option<Millis>; Timer::COUNT],
    fired: u8,
}

impl Timers {
    /// Arms `timer` for `at`, replacing its instant (and a firing not yet handled).
    pub fn set(&mut self, timer: Timer, at: Millis) {
        self.at[timer as usize] = Some(at);
        self.fired &= !timer.bit();
    }

    /// Disarms `timer` (and forgets a firing of it not yet handled).
    pub fn stop(&mut self, timer: Timer) {
        self.at[timer as usize] = None;
        self.fired &= !timer.bit();
    }

    /// When `timer` is due, while it is armed.
    pub fn get(&self, timer: Timer) -> Option<Millis> {
        self.at[timer as usize]
    }

    /// Disarms every timer (the request is answered).
    pub fn clear(&mut self) {
        *self = Timers::default();
    }

    /// The earliest armed instant: when the request next wants to be woken.
    pub fn earliest(&self) -> Option<Millis> {
        self.at.iter().flatten().min().copied()
    }

    /// The driver's timer fired at `now`: every timer due by then fires — disarmed, and
    /// handed out by [`Timers::next_fired`]. A timer armed afterwards for `now` or earlier
    /// waits for the next firing, as it did when it had the driver's timer to itself.
    pub fn expire(&mut self, now: Millis) {
        self.fired = 0;
        for timer in Timer::VALUES {
            if self.at[timer as usize].is_some_and(|at| at <= now) {
                self.at[timer as usize] = None;
                self.fired |= timer.bit();
            }
        }
    }

    /// Whether `timer` fired at the last [`Timers::expire`] and is not handled yet.
    pub fn fired(&self, timer: Timer) -> bool {
        self.fired & timer.bit() != 0
    }

    /// The next timer that fired, in [`Timer`]'s order; it is handled by the caller.
    pub fn next_fired(&mut self) -> Option<Timer> {
        let timer = Timer::VALUES.into_iter().find(|t| self.fired(*t))?;
        self.fired &= !timer.bit();
        Some(timer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fired(t: &mut Timers) -> Vec<Timer> {
        std::iter::from_fn(|| t.next_fired()).collect()
    }

    #[test]
    fn the_earliest_armed_timer_is_the_wake() {
        let mut t = Timers::default();
        assert_eq!(t.earliest(), None);
        t.set(Timer::Attempt, Millis(45));
        t.set(Timer::Hedge, Millis(20));
        assert_eq!(t.earliest(), Some(Millis(20)));
        t.stop(Timer::Hedge);
        assert_eq!(t.earliest(), Some(Millis(45)));
        assert_eq!(t.get(Timer::Attempt), Some(Millis(45)));
        assert_eq!(t.get(Timer::Hedge), None);
    }

    #[test]
    fn expiry_yields_the_named_timers_due_in_a_stable_order() {
        let mut t = Timers::default();
        t.set(Timer::TierEnd, Millis(10));
        t.set(Timer::TierPoll, Millis(10));
        t.set(Timer::Attempt, Millis(9));
        t.set(Timer::Hedge, Millis(11));
        t.expire(Millis(8));
        assert_eq!(fired(&mut t), vec![], "none due yet");
        t.expire(Millis(10));
        assert!(t.fired(Timer::Attempt) && !t.fired(Timer::Hedge));
        assert_eq!(
            fired(&mut t),
            vec![Timer::Attempt, Timer::TierPoll, Timer::TierEnd],
            "in the enum's order, whatever their instants"
        );
        assert_eq!(
            t.earliest(),
            Some(Millis(11)),
            "the fired ones are disarmed"
        );
        assert_eq!(fired(&mut t), vec![], "each handed out once");
    }

    #[test]
    fn rearming_replaces_the_instant_and_a_pending_firing() {
        let mut t = Timers::default();
        t.set(Timer::Backoff, Millis(30));
        t.set(Timer::Backoff, Millis(50));
        assert_eq!(t.earliest(), Some(Millis(50)));
        t.set(Timer::TierPoll, Millis(5));
        t.set(Timer::TierEnd, Millis(5));
        t.expire(Millis(5));
        // Handling the poll re-arms it for the same instant: it waits for the next firing.
        assert_eq!(t.next_fired(), Some(Timer::TierPoll));
        t.set(Timer::TierPoll, Millis(5));
        t.set(Timer::TierEnd, Millis(9));
        assert_eq!(
            t.next_fired(),
            None,
            "the re-armed timeout no longer fires now"
        );
        assert_eq!(t.earliest(), Some(Millis(5)));
    }

    #[test]
    fn stopping_and_clearing_disarm() {
        let mut t = Timers::default();
        t.set(Timer::Attempt, Millis(45));
        t.set(Timer::Hedge, Millis(20));
        t.expire(Millis(50));
        t.stop(Timer::Hedge);
        assert_eq!(
            fired(&mut t),
            vec![Timer::Attempt],
            "a stopped timer is not handled"
        );
        t.set(Timer::Limiter, Millis(100));
        t.set(Timer::Shards, Millis(200));
        t.expire(Millis(150));
        t.clear();
        assert_eq!((t.earliest(), t.next_fired()), (None, None));
        // A later expiry forgets what the last one fired.
        t.set(Timer::Shards, Millis(1));
        t.expire(Millis(1));
        t.expire(Millis(2));
        assert_eq!(t.next_fired(), None);
    }
}
