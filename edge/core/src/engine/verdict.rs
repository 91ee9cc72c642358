//! [E-CLASSIFY] What the breaker learns from each origin attempt: the model's outcomes, not
//! the edge's (docs/outcomes.md, "What the breaker learns from").
//!
//! Most attempts are judged when they end. One kind cannot be: a timeout on a busy isolate
//! (its timer fired late, or it knows it is saturated) while the model answered no other
//! call. A hung model looks like that — and so does a healthy one whose answers sat in the
//! isolate's queue behind a stall (a cold isolate compiling, a burst of 64 timers): the
//! timers of a stall fire before the answers queued under it are taken. Such a timeout
//! waits one more timeout-length for the model to be heard from. An answer to any call in
//! that time acquits it (no verdict); silence convicts it (a timeout against the model). A
//! hung model is shed one timeout later than otherwise, and a stalled isolate never blames a
//! healthy one.

use crate::breaker::{Admission, Breaker, Outcome as BreakerOutcome};
use crate::io::IoId;
use crate::time::Millis;

use super::bulkhead::Lease;

/// Timeouts awaiting the model's word; more than this at once are left without a verdict
/// (the breaker has had plenty of evidence by then).
const MAX_PENDING: usize = 256;

#[derive(Debug, Clone, Copy)]
struct Pending {
    started: Millis,
    judge_at: Millis,
    admission: Admission,
    latency_ms: u64,
}

#[derive(Debug, Default)]
pub(super) struct Verdicts {
    /// When the model last answered (any status) one of this isolate's calls.
    heard: Option<Millis>,
    pending: Vec<Pending>,
    /// Timed-out attempts whose requests the isolate still listens to ([`Self::listen`]).
    listening: Vec<Listening>,
}

/// A timed-out attempt on a busy isolate whose requests are kept out a little longer.
#[derive(Debug)]
pub(super) struct Listening {
    /// Its requests still out (the first and maybe its hedge).
    pub ios: Vec<IoId>,
    /// Until when the isolate listens: the driver aborts them then.
    pub until: Millis,
    /// The attempt's bulkhead slot, kept while its requests are out: the origin still has
    /// them ([`super::bulkhead`]).
    pub _lease: Option<Lease>,
}

/// How long after `until` an entry whose reports never came is kept (the driver reports
/// the abort at `until`; a request dropped by the isolate never reports).
const FORGET_AFTER_MS: u64 = 1_000;

/// What became of an attempt handed to [`Verdicts::timeout_in_silence`] or of those swept.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Swept {
    pub convicted: u32,
    pub acquitted: u32,
}

/// What a fetch the isolate listened to told it ([`Verdicts::late`]).
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Late {
    /// The model answered it in time to count.
    pub heard: bool,
    pub swept: Swept,
}

impl Verdicts {
    pub fn heard(&self) -> Option<Millis> {
        self.heard
    }

    /// Whether the model answered any call after `at`.
    pub fn heard_since(&self, at: Millis) -> bool {
        self.heard.is_some_and(|h| h > at)
    }

    /// The model answered a call at `at`: every waiting timeout that started before it is
    /// acquitted (the breaker's admission given back).
    pub fn model_answered(&mut self, at: Millis, breaker: &mut Breaker) -> Swept {
        self.heard = Some(self.heard.map_or(at, |h| h.max(at)));
        let mut swept = Swept::default();
        self.pending.retain(|p| {
            let acquit = p.started < at;
            if acquit {
                breaker.release(p.admission);
                swept.acquitted += 1;
            }
            !acquit
        });
        swept
    }

    /// A timeout on a busy isolate, the model silent so far: judged at `now + timeout_ms`
    /// unless the model is heard from first. Returns false (no verdict: the caller gives the
    /// admission back) when too many wait already.
    pub fn timeout_in_silence(
        &mut self,
        started: Millis,
        now: Millis,
        timeout_ms: u64,
        admission: Admission,
        latency_ms: u64,
    ) -> bool {
        if self.pending.len() >= MAX_PENDING {
            return false;
        }
        self.pending.push(Pending {
            started,
            judge_at: now.plus(timeout_ms),
            admission,
            latency_ms,
        });
        true
    }

    /// Convicts the waiting timeouts whose time is up at `now`: the model said nothing to
    /// anyone for a whole timeout more.
    pub fn sweep(&mut self, now: Millis, breaker: &mut Breaker) -> Swept {
        let mut swept = Swept::default();
        if self.pending.is_empty() {
            return swept;
        }
        self.pending.retain(|p| {
            let due = p.judge_at <= now;
            if due {
                breaker.record(now, p.admission, BreakerOutcome::timeout(p.latency_ms));
                swept.convicted += 1;
            }
            !due
        });
        swept
    }

