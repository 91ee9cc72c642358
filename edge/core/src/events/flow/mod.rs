//! [V-INGEST] [V-OPS] Event requests through the engine: ingest (token → tenant → body →
//! envelope → seal → claim → store → `202`) and the operators' endpoints (list, inspect,
//! replay, skip, and the events block of the status endpoint). Each is a small state
//! machine: [`start`] and [`Flow::step`] return a [`Step`] — read the body, call shards, or
//! answer — and the engine turns steps into its commands (docs/adr/006, 010).
//!
//! [`ingest`] holds the producers' path, [`ops`] the operators'; this module holds the
//! shapes they share and dispatches each step to the one that owns its state.

mod ingest;
mod ops;

use serde_json::{json, Value};

use super::outbox::{Claim, Record};
use super::protocol::{ShardReply, ShardRequest};
use super::seal::SealKey;
use crate::disclosure::{self, Meta, Rendered};
use crate::policy::events::Events;
use crate::policy::Policy;
use crate::time::Millis;

pub use ingest::aad_of;
pub use ops::status;

/// Longest wait for the outbox shards' answers to one request's calls: past it every call
/// counts as failed (the engine's timer; the caller gets 503 and sends the event again).
pub const SHARD_TIMEOUT_MS: u64 = 10_000;

/// Where the operators' endpoints live (behind the `[admin]` secret).
pub const OPS_PATH: &str = "/__understudy/events";

/// What the engine does next for an event request.
#[derive(Debug)]
pub enum Step {
    /// Perform this; report what it produced ([`Heard`]).
    Io(Io),
    /// Done.
    Answer(Box<Answered>),
}

/// [V-INGEST] [V-STORE] The I/O of an event request, declared once: the engine starts it
/// (`engine::Command::Events`) and the driver reports a [`Heard`].
#[derive(Debug, Clone, PartialEq)]
pub enum Io {
    /// Read the request body, at most `max_bytes`; report it (or why not).
    ReadBody { max_bytes: u64 },
    /// Send each request to its shard (in parallel); report the replies in order.
    Call(Vec<(String, ShardRequest)>),
}

/// An answer with what the log line says about it.
#[derive(Debug)]
pub struct Answered {
    pub rendered: Rendered,
    /// `accepted`, `duplicate`, `refused`, `unavailable`, `ops`.
    pub outcome: &'static str,
    pub code: Option<String>,
    pub field: Option<String>,
    pub event: Option<Record>,
    /// Why the store could not be reached (for the log line, one bounded line).
    pub detail: Option<String>,
}

/// Why a body could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BodyError {
    TooLarge,
    Unreadable(String),
}

/// Request-wide facts the flows need.
#[derive(Debug, Clone, Copy)]
pub struct Ctx<'a> {
    pub policy: &'a Policy,
    pub events: &'a Events,
    pub release_id: &'a str,
    pub correlation_id: &'a str,
}

impl Ctx<'_> {
    fn meta(&self) -> Meta<'_> {
        Meta {
            correlation_id: self.correlation_id,
            policy_version: self.release_id,
            credentialed: true,
        }
    }
}

/// What the flow waits for.
#[derive(Debug)]
pub enum Flow {
    IngestBody {
        tenant: String,
        key: SealKey,
        nonce: [u8; 12],
    },
    IngestClaim {
        record: Box<Record>,
        sealed: Vec<u8>,
    },
    IngestStore {
        /// The claim this request made (released if the store refuses the event).
        new_claim: Option<Claim>,
        record: Box<Record>,
    },
    /// The store refused the event: the claim this request made is released, then the
    /// refusal is the answer.
    IngestUnclaim(Box<Step>),
    List,
    InspectLookup {
        key: Option<SealKey>,
    },
    InspectGet {
        key: Option<SealKey>,
    },
    ReplayLookup,
    ReplayDo,
    Skip,
    Status {
        base: Value,
    },
    Done,
}

/// The request facts a flow starts from (the engine's `Incoming`, and what it resolved).
pub struct Request<'a> {
    pub method: &'a str,
    pub path: &'a str,
    pub query: &'a str,
    pub authorization: Option<&'a str>,
    pub content_length: Option<&'a str>,
    pub content_type: Option<&'a str>,
}

/// Secrets a flow reads at its start.
pub struct Secrets {
    pub identity_key: Option<String>,
    pub seal_key: Option<String>,
    pub admin: Option<String>,
    /// 12 fresh random bytes for the seal's nonce (`None`: no entropy).
    pub nonce: Option<[u8; 12]>,
}

fn error(
    cx: &Ctx<'_>,
    status: u16,
    code: &str,
    message: &str,
    retryable: bool,
    field: Option<&str>,
) -> Rendered {
    let mut r = disclosure::error(status, code, message, retryable, &cx.meta());
    // Every refusal has one shape, {code, message, correlationId, retryable, field}, so a
    // producer reads `field` from any 4xx: `""` when no envelope field is at fault (the
    // method, the token, the media type, the body as a whole).
    if let Some(f) = field.or((400..500).contains(&status).then_some("")) {
        with_field(&mut r, f);
    }
    if retryable {
        r.headers.push(("Retry-After", "1".into()));
    }
    r
}

/// The error envelope `r` with the field at fault added.
fn with_field(r: &mut Rendered, field: &str) {
    if let Ok(Value::Object(mut m)) = serde_json::from_str::<Value>(&r.body) {
        m.insert("field".into(), Value::from(field));
        r.body = Value::Object(m).to_string();
    }
}

