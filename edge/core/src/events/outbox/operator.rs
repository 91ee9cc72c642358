//! [V-OPS] What an operator may do to the outbox: replay a dead letter (with its event ID,
//! so the consumer's dedupe still holds) and skip a held aggregate's head.

use serde::{Deserialize, Serialize};

use super::{Head, Record, State};
use crate::policy::events::{DeadLetter, Events};
use crate::time::Millis;

/// Why an operator's request is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub status: u16,
    pub code: &'static str,
    pub message: String,
}

fn refuse(status: u16, code: &'static str, message: String) -> Refusal {
    Refusal {
        status,
        code,
        message,
    }
}

/// Replays a dead letter with its original event ID: pending again, attempts from zero.
pub fn replay(now: Millis, rec: &Record, events: &Events) -> Result<Record, Refusal> {
    if !events.replay {
        return Err(refuse(
            403,
            "REPLAY_DISABLED",
            "replay is switched off in this policy (`[events] replay = false`); switch it on once replay is tested".into(),
        ));
    }
    if rec.state != State::DeadLetter {
        return Err(refuse(
            409,
            "NOT_A_DEAD_LETTER",
            format!(
                "event `{}` is {}, not a dead letter",
                rec.event_id,
                rec.state.as_str()
            ),
        ));
    }
    if rec.skipped && events.dead_letter == DeadLetter::Hold {
        return Err(refuse(
            409,
            "SKIPPED",
            format!("event `{}` was skipped and its aggregate moved on: replaying it would deliver it out of order", rec.event_id),
        ));
    }
    let mut r = rec.clone();
    r.state = State::Pending;
    r.attempts = 0;
    r.first_attempt_at = None;
    r.next_attempt_at = Some(now.0);
    r.replays = r.replays.saturating_add(1);
    Ok(r)
}

/// What a skip did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Skip {
    /// The dead-letter head stays `DEAD_LETTER`, marked skipped; the cursor moves past it.
    DeadLetter { event_id: String, to: u64 },
    /// The missing sequences are given up; the cursor moves to just before the waiting one.
    Gap { from: u64, to: u64 },
}

impl Skip {
    /// The JSON operators see: `{"skipped": "dead_letter" | "gap", …}`.
    pub fn view(&self) -> serde_json::Value {
        match self {
            Skip::DeadLetter { event_id, to } => {
                serde_json::json!({"skipped": "dead_letter", "event_id": event_id, "to": to})
            }
            Skip::Gap { from, to } => serde_json::json!({"skipped": "gap", "from": from, "to": to}),
        }
    }
}

/// Skips what holds the aggregate `head`. Returns the skip and the updated head record.
pub fn skip(head: &Head) -> Result<(Skip, Option<Record>), Refusal> {
    match (&head.next, head.waiting) {
        (Some(r), _) if r.state == State::DeadLetter && !r.skipped => {
            let mut rec = r.clone();
            rec.skipped = true;
            Ok((
                Skip::DeadLetter {
                    event_id: r.event_id.clone(),
                    to: r.sequence,
                },
                Some(rec),
            ))
        }
        (Some(r), _) => Err(refuse(
            409,
            "NOT_HELD",
            format!(
                "aggregate `{}` is not held: its next event `{}` is {}",
                head.aggregate,
                r.event_id,
                r.state.as_str()
            ),
        )),
        (None, Some((seq, _))) => Ok((
            Skip::Gap {
                from: head.cursor + 1,
                to: seq - 1,
            },
            None,
        )),
        (None, None) => Err(refuse(
            404,
            "NOTHING_TO_SKIP",
            format!("aggregate `{}` has no undelivered event", head.aggregate),
        )),
    }
}
