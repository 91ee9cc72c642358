//! [V-STORE] [V-ORDER] [V-DELIVER] The outbox's decisions, sans-IO: what an arriving event
//! is (new, a duplicate, a conflict), which events are due, what one attempt's outcome does
//! to its event, and what replay and skip may do. The Durable Object (`edge/worker`) keeps
//! the rows in SQLite and performs the I/O; every rule is here, tested in virtual time.
//!
//! Ordering: each aggregate (tenant + aggregate ID) has a *cursor*, the highest sequence
//! delivered or skipped; sequences start at 1. Only the *head* — the event at `cursor + 1` —
//! is delivered. A head that is a dead letter holds the aggregate (policy `hold`) until an
//! operator replays or skips it; with `continue` the cursor moves past it. A missing head
//! with later events waiting is a *gap*: held, and reported after `[events.alerts] gap`.
//! An event whose sequence is at or below the cursor is only ever a replayed dead letter
//! the aggregate already moved past (`continue`): it is delivered on its own, out of order,
//! because the policy said so.

use serde::{Deserialize, Serialize};

use crate::classify::Observed;
use crate::time::Millis;

mod operator;
pub mod run;

pub use operator::{replay, skip, Refusal, Skip};

use super::attempt::{self, class_name};
use super::schedule;
use crate::policy::events::{DeadLetter, Events};

crate::words! {
    /// An event's delivery state.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(rename_all = "SCREAMING_SNAKE_CASE")]
    pub enum State {
        Pending = "PENDING",
        Delivered = "DELIVERED",
        DeadLetter = "DEAD_LETTER",
    }
}

impl State {
    pub fn parse(s: &str) -> Option<State> {
        Self::ALL
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(s))
            .map(|(_, st)| *st)
    }
}

/// One event row, without its sealed payload. Times are ms since the epoch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    pub event_id: String,
    pub tenant: String,
    pub aggregate: String,
    pub sequence: u64,
    pub event_type: String,
    pub schema_version: u32,
    pub occurred_at: String,
    pub correlation_id: String,
    pub state: State,
    pub attempts: u32,
    /// `dependency`, `credential` or `caller` ([`crate::classify::Class`]).
    pub last_error_class: Option<String>,
    /// The code and a one-line detail: `HTTP_5XX: consumer answered 503`.
    pub last_error: Option<String>,
    pub last_status: Option<u16>,
    pub next_attempt_at: Option<u64>,
    pub stored_at: u64,
    pub first_attempt_at: Option<u64>,
    pub delivered_at: Option<u64>,
    /// A dead letter an operator skipped (it stays `DEAD_LETTER`).
    pub skipped: bool,
    pub replays: u32,
    /// The envelope's [digest](super::envelope::Envelope::digest) as accepted: a resend with
    /// this ID is the same event only if its digest is equal. `None` on a row stored before
    /// digests were kept, which matches any resend of its identity.
    pub digest: Option<String>,
}

impl Record {
    /// The record of `env` as it arrives, its [digest](Record::digest) keyed by `key`.
    pub fn new(
        env: &super::envelope::Envelope,
        tenant: &str,
        key: &super::seal::SealKey,
        now: Millis,
    ) -> Record {
        Record {
            event_id: env.event_id.clone(),
            tenant: tenant.to_string(),
            aggregate: env.aggregate_id.clone(),
            sequence: env.sequence,
            event_type: env.event_type.clone(),
            schema_version: env.schema_version,
            occurred_at: env.occurred_at.clone(),
            correlation_id: env.correlation_id.clone(),
            state: State::Pending,
            attempts: 0,
            last_error_class: None,
            last_error: None,
            last_status: None,
            next_attempt_at: Some(now.0),
            stored_at: now.0,
            first_attempt_at: None,
            delivered_at: None,
            skipped: false,
            replays: 0,
            digest: Some(env.digest(key)),
        }
    }

    fn same_event(&self, other: &Record) -> bool {
        self.tenant == other.tenant
            && self.aggregate == other.aggregate
            && self.sequence == other.sequence
    }

