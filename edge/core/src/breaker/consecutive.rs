//! Seed 002's breaker: open after `failures` consecutive failures, stay open for the
//! cool-down, then let exactly one half-open trial through; its success closes the breaker,
//! its failure re-opens it for another cool-down.
//!
//! A trial whose outcome never comes back (the isolate's request was cancelled) would leave
//! the breaker half-open forever; after another cool-down a new trial is allowed.

use super::{log_transition, Admission, Evidence, Mode, Outcome, Transition};
use crate::time::Millis;

#[derive(Debug, Clone)]
pub struct Consecutive {
    threshold: u32,
    cooldown_ms: u64,
    failures: u32,
    /// Timeouts among the current run of failures.
    timeouts: u32,
    state: State,
    log: Vec<Transition>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Closed,
    Open {
        since: Millis,
    },
    /// One trial at a time; `None` when the last trial ended without a verdict (the origin
    /// refused the caller's request), so the next request is the trial.
    HalfOpen {
        trial_started: Option<Millis>,
    },
}

impl Consecutive {
    pub fn new(threshold: u32, cooldown_ms: u64) -> Consecutive {
        Consecutive {
            threshold: threshold.max(1),
            cooldown_ms,
            failures: 0,
            timeouts: 0,
            state: State::Closed,
            log: Vec::new(),
        }
    }

    fn set(&mut self, now: Millis, state: State, evidence: Option<Evidence>) {
        let from = mode_of(self.state);
        self.state = state;
        log_transition(&mut self.log, now, from, mode_of(state), evidence);
    }

    /// The current run of failures.
    fn run(&self) -> Evidence {
        Evidence {
            calls: self.failures,
            failures: self.failures,
            timeouts: self.timeouts,
            p95_ms: None,
        }
    }

    pub fn admit(&mut self, now: Millis) -> Admission {
        match self.state {
            State::Closed => Admission::Call,
            State::Open { since } if now.since(since) >= self.cooldown_ms => {
                self.set(
                    now,
                    State::HalfOpen {
                        trial_started: Some(now),
                    },
                    None,
                );
                Admission::Probe
            }
            State::Open { .. } => Admission::Reject,
            State::HalfOpen { trial_started } => match trial_started {
                Some(t) if now.since(t) < self.cooldown_ms => Admission::Reject,
                // No trial in flight, or the previous one never reported: allow another.
                _ => {
                    self.state = State::HalfOpen {
                        trial_started: Some(now),
                    };
                    Admission::Probe
                }
            },
        }
    }

    pub fn record(&mut self, now: Millis, admission: Admission, outcome: Outcome) {
        if admission == Admission::Reject {
            return;
        }
        if outcome.ok {
            self.failures = 0;
            self.timeouts = 0;
            if self.state != State::Closed {
                // The trial that succeeded.
                let trial = Evidence {
                    calls: 1,
                    failures: 0,
                    timeouts: 0,
                    p95_ms: None,
                };
                self.set(now, State::Closed, Some(trial));
            }
            return;
        }
        self.failures = self.failures.saturating_add(1);
        if outcome.timed_out {
            self.timeouts = self.timeouts.saturating_add(1);
        }
        let trial_failed = admission == Admission::Probe;
        if trial_failed || (self.state == State::Closed && self.failures >= self.threshold) {
            self.set(now, State::Open { since: now }, Some(self.run()));
        }
    }

    /// A call admitted by [`Self::admit`] ended without news about the origin's health (it
    /// refused the caller's request): a trial slot it held is free again.
    pub fn release(&mut self, admission: Admission) {
        if admission == Admission::Probe {
            if let State::HalfOpen { .. } = self.state {
                self.state = State::HalfOpen {
                    trial_started: None,
                };
            }
        }
    }

    pub fn mode(&mut self, now: Millis) -> Mode {
        match self.state {
            State::Open { since } if now.since(since) >= self.cooldown_ms => Mode::Probing,
            s => mode_of(s),
        }
    }

    pub fn transitions(&self) -> &[Transition] {
        &self.log
    }

    pub fn consecutive_failures(&self) -> u32 {
        self.failures
    }
}

