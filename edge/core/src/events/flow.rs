//! [V-INGEST] [V-OPS] Event requests through the engine: ingest (token → tenant → body →
//! envelope → seal → claim → store → `202`) and the operators' endpoints (list, inspect,
//! replay, skip, and the events block of the status endpoint). Each is a small state
//! machine: [`start`] and [`Flow::step`] return a [`Step`] — read the body, call shards, or
//! answer — and the engine turns steps into its actions (docs/adr/005, 006).

use serde_json::{json, Value};

use super::envelope::{self, is_identifier, Envelope};
use super::outbox::{Claim, Record, State};
use super::policy::Events;
use super::protocol::{self as proto, Filter, ShardReply, ShardRequest, Verdict};
use super::redact::redact;
use super::seal::{self, SealKey};
use super::stats;
use crate::admin;
use crate::disclosure::{self, Meta, Rendered};
use crate::policy::Policy;
use crate::time::Millis;
use crate::token;

/// Where the operators' endpoints live (behind the `[admin]` secret).
pub const OPS_PATH: &str = "/__understudy/events";

/// What the engine does next for an event request.
#[derive(Debug)]
pub enum Step {
    /// Read the request body, at most `max_bytes`; report it (or why not).
    ReadBody { max_bytes: u64 },
    /// Send each request to its shard (in parallel); report the replies in order.
    Call(Vec<(String, ShardRequest)>),
    /// Done.
    Answer(Box<Answered>),
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
    if let Some(f) = field {
        // The envelope with the field at fault: {code, message, correlationId, retryable, field}.
        if let Ok(Value::Object(mut m)) = serde_json::from_str::<Value>(&r.body) {
            m.insert("field".into(), Value::from(f));
            r.body = Value::Object(m).to_string();
        }
    }
    if retryable {
        r.headers.push(("Retry-After", "1".into()));
    }
    r
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
        ingest(cx, now, req, secrets)
    } else {
        ops(cx, req, secrets)
    }
}

fn ingest(cx: &Ctx<'_>, now: Millis, req: &Request<'_>, secrets: Secrets) -> (Flow, Step) {
    let ev = cx.events;
    if !req.method.eq_ignore_ascii_case("POST") {
        let mut r = error(
            cx,
            405,
            "METHOD_NOT_ALLOWED",
            "events are sent with POST",
            false,
            None,
        );
        r.headers.push(("Allow", "POST".into()));
        return (Flow::Done, answer(r, "refused", Some("METHOD_NOT_ALLOWED")));
    }
    // Authenticate the caller, then take its tenant from the verified token.
    let Some(rules) = &cx.policy.identity else {
        return (
            Flow::Done,
            unavailable(
                cx,
                "IDENTITY_NOT_CONFIGURED",
                "the policy has no [identity]; re-bake",
            ),
        );
    };
    let Some(tok) = req.authorization.and_then(token::bearer) else {
        let mut r = error(
            cx,
            401,
            "TOKEN_REQUIRED",
            "events need a bearer token naming the tenant",
            false,
            None,
        );
        r.headers.push(("WWW-Authenticate", "Bearer".into()));
        return (Flow::Done, answer(r, "refused", Some("TOKEN_REQUIRED")));
    };
    let key = secrets.identity_key.unwrap_or_default();
    let claims = match token::verify(tok, key.as_bytes(), rules, now) {
        Ok(c) => c,
        Err(e) => {
            let mut r = error(cx, 401, "INVALID_TOKEN", e.client_message(), false, None);
            r.headers.push(("WWW-Authenticate", "Bearer".into()));
            return (Flow::Done, answer(r, "refused", Some("INVALID_TOKEN")));
        }
    };
    let tenant = match claims.claim(&ev.tenant_claim) {
        Some(t) if is_identifier(t) => t.to_string(),
        _ => {
            let msg = format!(
                "the token carries no valid `{}` claim naming the tenant",
                ev.tenant_claim
            );
            return (Flow::Done, refused(cx, 403, "TENANT_REQUIRED", &msg));
        }
    };
    // Nothing is stored unsealed.
    let Some(key) = secrets.seal_key.as_deref().and_then(SealKey::from_secret) else {
        return (
            Flow::Done,
            unavailable(
                cx,
                "EVENTS_KEY_MISSING",
                "the events encryption key is not configured; nothing was stored",
            ),
        );
    };
    let Some(nonce) = secrets.nonce else {
        return (
            Flow::Done,
            unavailable(
                cx,
                "ENTROPY_UNAVAILABLE",
                "no randomness for encryption; nothing was stored",
            ),
        );
    };
    if let Some(ct) = req.content_type {
        let essence = ct.split(';').next().unwrap_or("").trim();
        if !essence.eq_ignore_ascii_case("application/json") {
            return (
                Flow::Done,
                refused(
                    cx,
                    415,
                    "UNSUPPORTED_MEDIA_TYPE",
                    "events are JSON: send Content-Type: application/json",
                ),
            );
        }
    }
    if req
        .content_length
        .and_then(|v| v.trim().parse::<u64>().ok())
        .is_some_and(|n| n > ev.max_body_bytes)
    {
        return (Flow::Done, too_large(cx, ev));
    }
    (
        Flow::IngestBody { tenant, key, nonce },
        Step::ReadBody {
            max_bytes: ev.max_body_bytes,
        },
    )
}

