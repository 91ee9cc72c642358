//! [V-OPS] The operators' endpoints behind the `[admin]` secret: list, inspect (payload
//! opened and redacted), replay a dead letter, skip a held aggregate, and the events block
//! of the status endpoint.

use serde_json::{json, Value};

use super::{
    answer, first, json_answer, not_found, refused, store_failed, with_field, Ctx, Flow, Io,
    Request, Secrets, Step, OPS_PATH,
};
use crate::admin;
use crate::events::envelope::is_identifier;
use crate::events::outbox::{Record, State};
use crate::events::protocol::{self as proto, Filter, ShardReply, ShardRequest, Verdict};
use crate::events::redact::redact;
use crate::events::seal::{self, SealKey};
use crate::events::stats;
use crate::policy::events::Events;
use crate::time::Millis;

type Replies = Vec<Result<ShardReply, String>>;

pub(super) fn start(cx: &Ctx<'_>, req: &Request<'_>, secrets: Secrets) -> (Flow, Step) {
    let ev = cx.events;
    if !admin::authorized(req.authorization, secrets.admin.as_deref()) {
        let mut r = admin::unauthorized(&cx.meta());
        r.body = r
            .body
            .replace("the status endpoint needs", "the events endpoints need");
        // The events endpoints' one refusal shape (see `error`).
        with_field(&mut r, "");
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
            (Flow::List, Step::Io(Io::Call(calls)))
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
            (Flow::Skip, Step::Io(Io::Call(vec![(shard, call)])))
        }
        [id] if getm && is_identifier(id) => {
            let key = secrets.seal_key.as_deref().and_then(SealKey::from_secret);
            let shard = proto::claim_shard(id, ev.shards);
            (
                Flow::InspectLookup { key },
                Step::Io(Io::Call(vec![(shard, ShardRequest::Lookup { event_id: id.to_string() })])),
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
                Step::Io(Io::Call(vec![(shard, ShardRequest::Lookup { event_id: id.to_string() })])),
            )
        }
        _ => (
            Flow::Done,
            refused(cx, 404, "NO_SUCH_ENDPOINT", "events endpoints: GET /__understudy/events[?state=&tenant=&aggregate=&shard=&offset=&limit=], GET …/{eventId}, POST …/{eventId}/replay, POST …/skip?tenant=&aggregate="),
        ),
    }
}

pub(super) fn list_answer(cx: &Ctx<'_>, replies: Vec<Result<ShardReply, String>>) -> Step {
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
    crate::sort::sort_by(&mut records, |a, b| {
        (a.stored_at, &a.event_id).cmp(&(b.stored_at, &b.event_id))
    });
    let body = json!({"events": records, "more": more, "shards_unreachable": unreachable});
    answer(json_answer(cx, 200, body), "ops", None)
}

/// The status endpoint's events block: ask every shard for its stats.
pub fn status(base: Value, events: &Events) -> (Flow, Step) {
    let calls = proto::aggregate_shards(events.shards)
        .into_iter()
        .map(|s| (s, ShardRequest::Stats))
        .collect();
    (Flow::Status { base }, Step::Io(Io::Call(calls)))
}

/// `GET …/{eventId}`: the claim shard says where the event lives; ask that shard.
pub(super) fn inspect_lookup(
    next: &mut Flow,
    cx: &Ctx<'_>,
    key: Option<SealKey>,
    replies: Replies,
) -> Step {
    match first(replies) {
        Ok(ShardReply::Lookup { claim: Some(c) }) => {
            let shard = proto::aggregate_shard(&c.tenant, &c.aggregate, cx.events.shards);
            *next = Flow::InspectGet { key };
            Step::Io(Io::Call(vec![(
                shard,
                ShardRequest::Get {
                    event_id: c.event_id,
                },
            )]))
        }
        Ok(ShardReply::Lookup { claim: None }) => not_found(cx),
        other => store_failed(cx, other),
    }
}

/// The event and its payload, opened and redacted.
pub(super) fn inspect_get(cx: &Ctx<'_>, key: Option<SealKey>, replies: Replies) -> Step {
    match first(replies) {
        Ok(ShardReply::Get {
            record: Some(rec),
            sealed,
        }) => {
            let payload = open_redacted(cx.events, key.as_ref(), &rec, sealed.as_deref());
            let body = json!({"event": rec, "payload": payload});
            answer(json_answer(cx, 200, body), "ops", None)
        }
        Ok(ShardReply::Get { record: None, .. }) => not_found(cx),
        other => store_failed(cx, other),
    }
}

/// `POST …/{eventId}/replay`: find the event's shard, then replay it there.
pub(super) fn replay_lookup(next: &mut Flow, cx: &Ctx<'_>, replies: Replies) -> Step {
    match first(replies) {
        Ok(ShardReply::Lookup { claim: Some(c) }) => {
            let shard = proto::aggregate_shard(&c.tenant, &c.aggregate, cx.events.shards);
            *next = Flow::ReplayDo;
            Step::Io(Io::Call(vec![(
                shard,
                ShardRequest::Replay {
                    event_id: c.event_id,
                },
            )]))
        }
        Ok(ShardReply::Lookup { claim: None }) => not_found(cx),
        other => store_failed(cx, other),
    }
}

pub(super) fn replay_do(cx: &Ctx<'_>, replies: Replies) -> Step {
    match first(replies) {
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
    }
}

/// `POST …/skip`: the held aggregate moves past its dead letter.
pub(super) fn skipped(cx: &Ctx<'_>, replies: Replies) -> Step {
    match first(replies) {
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
    }
}

/// The status endpoint's answer with every shard's stats summarised into its events block.
pub(super) fn status_answer(cx: &Ctx<'_>, now: Millis, mut base: Value, replies: Replies) -> Step {
    let mut shards = Vec::new();
    let mut unreachable = 0;
    for r in replies {
        match r {
            Ok(ShardReply::Stats { stats }) => shards.push(stats),
            _ => unreachable += 1,
        }
    }
    let summary = stats::summarize(now, &shards, unreachable, &cx.events.alerts);
    if let Value::Object(m) = &mut base {
        m.insert("events".into(), json!(summary));
    }
    answer(json_answer(cx, 200, base), "ops", None)
}

/// The payload for `events inspect`: opened and redacted, or why it cannot be shown.
fn open_redacted(ev: &Events, key: Option<&SealKey>, rec: &Record, sealed: Option<&[u8]>) -> Value {
    let Some(sealed) = sealed else {
        return json!({"unavailable": "erased after the retention period"});
    };
    let Some(key) = key else {
        return json!({"unavailable": "the encryption key is not configured"});
    };
    match seal::open(key, &super::aad_of(rec), sealed) {
        Ok(plain) => match serde_json::from_slice::<Value>(&plain) {
            Ok(v) => redact(v, &ev.redact),
            Err(_) => json!({"unavailable": "the opened payload is not JSON"}),
        },
        Err(e) => json!({"unavailable": e.to_string()}),
    }
}
