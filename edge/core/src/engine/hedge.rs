//! [E-RACE] Hedged requests ("The Tail at Scale"): when an attempt has not answered after
//! the origin's usual time, the same request goes out once more and the first good answer
//! wins.
//!
//! Why a budget and a p95, not "always hedge after N ms"? A hedge doubles the load of every
//! call it is sent for: sent after the p95 of the origin's own recent answers it goes out
//! for about one call in twenty, and a token bucket refilled by `max_share` per call caps it
//! even when the p95 is wrong (an origin that slows down as a whole would otherwise get a
//! hedge for every call, exactly when it can least take them). Only requests that may be
//! repeated are hedged.
//!
//! Two parts: [`Hedger`], the isolate's budget and latency window, decides whether and when
//! an attempt hedges; [`Pair`], one attempt's two requests, decides which answer is the
//! attempt's — the rule both drivers used to implement on their own (docs/adr/010).

use crate::breaker::window::Window;
use crate::io::IoId;
use crate::policy::Hedge;
use crate::time::Millis;

/// The window over which the origin's p95 (the hedge's default delay) is measured.
pub const WINDOW_MS: u64 = 30_000;

/// The isolate's hedging budget and the origin's recent answer times.
#[derive(Debug)]
pub struct Hedger {
    tokens: f64,
    latency: Window,
}

impl Hedger {
    pub fn new(cfg: Option<&Hedge>) -> Hedger {
        Hedger {
            tokens: cfg.map_or(0.0, |h| f64::from(h.burst)),
            latency: Window::new(WINDOW_MS),
        }
    }

    /// When to hedge an attempt starting at `now` with `timeout_ms`, taking a token: `None`
    /// when the policy does not hedge, the request may not be repeated, the origin's p95 is
    /// not known yet or would leave the hedge no time, or the bucket is empty. Every origin
    /// call refills the bucket by `max_share`.
    pub fn plan(
        &mut self,
        cfg: Option<&Hedge>,
        now: Millis,
        timeout_ms: u64,
        repeatable: bool,
    ) -> Option<u64> {
        let h = cfg?;
        self.tokens = (self.tokens + h.max_share).min(f64::from(h.burst));
        if !repeatable {
            return None;
        }
        let after = match h.after_ms {
            Some(ms) => ms,
            None => {
                let s = self.latency.summary(now);
                if s.calls < h.min_calls {
                    return None;
                }
                s.p95_ms.max(1)
            }
        };
        if after >= timeout_ms || self.tokens < 1.0 {
            return None;
        }
        self.tokens -= 1.0;
        Some(after)
    }

    /// A token taken for an attempt that sent no hedge goes back.
    pub fn refund(&mut self, cfg: Option<&Hedge>) {
        if let Some(h) = cfg {
            self.tokens = (self.tokens + 1.0).min(f64::from(h.burst));
        }
    }

    /// A successful origin answer took `latency_ms` from when its request went out.
    pub fn answered(&mut self, now: Millis, latency_ms: u64) {
        self.latency.record(now, true, latency_ms, false);
    }
}

/// The hedge of one attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plan {
    /// The attempt does not hedge.
    Off,
    /// The hedge goes out at `at` unless the attempt has answered ([`Pair::hedge_due`]).
    Due { at: Millis, after_ms: u64 },
    /// The hedge went out as `io` (`None` once it ended), `after_ms` after the first request.
    Sent { io: Option<IoId>, after_ms: u64 },
}

/// One attempt's requests: the first, and its hedge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pair {
    /// The first request (`None` once it ended while the hedge still runs).
    pub first: Option<IoId>,
    pub hedge: Plan,
}

/// What an answer to one of the pair's requests means for the attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settled {
    /// Not the attempt's answer yet: the other request is still out and may do better.
    Wait,
    /// The attempt's answer. `won`: it came from the hedge and was good; `abort`: the other
    /// request, still out.
    Answer { won: bool, abort: Option<IoId> },
}

impl Pair {
    pub fn new(first: IoId, now: Millis, hedge_after_ms: Option<u64>) -> Pair {
        Pair {
            first: Some(first),
            hedge: hedge_after_ms.map_or(Plan::Off, |after_ms| Plan::Due {
                at: now.plus(after_ms),
                after_ms,
            }),
        }
    }

    /// When the hedge is due, while it has not gone out.
    pub fn hedge_due(&self) -> Option<Millis> {
        match self.hedge {
            Plan::Due { at, .. } => Some(at),
            _ => None,
        }
    }

    /// The hedge's delay after the first request, when it went out.
    pub fn sent_after(&self) -> Option<u64> {
        match self.hedge {
            Plan::Sent { after_ms, .. } => Some(after_ms),
            _ => None,
        }
    }

