//! [V-INGEST] The producers' path: token → tenant → body → envelope → seal → claim → store
//! → `202`. A refused store releases the claim it made, so a corrected resend is accepted.

use serde_json::json;

use super::{
    answer, error, first, json_answer, refused, store_failed, unavailable, with_event, Answered,
    BodyError, Ctx, Flow, Io, Request, Secrets, Step,
};
use crate::events::envelope::{self, is_identifier, Envelope};
use crate::events::outbox::{self, Claim, Record};
use crate::events::protocol::{self as proto, ShardReply, ShardRequest, Verdict};
use crate::events::seal::{self, SealKey};
use crate::policy::events::Events;
use crate::time::Millis;
use crate::token;

/// What sealing the body needs, settled before it is read.
pub(super) struct Sealing {
    pub tenant: String,
    pub key: SealKey,
    pub nonce: [u8; 12],
}

pub(super) fn start(
    cx: &Ctx<'_>,
    now: Millis,
    req: &Request<'_>,
    secrets: Secrets,
) -> (Flow, Step) {
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
    // The media type is required: a body without one is not known to be JSON (a form or a
    // text body parsed as JSON by chance would be accepted otherwise).
    let essence = req
        .content_type
        .map(|ct| ct.split(';').next().unwrap_or("").trim());
    {
        if !essence.is_some_and(|e| e.eq_ignore_ascii_case("application/json")) {
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
        Step::Io(Io::ReadBody {
            max_bytes: ev.max_body_bytes,
        }),
    )
}

pub(super) fn too_large(cx: &Ctx<'_>, ev: &Events) -> Step {
    refused(
        cx,
        413,
        "BODY_TOO_LARGE",
        &format!("the body is over the {} byte limit", ev.max_body_bytes),
    )
}

/// The body arrived: parse the envelope, seal the payload, claim the event ID.
pub(super) fn body(
    next: &mut Flow,
    cx: &Ctx<'_>,
    now: Millis,
    s: Sealing,
    body: Result<Vec<u8>, BodyError>,
) -> Step {
    let ev = cx.events;
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
    let record = Box::new(Record::new(&env, &s.tenant, &s.key, now));
    let sealed = seal::seal(&s.key, s.nonce, &aad_of(&record), env.payload.as_bytes());
    let claim = claim_of(&env, &s.tenant);
    let shard = proto::claim_shard(&env.event_id, ev.shards);
    *next = Flow::IngestClaim { record, sealed };
    Step::Io(Io::Call(vec![(shard, ShardRequest::Claim { claim })]))
}

/// The claim shard answered: store the event with its aggregate (a duplicate too: the
/// store answers with the stored record), or answer the refusal.
pub(super) fn claimed(
    next: &mut Flow,
    cx: &Ctx<'_>,
    record: Box<Record>,
    sealed: Vec<u8>,
    replies: Vec<Result<ShardReply, String>>,
) -> Step {
    match first(replies) {
        Ok(ShardReply::Claim {
            verdict: v @ (Verdict::Stored | Verdict::Duplicate),
        }) => {
            let shard = proto::aggregate_shard(&record.tenant, &record.aggregate, cx.events.shards);
            *next = Flow::IngestStore {
                new_claim: (v == Verdict::Stored).then(|| claim_of_record(&record)),
                record: record.clone(),
            };
            Step::Io(Io::Call(vec![(
                shard,
                ShardRequest::Store { record, sealed },
            )]))
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

/// The aggregate shard answered: `202` (accepted or duplicate), or the refusal — after
/// releasing the claim this request made (an ID reused with other contents holds the
/// claim of the event accepted first, so there is none to release).
pub(super) fn stored(
    next: &mut Flow,
    cx: &Ctx<'_>,
    new_claim: Option<Claim>,
    record: Box<Record>,
    replies: Vec<Result<ShardReply, String>>,
) -> Step {
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
            let field = outbox::conflict_field(&code);
            let refusal = with_event(
                answer(
                    error(cx, status, &code, &message, false, Some(field)),
                    "refused",
                    Some(&code),
                ),
                record,
            );
            match new_claim {
                // The event ID stays free for a corrected resend.
                Some(claim) => {
                    let shard = proto::claim_shard(&claim.event_id, cx.events.shards);
                    *next = Flow::IngestUnclaim(Box::new(refusal));
                    Step::Io(Io::Call(vec![(shard, ShardRequest::Unclaim { claim })]))
                }
                None => refusal,
            }
        }
        other => with_event(store_failed(cx, other), record),
    }
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