    /// The first envelope field in which `other`, the same event by its identity, differs
    /// from this one as accepted (`None`: it is a resend). A row without a digest matches.
    fn differs(&self, other: &Record) -> Option<&'static str> {
        let (Some(mine), Some(theirs)) = (&self.digest, &other.digest) else {
            return None;
        };
        if mine == theirs {
            return None;
        }
        Some(if self.event_type != other.event_type {
            "type"
        } else if self.schema_version != other.schema_version {
            "schemaVersion"
        } else if self.occurred_at != other.occurred_at {
            "occurredAt"
        } else if self.correlation_id != other.correlation_id {
            "correlationId"
        } else {
            "payload"
        })
    }
}

/// What an arriving event (or claim) is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Arrival {
    /// New: store it.
    Store,
    /// The same event again (same ID, tenant, aggregate and sequence): acknowledge, store
    /// nothing.
    Duplicate,
    /// Refused with 409: the code and why.
    Conflict(&'static str, String),
}

/// Decides an arrival from what the shard already holds: the row with the same event ID,
/// the row at the same (tenant, aggregate, sequence), and the aggregate's cursor. The same
/// ID is a duplicate only when it is the same event — same identity and same
/// [digest](Record::digest); reused for anything else, it is refused, never merged.
pub fn arrival(
    new: &Record,
    same_id: Option<&Record>,
    same_place: Option<&Record>,
    cursor: u64,
) -> Arrival {
    if let Some(old) = same_id {
        if !old.same_event(new) {
            return reused(&new.event_id);
        }
        return match old.differs(new) {
            None => Arrival::Duplicate,
            Some(field) => Arrival::Conflict(
                EVENT_ID_REUSED,
                format!(
                    "event ID `{}` already names another event: its `{field}` differs from the event accepted with this ID; a new event needs a new event ID",
                    new.event_id
                ),
            ),
        };
    }
    if let Some(other) = same_place {
        return Arrival::Conflict(
            "SEQUENCE_TAKEN",
            format!(
                "sequence {} of aggregate `{}` is already event `{}`",
                new.sequence, new.aggregate, other.event_id
            ),
        );
    }
    if new.sequence <= cursor {
        return Arrival::Conflict(
            "SEQUENCE_PASSED",
            format!(
                "aggregate `{}` has moved past sequence {} (its events are delivered or skipped through {cursor})",
                new.aggregate, new.sequence
            ),
        );
    }
    Arrival::Store
}

/// The refusal of an event ID that names another event (its `field` is `eventId`; every
/// other conflict is about the `sequence`).
pub const EVENT_ID_REUSED: &str = "EVENT_ID_REUSED";

/// The envelope field a conflict's refusal names.
pub fn conflict_field(code: &str) -> &'static str {
    if code == EVENT_ID_REUSED {
        "eventId"
    } else {
        "sequence"
    }
}

fn reused(event_id: &str) -> Arrival {
    Arrival::Conflict(
        EVENT_ID_REUSED,
        format!("event ID `{event_id}` already names another event; event IDs are unique across tenants and aggregates"),
    )
}

/// An event ID's claim: which tenant's event it names, unique across the whole edge.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claim {
    pub event_id: String,
    pub tenant: String,
    pub aggregate: String,
    pub sequence: u64,
}

/// Decides a claim against the one already held for the same ID.
pub fn claim(new: &Claim, held: Option<&Claim>) -> Arrival {
    match held {
        None => Arrival::Store,
        Some(h) if h == new => Arrival::Duplicate,
        Some(_) => reused(&new.event_id),
    }
}

/// An aggregate with undelivered events: its cursor, the event at `cursor + 1` if it has
/// arrived, and otherwise the lowest later event waiting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    pub tenant: String,
    pub aggregate: String,
    pub cursor: u64,
    pub next: Option<Record>,
    /// `(sequence, stored_at)` of the lowest waiting event when `next` is missing.
    pub waiting: Option<(u64, u64)>,
}