fn answer(rendered: Rendered, outcome: &'static str, code: Option<&str>) -> Step {
    Step::Answer(Box::new(Answered {
        rendered,
        outcome,
        code: code.map(str::to_string),
        field: None,
        event: None,
        detail: None,
    }))
}

fn refused(cx: &Ctx<'_>, status: u16, code: &str, message: &str) -> Step {
    answer(
        error(cx, status, code, message, false, None),
        "refused",
        Some(code),
    )
}

fn unavailable(cx: &Ctx<'_>, code: &str, message: &str) -> Step {
    answer(
        error(cx, 503, code, message, true, None),
        "unavailable",
        Some(code),
    )
}

fn json_answer(cx: &Ctx<'_>, status: u16, body: Value) -> Rendered {
    Rendered {
        status,
        headers: vec![
            ("Content-Type", "application/json".into()),
            ("Cache-Control", "no-store".into()),
            ("X-Correlation-ID", cx.correlation_id.to_string()),
            ("X-Policy-Version", cx.release_id.to_string()),
        ],
        body: body.to_string(),
    }
}

/// Whether `path` is an events path of this policy.
pub fn handles(events: &Events, path: &str) -> bool {
    path == events.route || path == OPS_PATH || path.starts_with("/__understudy/events/")
}

/// Starts an event request.
pub fn start(cx: &Ctx<'_>, now: Millis, req: &Request<'_>, secrets: Secrets) -> (Flow, Step) {
    if req.path == cx.events.route {
        ingest::start(cx, now, req, secrets)
    } else {
        ops::start(cx, req, secrets)
    }
}

/// What a flow hears back.
#[derive(Debug, Clone, PartialEq)]
pub enum Heard {
    Body(Result<Vec<u8>, BodyError>),
    Shards(Vec<Result<ShardReply, String>>),
}

impl Flow {
    /// Advances the flow with what it heard; `self` becomes what it waits for next.
    pub fn step(&mut self, cx: &Ctx<'_>, now: Millis, heard: Heard) -> Step {
        let next = self;
        let replies = match (std::mem::replace(next, Flow::Done), heard) {
            (Flow::IngestBody { tenant, key, nonce }, Heard::Body(body)) => {
                return ingest::body(next, cx, now, ingest::Sealing { tenant, key, nonce }, body)
            }
            (flow, Heard::Shards(replies)) => (flow, replies),
            (_, Heard::Body(_)) => return already_answered(cx),
        };
        match replies {
            (Flow::IngestClaim { record, sealed }, r) => {
                ingest::claimed(next, cx, record, sealed, r)
            }
            (Flow::IngestStore { new_claim, record }, r) => {
                ingest::stored(next, cx, new_claim, record, r)
            }
            (Flow::IngestUnclaim(step), _) => *step,
            (Flow::List, r) => ops::list_answer(cx, r),
            (Flow::InspectLookup { key }, r) => ops::inspect_lookup(next, cx, key, r),
            (Flow::InspectGet { key }, r) => ops::inspect_get(cx, key, r),
            (Flow::ReplayLookup, r) => ops::replay_lookup(next, cx, r),
            (Flow::ReplayDo, r) => ops::replay_do(cx, r),
            (Flow::Skip, r) => ops::skipped(cx, r),
            (Flow::Status { base }, r) => ops::status_answer(cx, now, base, r),
            (Flow::IngestBody { .. } | Flow::Done, _) => already_answered(cx),
        }
    }
}

fn already_answered(cx: &Ctx<'_>) -> Step {
    unavailable(cx, "EVENTS_FLOW", "the request was already answered")
}

fn with_event(step: Step, rec: impl Into<Box<Record>>) -> Step {
    match step {
        Step::Answer(mut a) => {
            a.event = Some(*rec.into());
            Step::Answer(a)
        }
        s => s,
    }
}

fn first(replies: Vec<Result<ShardReply, String>>) -> Result<ShardReply, String> {
    replies
        .into_iter()
        .next()
        .unwrap_or_else(|| Err("no reply".into()))
}

fn store_failed(cx: &Ctx<'_>, got: Result<ShardReply, String>) -> Step {
    let detail = match got {
        Ok(ShardReply::Error { message }) => message,
        Ok(_) => "the shard answered something else".to_string(),
        Err(e) => e,
    };
    match unavailable(
        cx,
        "STORE_UNAVAILABLE",
        "the event store did not answer; nothing is acknowledged: retry with the same eventId",
    ) {
        Step::Answer(mut a) => {
            a.detail = Some(crate::classify::bounded(&detail));
            Step::Answer(a)
        }
        s => s,
    }
}

fn not_found(cx: &Ctx<'_>) -> Step {
    refused(cx, 404, "EVENT_NOT_FOUND", "no event has this ID")
}

/// The one log line of an event request: never the payload.
pub fn log_line(cx: &Ctx<'_>, a: &Answered, latency_ms: u64, service: &str) -> String {
    let e = a.event.as_ref();
    json!({
        "event": "events_request",
        "correlation_id": cx.correlation_id,
        "outcome": a.outcome,
        "status": a.rendered.status,
        "code": a.code,
        "field": a.field,
        "event_id": e.map(|r| &r.event_id),
        "event_correlation_id": e.map(|r| &r.correlation_id),
        "aggregate_id": e.map(|r| &r.aggregate),
        "tenant": e.map(|r| &r.tenant),
        "type": e.map(|r| &r.event_type),
        "detail": a.detail,
        "latency_ms": latency_ms,
        "policy_version": cx.release_id,
        "service": service,
    })
    .to_string()
}

#[cfg(test)]
mod tests;