    /// The requests of an attempt that timed out on a busy isolate stay out a little
    /// longer (until `l.until`): an answer may be in the isolate's own queue already — the
    /// timers of a stall fire before the answers queued under it are taken — and aborting
    /// the request would leave it unheard. A fresh isolate's first waves showed it: every
    /// answer aborted unseen, the next wave's timeouts were convicted in a "silence" of the
    /// isolate's own making (issue 23: openings on a healthy origin). False when too many
    /// are listened to already (the caller aborts them).
    pub fn listen(&mut self, l: Listening, now: Millis) -> bool {
        self.listening
            .retain(|x| x.until.plus(FORGET_AFTER_MS) >= now);
        if self.listening.len() >= MAX_PENDING {
            return false;
        }
        self.listening.push(l);
        true
    }

    /// Fetch `io` ended at `now`; `good`: with a 2xx answer. `None` when the isolate was not
    /// listening to it. A good answer before the listening ends may have been queued in the
    /// isolate by the deadline: it is the model's word, and the timeouts that started
    /// before it are acquitted ([`Self::model_answered`]). A failure status is not (the
    /// attempt's own timeout stands, as it would have); neither is anything after `until`.
    pub fn late(
        &mut self,
        now: Millis,
        io: IoId,
        good: bool,
        breaker: &mut Breaker,
    ) -> Option<Late> {
        let i = self.listening.iter().position(|l| l.ios.contains(&io))?;
        let until = self.listening[i].until;
        self.listening[i].ios.retain(|x| *x != io);
        if self.listening[i].ios.is_empty() {
            self.listening.swap_remove(i); // its bulkhead slot is free
        }
        let mut late = Late::default();
        if good && now < until {
            late.swept = self.sweep(now, breaker);
            late.swept.acquitted = self.model_answered(now, breaker).acquitted;
            late.heard = true;
        }
        Some(late)
    }

    /// Timeouts still waiting for the model's word.
    #[cfg(test)]
    pub fn pending(&self) -> usize {
        self.pending.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::breaker::Mode;
    use crate::policy::Breaker as Cfg;

    fn breaker() -> Breaker {
        Breaker::new(&Cfg::Consecutive {
            failures: 1,
            cooldown_ms: 10_000,
        })
    }

    #[test]
    fn a_silent_timeout_is_convicted_one_timeout_later_and_not_before() {
        let (mut v, mut b) = (Verdicts::default(), breaker());
        let adm = b.admit(Millis(0));
        assert!(v.timeout_in_silence(Millis(0), Millis(60), 45, adm, 60));
        assert_eq!(v.sweep(Millis(104), &mut b), Swept::default());
        assert_eq!(b.mode(Millis(104)), Mode::Healthy);
        assert_eq!(
            v.sweep(Millis(105), &mut b),
            Swept {
                convicted: 1,
                acquitted: 0
            }
        );
        assert_eq!(b.mode(Millis(105)), Mode::Open);
        assert_eq!(v.pending(), 0);
    }

    #[test]
    fn an_answer_acquits_the_timeouts_that_started_before_it_only() {
        let (mut v, mut b) = (Verdicts::default(), breaker());
        for started in [0, 50] {
            let adm = b.admit(Millis(started));
            assert!(v.timeout_in_silence(Millis(started), Millis(started + 60), 45, adm, 60));
        }
        let s = v.model_answered(Millis(40), &mut b);
        assert_eq!(s.acquitted, 1);
        assert!(v.heard_since(Millis(39)) && !v.heard_since(Millis(40)));
        assert_eq!(
            v.pending(),
            1,
            "the call that started after the answer still waits"
        );
        assert_eq!(v.sweep(Millis(155), &mut b).convicted, 1);
    }

    #[test]
    fn past_the_cap_a_timeout_gets_no_verdict() {
        let (mut v, mut b) = (Verdicts::default(), breaker());
        for i in 0..MAX_PENDING as u64 {
            assert!(v.timeout_in_silence(Millis(i), Millis(i + 60), 45, Admission::Call, 60));
        }
        let adm = b.admit(Millis(0));
        assert!(!v.timeout_in_silence(Millis(0), Millis(60), 45, adm, 60));
    }
}