fn too_large(cx: &Ctx<'_>, ev: &Events) -> Step {
    refused(
        cx,
        413,
        "BODY_TOO_LARGE",
        &format!("the body is over the {} byte limit", ev.max_body_bytes),
    )
}

/// What a flow hears back.
#[derive(Debug)]
pub enum Heard {
    Body(Result<Vec<u8>, BodyError>),
    Shards(Vec<Result<ShardReply, String>>),
}

impl Flow {
    pub fn step(&mut self, cx: &Ctx<'_>, now: Millis, heard: Heard) -> Step {
        let ev = cx.events;
        match (std::mem::replace(self, Flow::Done), heard) {
            (Flow::IngestBody { tenant, key, nonce }, Heard::Body(body)) => {
                let body = match body {
                    Ok(b) => b,
                    Err(BodyError::TooLarge) => return too_large(cx, ev),
                    Err(BodyError::Unreadable(_)) => {
                        return refused(
                            cx,
                            400,
                            "BODY_UNREADABLE",
                            "the request body could not be read",
                        )
                    }
                };
                let env = match envelope::parse(&body, ev) {
                    Ok(e) => e,
                    Err(rej) => {
                        return Step::Answer(Box::new(Answered {
                            rendered: error(
                                cx,
                                rej.status,
                                rej.code,
                                &rej.message,
                                false,
                                Some(&rej.field),
                            ),
                            outcome: "refused",
                            code: Some(rej.code.to_string()),
                            field: Some(rej.field),
                            event: None,
                            detail: None,
                        }))
                    }
                };
                let record = Box::new(Record::new(&env, &tenant, now));
                let sealed = seal::seal(&key, nonce, &aad_of(&record), env.payload.as_bytes());
                let claim = claim_of(&env, &tenant);
                let shard = proto::claim_shard(&env.event_id, ev.shards);
                *self = Flow::IngestClaim { record, sealed };
                Step::Call(vec![(shard, ShardRequest::Claim { claim })])
            }
            (Flow::IngestClaim { record, sealed }, Heard::Shards(replies)) => {
                match first(replies) {
                    Ok(ShardReply::Claim {
                        verdict: v @ (Verdict::Stored | Verdict::Duplicate),
                    }) => {
                        let shard =
                            proto::aggregate_shard(&record.tenant, &record.aggregate, ev.shards);
                        *self = Flow::IngestStore {
                            new_claim: (v == Verdict::Stored).then(|| claim_of_record(&record)),
                            record: record.clone(),
                        };
                        Step::Call(vec![(shard, ShardRequest::Store { record, sealed })])
                    }
                    Ok(ShardReply::Claim {
                        verdict:
                            Verdict::Refused {
                                status,
                                code,
                                message,
                            },
                    }) => with_event(
                        answer(
                            error(cx, status, &code, &message, false, Some("eventId")),
                            "refused",
                            Some(&code),
                        ),
                        record,
                    ),
                    other => with_event(store_failed(cx, other), record),
                }
            }
            (Flow::IngestStore { new_claim, record }, Heard::Shards(replies)) => {
                match first(replies) {
                    Ok(ShardReply::Store {
                        verdict: v @ (Verdict::Stored | Verdict::Duplicate),
                        record: Some(rec),
                    }) => {
                        let dup = v == Verdict::Duplicate;
                        let body = json!({
                            "eventId": rec.event_id,
                            "status": if dup { "duplicate" } else { "accepted" },
                            "state": rec.state,
                            "correlationId": cx.correlation_id,
                        });
                        let outcome = if dup { "duplicate" } else { "accepted" };
                        with_event(answer(json_answer(cx, 202, body), outcome, None), rec)
                    }
                    Ok(ShardReply::Store {
                        verdict:
                            Verdict::Refused {
                                status,
                                code,
                                message,
                            },
                        ..
                    }) => {
                        let refusal = with_event(
                            answer(
                                error(cx, status, &code, &message, false, Some("sequence")),
                                "refused",
                                Some(&code),
                            ),
                            record,
                        );
                        match new_claim {
                            // The event ID stays free for a corrected resend.
                            Some(claim) => {
                                let shard = proto::claim_shard(&claim.event_id, ev.shards);
                                *self = Flow::IngestUnclaim(Box::new(refusal));
                                Step::Call(vec![(shard, ShardRequest::Unclaim { claim })])
                            }
                            None => refusal,
                        }
                    }
                    other => with_event(store_failed(cx, other), record),
                }
            }
            (Flow::IngestUnclaim(step), Heard::Shards(_)) => *step,
            (Flow::List, Heard::Shards(replies)) => list_answer(cx, replies),
            (Flow::InspectLookup { key }, Heard::Shards(replies)) => match first(replies) {
                Ok(ShardReply::Lookup { claim: Some(c) }) => {
                    let shard = proto::aggregate_shard(&c.tenant, &c.aggregate, ev.shards);
                    *self = Flow::InspectGet { key };
                    Step::Call(vec![(
                        shard,
                        ShardRequest::Get {
                            event_id: c.event_id,
                        },
                    )])
                }
                Ok(ShardReply::Lookup { claim: None }) => not_found(cx),
                other => store_failed(cx, other),
            },
            (Flow::InspectGet { key }, Heard::Shards(replies)) => match first(replies) {
                Ok(ShardReply::Get {
                    record: Some(rec),
                    sealed,
                }) => {
                    let payload = open_redacted(ev, key.as_ref(), &rec, sealed.as_deref());
                    let body = json!({"event": rec, "payload": payload});
                    answer(json_answer(cx, 200, body), "ops", None)
                }
                Ok(ShardReply::Get { record: None, .. }) => not_found(cx),
                other => store_failed(cx, other),
            },
            (Flow::ReplayLookup, Heard::Shards(replies)) => match first(replies) {
                Ok(ShardReply::Lookup { claim: Some(c) }) => {
                    let shard = proto::aggregate_shard(&c.tenant, &c.aggregate, ev.shards);
                    *self = Flow::ReplayDo;
                    Step::Call(vec![(
                        shard,
                        ShardRequest::Replay {
                            event_id: c.event_id,
                        },
                    )])
                }
                Ok(ShardReply::Lookup { claim: None }) => not_found(cx),
                other => store_failed(cx, other),
            },
            (Flow::ReplayDo, Heard::Shards(replies)) => match first(replies) {
                Ok(ShardReply::Replay {
                    verdict: Verdict::Stored,
                    record: Some(rec),
                }) => answer(json_answer(cx, 202, json!({"replayed": rec})), "ops", None),
                Ok(ShardReply::Replay {
                    verdict:
                        Verdict::Refused {
                            status,
                            code,
                            message,
                        },
                    ..
                }) => refused(cx, status, &code, &message),
                other => store_failed(cx, other),
            },
            (Flow::Skip, Heard::Shards(replies)) => match first(replies) {
                Ok(ShardReply::Skip {
                    verdict: Verdict::Stored,
                    skip: Some(s),
                }) => answer(json_answer(cx, 200, json!({"skip": s.view()})), "ops", None),
                Ok(ShardReply::Skip {
                    verdict:
                        Verdict::Refused {
                            status,
                            code,
                            message,
                        },
                    ..
                }) => refused(cx, status, &code, &message),
                other => store_failed(cx, other),
            },
            (Flow::Status { mut base }, Heard::Shards(replies)) => {
                let mut shards = Vec::new();
                let mut unreachable = 0;
                for r in replies {
                    match r {
                        Ok(ShardReply::Stats { stats }) => shards.push(stats),
                        _ => unreachable += 1,
                    }
                }
                let summary = stats::summarize(now, &shards, unreachable, &ev.alerts);
                if let Value::Object(m) = &mut base {
                    m.insert("events".into(), json!(summary));
                }
                answer(json_answer(cx, 200, base), "ops", None)
            }
            (_, _) => unavailable(cx, "EVENTS_FLOW", "the request was already answered"),
        }
    }
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

/// The row identity bound into the seal.
pub fn aad_of(rec: &Record) -> Vec<u8> {
    seal::aad(&rec.event_id, &rec.tenant, &rec.aggregate, rec.sequence)
}

fn claim_of_record(r: &Record) -> Claim {
    Claim {
        event_id: r.event_id.clone(),
        tenant: r.tenant.clone(),
        aggregate: r.aggregate.clone(),
        sequence: r.sequence,
    }
}

fn claim_of(env: &Envelope, tenant: &str) -> Claim {
    Claim {
        event_id: env.event_id.clone(),
        tenant: tenant.to_string(),
        aggregate: env.aggregate_id.clone(),
        sequence: env.sequence,
    }
}

/// The payload for `events inspect`: opened and redacted, or why it cannot be shown.
fn open_redacted(ev: &Events, key: Option<&SealKey>, rec: &Record, sealed: Option<&[u8]>) -> Value {
    let Some(sealed) = sealed else {
        return json!({"unavailable": "erased after the retention period"});
    };
    let Some(key) = key else {
        return json!({"unavailable": "the encryption key is not configured"});
    };
    match seal::open(key, &aad_of(rec), sealed) {
        Ok(plain) => match serde_json::from_slice::<Value>(&plain) {
            Ok(v) => redact(v, &ev.redact),
            Err(_) => json!({"unavailable": "the opened payload is not JSON"}),
        },
        Err(e) => json!({"unavailable": e.to_string()}),
    }
}

fn ops(cx: &Ctx<'_>, req: &Request<'_>, secrets: Secrets) -> (Flow, Step) {
    let ev = cx.events;
    if !admin::authorized(req.authorization, secrets.admin.as_deref()) {
        let mut r = admin::unauthorized(&cx.meta());
        r.body = r
            .body
            .replace("the status endpoint needs", "the events endpoints need");
        return (Flow::Done, answer(r, "refused", Some("ADMIN_UNAUTHORIZED")));
    }
    let q: Vec<(String, String)> = form_urlencoded::parse(req.query.as_bytes())
        .into_owned()
        .collect();
    let get = |k: &str| q.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    let rest = req.path.strip_prefix(OPS_PATH).unwrap_or("");
    let segments: Vec<&str> = rest.split('/').filter(|s| !s.is_empty()).collect();
    let post = req.method.eq_ignore_ascii_case("POST");
    let getm = req.method.eq_ignore_ascii_case("GET");
    match segments.as_slice() {
        [] if getm => {
            let state = match get("state") {
                None | Some("") => None,
                Some(s) => match State::parse(s) {
                    Some(st) => Some(st),
                    None => {
                        return (Flow::Done, refused(cx, 400, "BAD_STATE", "state is PENDING, DELIVERED or DEAD_LETTER"))
                    }
                },
            };
            let limit = get("limit")
                .and_then(|v| v.parse::<u32>().ok())
                .unwrap_or(100)
                .clamp(1, proto::MAX_LIST);
            let offset = get("offset").and_then(|v| v.parse::<u32>().ok()).unwrap_or(0);
            let filter = Filter {
                state,
                tenant: get("tenant").map(str::to_string),
                aggregate: get("aggregate").map(str::to_string),
                offset,
                limit,
            };
            let shards = match get("shard").map(|s| s.parse::<u32>()) {
                Some(Ok(k)) if k < ev.shards => vec![format!("agg-{k}")],
                Some(_) => {
                    return (Flow::Done, refused(cx, 400, "BAD_SHARD", &format!("shard is 0 to {}", ev.shards - 1)))
                }
                None => proto::aggregate_shards(ev.shards),
            };
            let calls = shards
                .into_iter()
                .map(|s| (s, ShardRequest::List { filter: filter.clone() }))
                .collect();
            (Flow::List, Step::Call(calls))
        }
        ["skip"] if post => {
            let (Some(tenant), Some(aggregate)) = (get("tenant"), get("aggregate")) else {
                return (Flow::Done, refused(cx, 400, "MISSING_PARAMETER", "skip needs ?tenant=…&aggregate=…"));
            };
            let shard = proto::aggregate_shard(tenant, aggregate, ev.shards);
            let call = ShardRequest::Skip {
                tenant: tenant.to_string(),
                aggregate: aggregate.to_string(),
            };
            (Flow::Skip, Step::Call(vec![(shard, call)]))
        }
        [id] if getm && is_identifier(id) => {
            let key = secrets.seal_key.as_deref().and_then(SealKey::from_secret);
            let shard = proto::claim_shard(id, ev.shards);
            (
                Flow::InspectLookup { key },
                Step::Call(vec![(shard, ShardRequest::Lookup { event_id: id.to_string() })]),
            )
        }
        [id, "replay"] if post && is_identifier(id) => {
            if !ev.replay {
                return (
                    Flow::Done,
                    refused(cx, 403, "REPLAY_DISABLED", "replay is switched off in this policy (`[events] replay = false`); switch it on once replay is tested"),
                );
            }
            let shard = proto::claim_shard(id, ev.shards);
            (
                Flow::ReplayLookup,
                Step::Call(vec![(shard, ShardRequest::Lookup { event_id: id.to_string() })]),
            )
        }
        _ => (
            Flow::Done,
            refused(cx, 404, "NO_SUCH_ENDPOINT", "events endpoints: GET /__understudy/events[?state=&tenant=&aggregate=&shard=&offset=&limit=], GET …/{eventId}, POST …/{eventId}/replay, POST …/skip?tenant=&aggregate="),
        ),
    }
}

fn list_answer(cx: &Ctx<'_>, replies: Vec<Result<ShardReply, String>>) -> Step {
    let mut records = Vec::new();
    let mut more = false;
    let mut unreachable = 0;
    for r in replies {
        match r {
            Ok(ShardReply::List {
                records: rs,
                more: m,
            }) => {
                records.extend(rs);
                more |= m;
            }
            _ => unreachable += 1,
        }
    }
    records.sort_by(|a, b| (a.stored_at, &a.event_id).cmp(&(b.stored_at, &b.event_id)));
    let body = json!({"events": records, "more": more, "shards_unreachable": unreachable});
    answer(json_answer(cx, 200, body), "ops", None)
}

/// The status endpoint's events block: ask every shard for its stats.
pub fn status(base: Value, events: &Events) -> (Flow, Step) {
    let calls = proto::aggregate_shards(events.shards)
        .into_iter()
        .map(|s| (s, ShardRequest::Stats))
        .collect();
    (Flow::Status { base }, Step::Call(calls))
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