/// Why an aggregate is not moving. (Externally tagged for the shard protocol, which is
/// postcard; [`Held::view`] is the flat JSON operators see.)
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Held {
    /// Its head is a dead letter: replay or skip it.
    DeadLetter {
        tenant: String,
        aggregate: String,
        event_id: String,
        sequence: u64,
    },
    /// Sequence `missing` has not arrived; a later one waits since `since`.
    Gap {
        tenant: String,
        aggregate: String,
        missing: u64,
        waiting: u64,
        since: u64,
    },
}

impl Held {
    /// The JSON the status endpoint shows: `{"why": "dead_letter" | "gap", …}`.
    pub fn view(&self) -> serde_json::Value {
        match self {
            Held::DeadLetter {
                tenant,
                aggregate,
                event_id,
                sequence,
            } => {
                serde_json::json!({"why": "dead_letter", "tenant": tenant, "aggregate": aggregate, "event_id": event_id, "sequence": sequence})
            }
            Held::Gap {
                tenant,
                aggregate,
                missing,
                waiting,
                since,
            } => {
                serde_json::json!({"why": "gap", "tenant": tenant, "aggregate": aggregate, "missing": missing, "waiting": waiting, "since": since})
            }
        }
    }
}

/// What one alarm run should do.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Plan {
    /// Event IDs to deliver now (at most `max`).
    pub deliver: Vec<String>,
    /// Cursors to move: `(tenant, aggregate, to)` (a dead-letter head under `continue`).
    pub advance: Vec<(String, String, u64)>,
    pub held: Vec<Held>,
    /// When to run again (`None`: nothing is pending).
    pub wake_at: Option<Millis>,
}

/// Chooses the due events among the heads and the loose (replayed, already passed) events.
pub fn select(now: Millis, heads: &[Head], loose: &[Record], mode: DeadLetter, max: usize) -> Plan {
    let mut plan = Plan::default();
    let mut due: Vec<(u64, &Record)> = Vec::new();
    let wake = |plan: &mut Plan, at: u64| {
        plan.wake_at = Some(plan.wake_at.map_or(Millis(at), |w| w.min(Millis(at))));
    };
    for h in heads {
        match &h.next {
            Some(r) if r.state == State::Pending => match r.next_attempt_at {
                Some(at) if at <= now.0 => due.push((at, r)),
                Some(at) => wake(&mut plan, at),
                None => due.push((now.0, r)),
            },
            Some(r) if r.state == State::DeadLetter && !r.skipped && mode == DeadLetter::Hold => {
                plan.held.push(Held::DeadLetter {
                    tenant: h.tenant.clone(),
                    aggregate: h.aggregate.clone(),
                    event_id: r.event_id.clone(),
                    sequence: r.sequence,
                })
            }
            // A dead letter under `continue`, a skipped one, or a delivered head whose
            // cursor did not move (a write lost with a crash): move past it.
            Some(r) => {
                plan.advance
                    .push((h.tenant.clone(), h.aggregate.clone(), r.sequence));
                wake(&mut plan, now.0);
            }
            None => {
                if let Some((seq, since)) = h.waiting {
                    plan.held.push(Held::Gap {
                        tenant: h.tenant.clone(),
                        aggregate: h.aggregate.clone(),
                        missing: h.cursor + 1,
                        waiting: seq,
                        since,
                    });
                }
            }
        }
    }
    for r in loose.iter().filter(|r| r.state == State::Pending) {
        match r.next_attempt_at {
            Some(at) if at > now.0 => wake(&mut plan, at),
            Some(at) => due.push((at, r)),
            None => due.push((now.0, r)),
        }
    }
    // Longest-waiting first; the rest run at the next wake-up, at once.
    crate::sort::sort_by(&mut due, |a, b| {
        a.0.cmp(&b.0).then_with(|| a.1.event_id.cmp(&b.1.event_id))
    });
    if due.len() > max {
        wake(&mut plan, now.0);
    }
    plan.deliver = due
        .into_iter()
        .take(max)
        .map(|(_, r)| r.event_id.clone())
        .collect();
    plan
}

