//! [E-OBSERVE] What a request saw of the origin, call by call, for its log line: when each
//! request to the model went out and when it ended, relative to the request's arrival, and
//! how — the model's good answer, a failure with its reason and status, or no answer by the
//! time the engine stopped waiting: `cut` by the attempt's timer, or `abandoned` when the
//! other request of a hedged pair answered first. A cut or abandoned call is a censored
//! observation — the model was slower than that, by how much nobody saw — and
//! `understudy replay` keeps it censored when it rebuilds the origin from the logs.

use crate::classify::FailureReason;
use crate::io::IoId;
use crate::time::Millis;

/// Most calls one request makes: `origin.attempts` is at most 10, each with at most one
/// hedge. The log line writes every one.
pub const MAX_CALLS: usize = 20;

/// How one call to the origin ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// A good answer (2xx, the declared shape).
    Ok,
    /// The model answered, and it was a failure (or the connection failed).
    Failed {
        reason: FailureReason,
        status: Option<u16>,
        retry_after_s: Option<u64>,
    },
    /// The attempt's timer ended it: no answer by then. `busy`: on a busy isolate (its
    /// timers running late, or this one late), where the answer may have been waiting in
    /// the isolate's own queue — no evidence about the origin.
    Cut { busy: bool },
    /// The engine stopped waiting before its timer: its pair's other request answered, or
    /// the request was answered another way.
    Abandoned,
}

impl End {
    /// The log line's `end`: `ok`, the failure's reason code, `cut` or `abandoned`.
    pub fn word(&self) -> &'static str {
        match self {
            End::Ok => "ok",
            End::Failed { reason, .. } => reason.code(),
            End::Cut { busy: false } => "cut",
            End::Cut { busy: true } => "cut_busy",
            End::Abandoned => "abandoned",
        }
    }
}

/// One request to the origin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub io: IoId,
    pub started: Millis,
    /// When its attempt's timer was due: a call cut later than this was cut by a late
    /// timer (the isolate was busy), which tells nothing of the origin.
    pub due: Millis,
    /// It was the hedge of its attempt.
    pub hedge: bool,
    /// Its attempt was a probe (or a half-open trial) of the breaker.
    pub probe: bool,
    /// When and how it ended; `None` while it is out.
    pub end: Option<(Millis, End)>,
}

/// A request's calls, in the order they went out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Calls(pub Vec<Call>);

impl Calls {
    /// Call `io` went out at `now`, its attempt's timer due at `due`.
    pub fn start(&mut self, io: IoId, now: Millis, due: Millis, hedge: bool, probe: bool) {
        if self.0.len() < MAX_CALLS {
            self.0.push(Call {
                io,
                started: now,
                due,
                hedge,
                probe,
                end: None,
            });
        }
    }

    /// Call `io` ended at `now` as `end` (the first end it is given counts).
    pub fn end(&mut self, io: IoId, now: Millis, end: End) {
        if let Some(c) = self.0.iter_mut().find(|c| c.io == io && c.end.is_none()) {
            c.end = Some((now, end));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_ends_once_and_the_list_is_bounded() {
        let mut c = Calls::default();
        c.start(IoId(1), Millis(10), Millis(55), false, true);
        c.end(IoId(1), Millis(55), End::Cut { busy: false });
        c.end(IoId(1), Millis(60), End::Ok);
        assert_eq!(c.0[0].end, Some((Millis(55), End::Cut { busy: false })));
        for i in 0..30 {
            c.start(IoId(100 + i), Millis(70), Millis(115), false, false);
        }
        assert_eq!(c.0.len(), MAX_CALLS);
        let failed = End::Failed {
            reason: FailureReason::Ml5xx,
            status: Some(503),
            retry_after_s: None,
        };
        assert_eq!(
            [
                End::Ok.word(),
                failed.word(),
                End::Cut { busy: true }.word(),
                End::Abandoned.word()
            ],
            ["ok", "ML_5XX", "cut_busy", "abandoned"]
        );
    }
}