fn mode_of(s: State) -> Mode {
    match s {
        State::Closed => Mode::Healthy,
        State::Open { .. } => Mode::Open,
        State::HalfOpen { .. } => Mode::Probing,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trial_without_a_verdict_frees_the_slot_for_the_next_request() {
        let mut c = Consecutive::new(1, 4_000);
        assert_eq!(c.admit(Millis(0)), Admission::Call);
        c.record(Millis(10), Admission::Call, Outcome::failure(10));
        assert_eq!(c.admit(Millis(5_000)), Admission::Probe);
        assert_eq!(
            c.admit(Millis(5_001)),
            Admission::Reject,
            "one trial at a time"
        );
        c.release(Admission::Probe);
        assert_eq!(c.mode(Millis(5_002)), Mode::Probing);
        assert_eq!(c.admit(Millis(5_002)), Admission::Probe);
        c.record(Millis(5_010), Admission::Probe, Outcome::success(8));
        assert_eq!(c.mode(Millis(5_010)), Mode::Healthy);
    }

    const OK: Outcome = Outcome {
        ok: true,
        latency_ms: 150,
        timed_out: false,
    };
    const FAIL: Outcome = Outcome {
        ok: false,
        latency_ms: 800,
        timed_out: true,
    };

    fn t(s: u64) -> Millis {
        Millis(s * 1000)
    }

    #[test]
    fn opens_exactly_at_the_threshold() {
        let mut b = Consecutive::new(3, 4000);
        for i in 0..2 {
            assert_eq!(b.admit(t(i)), Admission::Call);
            b.record(t(i), Admission::Call, FAIL);
            assert_eq!(
                b.mode(t(i)),
                Mode::Healthy,
                "still closed after {} failures",
                i + 1
            );
        }
        assert_eq!(b.admit(t(2)), Admission::Call);
        b.record(t(2), Admission::Call, FAIL);
        assert_eq!(b.mode(t(2)), Mode::Open);
        assert_eq!(b.admit(t(3)), Admission::Reject);
    }

    #[test]
    fn a_success_resets_the_count() {
        let mut b = Consecutive::new(3, 4000);
        for (i, o) in [FAIL, FAIL, OK, FAIL, FAIL].into_iter().enumerate() {
            let a = b.admit(t(i as u64));
            b.record(t(i as u64), a, o);
        }
        assert_eq!(b.mode(t(5)), Mode::Healthy);
    }

    #[test]
    fn one_trial_after_the_cooldown_and_only_one() {
        let mut b = Consecutive::new(1, 4000);
        b.record(t(0), Admission::Call, FAIL);
        assert_eq!(b.admit(Millis(3999)), Admission::Reject);
        assert_eq!(b.admit(t(4)), Admission::Probe);
        assert_eq!(
            b.admit(Millis(4001)),
            Admission::Reject,
            "a second concurrent trial is refused"
        );
        b.record(Millis(4100), Admission::Probe, OK);
        assert_eq!(b.mode(Millis(4100)), Mode::Healthy);
        assert_eq!(b.admit(Millis(4200)), Admission::Call);
    }

    #[test]
    fn a_failed_trial_reopens_for_a_full_cooldown() {
        let mut b = Consecutive::new(3, 4000);
        for i in 0..3 {
            b.record(t(i), Admission::Call, FAIL);
        }
        assert_eq!(b.admit(t(6)), Admission::Probe);
        b.record(t(6), Admission::Probe, FAIL);
        assert_eq!(b.admit(t(9)), Admission::Reject);
        assert_eq!(b.admit(t(10)), Admission::Probe);
        let modes: Vec<(Mode, Mode)> = b.transitions().iter().map(|t| (t.from, t.to)).collect();
        assert_eq!(
            modes,
            vec![
                (Mode::Healthy, Mode::Open),
                (Mode::Open, Mode::Probing),
                (Mode::Probing, Mode::Open),
                (Mode::Open, Mode::Probing)
            ]
        );
        let evidence: Vec<Option<(u32, u32)>> = b
            .transitions()
            .iter()
            .map(|t| t.evidence.map(|e| (e.calls, e.failures)))
            .collect();
        assert_eq!(
            evidence,
            vec![Some((3, 3)), None, Some((4, 4)), None],
            "the run of failures behind each opening; the cool-down's end has none"
        );
    }

    #[test]
    fn a_lost_trial_does_not_wedge_the_breaker() {
        let mut b = Consecutive::new(1, 1000);
        b.record(t(0), Admission::Call, FAIL);
        assert_eq!(b.admit(t(1)), Admission::Probe);
        // The trial's outcome never arrives.
        assert_eq!(b.admit(Millis(1500)), Admission::Reject);
        assert_eq!(b.admit(t(2)), Admission::Probe);
    }

    /// Seed 002: 30 requests one second apart, the model down for 12–20 and hanging on 5
    /// and 25; threshold 3, cool-down 4. The breaker opens at request 14, trials at 18
    /// (fails) and 22 (succeeds); 18 requests reach a healthy model.
    #[test]
    fn seed_002_incident() {
        let mut b = Consecutive::new(3, 4000);
        let mut served_by_model = 0;
        let mut rejected = Vec::new();
        let mut opened_at = None;
        for i in 0..30u64 {
            let now = t(i);
            let ok = !(12..=20).contains(&i) && i != 5 && i != 25;
            let a = b.admit(now);
            if a == Admission::Reject {
                rejected.push(i);
                continue;
            }
            b.record(
                now,
                a,
                if ok {
                    Outcome::success(150)
                } else {
                    Outcome::timeout(800)
                },
            );
            if ok {
                served_by_model += 1;
            }
            if opened_at.is_none() && b.mode(now) == Mode::Open {
                opened_at = Some(i);
            }
        }
        assert_eq!(opened_at, Some(14));
        assert_eq!(served_by_model, 18);
        assert_eq!(rejected, vec![15, 16, 17, 19, 20, 21]);
    }
}