/// Extra time a leased attempt is given beyond its timeout before it counts as lost.
pub const LEASE_MARGIN_MS: u64 = 1_000;

/// The record with an attempt leased: counted, and not due again until the attempt
/// should long be over — so a runtime killed mid-attempt retries after its restart.
pub fn lease(now: Millis, rec: &Record, attempt_timeout_ms: u64) -> Record {
    let mut r = rec.clone();
    r.attempts = r.attempts.saturating_add(1);
    r.first_attempt_at.get_or_insert(now.0);
    r.next_attempt_at = Some(
        now.0
            .saturating_add(attempt_timeout_ms.saturating_mul(2))
            .saturating_add(LEASE_MARGIN_MS),
    );
    r
}

/// What an attempt's outcome did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Delivered,
    Retry,
    /// A permanent failure (authentication, schema, or anything not retryable).
    DeadPermanent,
    /// Retryable, but the attempts or the window are used up.
    DeadExhausted,
}

impl Verdict {
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Delivered => "delivered",
            Verdict::Retry => "retry",
            Verdict::DeadPermanent => "dead_letter_permanent",
            Verdict::DeadExhausted => "dead_letter_exhausted",
        }
    }
}

/// A settled attempt: the updated record, the verdict, and the cursor to move to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settled {
    pub record: Record,
    pub verdict: Verdict,
    pub advance_to: Option<u64>,
    /// Commit-to-acknowledgement latency of a delivered event.
    pub latency_ms: Option<u64>,
}

/// Settles the leased record `rec` with the attempt's raw outcome. `unit` is a uniform
/// draw for the jitter; `cursor` is the aggregate's cursor.
pub fn settle(
    now: Millis,
    rec: &Record,
    observed: &Observed,
    events: &Events,
    cursor: u64,
    unit: f64,
) -> Settled {
    let mut r = rec.clone();
    let is_head = r.sequence == cursor + 1;
    match attempt::outcome(observed) {
        Ok(()) => {
            r.state = State::Delivered;
            r.delivered_at = Some(now.0);
            r.next_attempt_at = None;
            Settled {
                latency_ms: Some(now.since(Millis(r.stored_at))),
                record: r,
                verdict: Verdict::Delivered,
                advance_to: is_head.then_some(rec.sequence),
            }
        }
        Err(f) => {
            let class = f.reason.class();
            r.last_error_class = Some(class_name(class).to_string());
            r.last_error = Some(format!("{}: {}", attempt::code(f.reason), f.detail));
            r.last_status = f.status;
            // Only a class worth another attempt (a dependency failure) is redelivered: a
            // refused credential or event would be refused again, and the edge's own
            // refusals never reach a consumer.
            let retryable = class.retried() && f.reason.retryable(&events.retry.retry_on);
            let since_first = now.since(Millis(r.first_attempt_at.unwrap_or(now.0)));
            let wait = retryable
                .then(|| {
                    schedule::next_delay(
                        &events.retry,
                        r.attempts,
                        f.retry_after_s,
                        unit,
                        since_first,
                    )
                })
                .flatten();
            let verdict = match wait {
                Some(ms) => {
                    r.next_attempt_at = Some(now.0.saturating_add(ms));
                    Verdict::Retry
                }
                None => {
                    r.state = State::DeadLetter;
                    r.next_attempt_at = None;
                    if retryable {
                        Verdict::DeadExhausted
                    } else {
                        Verdict::DeadPermanent
                    }
                }
            };
            let passes = r.state == State::DeadLetter
                && events.dead_letter == DeadLetter::Continue
                && is_head;
            Settled {
                record: r,
                verdict,
                advance_to: passes.then_some(rec.sequence),
                latency_ms: None,
            }
        }
    }
}

#[cfg(test)]
mod tests;