    /// The hedge's timer fired at `now`: send it as `io`, unless it is not due or the first
    /// request already ended (then the attempt has its answer and no hedge goes out).
    pub fn send(&mut self, now: Millis, io: IoId) -> bool {
        match self.hedge {
            Plan::Due { at, after_ms } if at <= now && self.first.is_some() => {
                self.hedge = Plan::Sent {
                    io: Some(io),
                    after_ms,
                };
                true
            }
            _ => false,
        }
    }

    /// The requests still out (to abort when the attempt times out).
    pub fn out(&self) -> impl Iterator<Item = IoId> {
        let hedge = match self.hedge {
            Plan::Sent { io, .. } => io,
            _ => None,
        };
        self.first.into_iter().chain(hedge)
    }

    /// Request `io` answered; `good`: a 2xx. `None`: `io` is not one of this attempt's.
    ///
    /// Before the hedge goes out, the first request's answer is the attempt's, good or not
    /// (a failure is not worth a second call). After, the first good answer wins and the
    /// other request is aborted; a failure waits for the other request, and the last to end
    /// is the answer when neither was good.
    pub fn settle(&mut self, io: IoId, good: bool) -> Option<Settled> {
        let hedge_io = match self.hedge {
            Plan::Sent { io, .. } => io,
            _ => None,
        };
        let from_hedge = if self.first == Some(io) {
            self.first = None;
            false
        } else if hedge_io == Some(io) {
            if let Plan::Sent { io, .. } = &mut self.hedge {
                *io = None;
            }
            true
        } else {
            return None;
        };
        let other = if from_hedge { self.first } else { hedge_io };
        let other = other.filter(|o| *o != io);
        Some(if good || other.is_none() {
            Settled::Answer {
                won: from_hedge && good,
                abort: other,
            }
        } else {
            Settled::Wait
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Millis = Millis(1_000);

    #[test]
    fn before_the_hedge_is_sent_the_first_answer_is_the_attempts_good_or_not() {
        let mut p = Pair::new(IoId(1), T, Some(20));
        assert_eq!(p.hedge_due(), Some(T.plus(20)));
        assert_eq!(
            p.settle(IoId(1), false),
            Some(Settled::Answer {
                won: false,
                abort: None
            })
        );
        assert!(!p.send(T.plus(20), IoId(2)), "no hedge after the answer");
        assert_eq!(p.sent_after(), None);
    }

    #[test]
    fn after_the_hedge_the_first_good_answer_wins_and_the_other_is_aborted() {
        let mut p = Pair::new(IoId(1), T, Some(20));
        assert!(!p.send(T.plus(19), IoId(2)), "not due yet");
        assert!(p.send(T.plus(20), IoId(2)));
        assert_eq!(p.out().collect::<Vec<_>>(), [IoId(1), IoId(2)]);
        assert_eq!(
            p.settle(IoId(2), true),
            Some(Settled::Answer {
                won: true,
                abort: Some(IoId(1))
            })
        );
        let mut p = Pair::new(IoId(1), T, Some(20));
        p.send(T.plus(20), IoId(2));
        assert_eq!(
            p.settle(IoId(1), true),
            Some(Settled::Answer {
                won: false,
                abort: Some(IoId(2))
            })
        );
    }

    #[test]
    fn a_failure_waits_for_the_other_request_and_the_last_failure_is_the_answer() {
        let mut p = Pair::new(IoId(1), T, Some(20));
        p.send(T.plus(20), IoId(2));
        assert_eq!(p.settle(IoId(1), false), Some(Settled::Wait));
        assert_eq!(p.out().collect::<Vec<_>>(), [IoId(2)]);
        assert_eq!(
            p.settle(IoId(2), false),
            Some(Settled::Answer {
                won: false,
                abort: None
            })
        );
        // A failure then a good answer from the other: the good one wins.
        let mut p = Pair::new(IoId(1), T, Some(20));
        p.send(T.plus(20), IoId(2));
        assert_eq!(p.settle(IoId(2), false), Some(Settled::Wait));
        assert_eq!(
            p.settle(IoId(1), true),
            Some(Settled::Answer {
                won: false,
                abort: None
            })
        );
        assert_eq!(p.settle(IoId(9), true), None, "not this attempt's");
    }

    #[test]
    fn the_budget_caps_hedges_and_refunds_unsent_ones() {
        let cfg = Hedge {
            after_ms: Some(10),
            max_share: 0.0001,
            burst: 1,
            min_calls: 1,
        };
        let mut h = Hedger::new(Some(&cfg));
        assert_eq!(h.plan(Some(&cfg), T, 45, true), Some(10));
        assert_eq!(h.plan(Some(&cfg), T, 45, true), None, "bucket empty");
        h.refund(Some(&cfg));
        assert_eq!(h.plan(Some(&cfg), T, 45, false), None, "not repeatable");
        assert_eq!(
            h.plan(Some(&cfg), T, 10, true),
            None,
            "no time left to hedge"
        );
        assert_eq!(h.plan(Some(&cfg), T, 45, true), Some(10));
    }
}
