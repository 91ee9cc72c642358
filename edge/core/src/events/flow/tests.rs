//! Event requests through the whole engine, with the shards answered by hand.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::bake::Bake;
use crate::engine::{Command, Engine, Incoming, Input, Reply};
use crate::events::flow::{Heard, Io};
use crate::events::outbox::{Arrival, Record, State};
use crate::events::protocol::{ShardReply, ShardRequest, Verdict};
use crate::events::stats::ShardStats;
use crate::events::testing::{events_policy, MemShard};
use crate::policy::{Admin, IdentityRules};
use crate::testing::{seed_policy, NOW};
use crate::time::Millis;

const KEY: &str = "identity-key";

fn bake(replay: bool) -> Bake {
    let mut p = seed_policy();
    p.identity = Some(IdentityRules {
        secret: "ID_KEY".into(),
        issuer: "https://auth.example".into(),
        audience: "orders".into(),
        leeway_ms: 0,
    });
    p.admin = Some(Admin {
        path: "/__understudy/status".into(),
        secret: "ADMIN".into(),
    });
    let mut ev = events_policy();
    ev.replay = replay;
    p.events = Some(ev);
    Bake {
        release_id: "r-test".into(),
        policy_hash: "p".into(),
        catalog_hash: "c".into(),
        validated_at_ms: NOW,
        compiler_version: "0".into(),
        policy: p,
        catalog: None,
    }
}

fn env() -> BTreeMap<String, String> {
    BTreeMap::from([
        ("ID_KEY".to_string(), KEY.to_string()),
        ("ADMIN".to_string(), "admin-secret".to_string()),
        ("EVENTS_KEY".to_string(), "events-key".to_string()),
    ])
}

fn token(tenant: Option<&str>) -> String {
    let mut claims = json!({"iss": "https://auth.example", "aud": "orders", "exp": NOW / 1000 + 600, "sub": "svc"});
    if let Some(t) = tenant {
        claims["tenant"] = json!(t);
    }
    format!("Bearer {}", crate::token::sign(&claims, KEY.as_bytes()))
}

fn event_body(id: &str, seq: u64) -> Vec<u8> {
    json!({
        "eventId": id, "type": "order.placed", "schemaVersion": 2, "aggregateId": "order-7",
        "sequence": seq, "occurredAt": "2026-11-30T12:00:00Z", "correlationId": "c-77",
        "payload": {"orderId": "o-7", "total": 12.5, "currency": "EUR", "email": "ann@example.com",
                    "card": {"number": "4242424242424242"}}
    })
    .to_string()
    .into_bytes()
}

/// A fake set of shards: claims in a map, events in a [`MemShard`] (one for all shards).
#[derive(Default)]
struct Shards {
    claims: BTreeMap<String, crate::events::outbox::Claim>,
    outbox: MemShard,
    sealed: BTreeMap<String, Vec<u8>>,
    calls: Vec<(String, ShardRequest)>,
    fail: bool,
}

impl Shards {
    fn answer(&mut self, shard: &str, req: ShardRequest) -> Result<ShardReply, String> {
        self.calls.push((shard.to_string(), req.clone()));
        if self.fail {
            return Err("connection lost".into());
        }
        let verdict = |a: Arrival| match a {
            Arrival::Store => Verdict::Stored,
            Arrival::Duplicate => Verdict::Duplicate,
            Arrival::Conflict(code, message) => Verdict::Refused {
                status: 409,
                code: code.into(),
                message,
            },
        };
        Ok(match req {
            ShardRequest::Claim { claim } => {
                let a = crate::events::outbox::claim(&claim, self.claims.get(&claim.event_id));
                if a == Arrival::Store {
                    self.claims.insert(claim.event_id.clone(), claim);
                }
                ShardReply::Claim {
                    verdict: verdict(a),
                }
            }
            ShardRequest::Unclaim { claim } => {
                if self.claims.get(&claim.event_id) == Some(&claim) {
                    self.claims.remove(&claim.event_id);
                }
                ShardReply::Claim {
                    verdict: Verdict::Stored,
                }
            }
            ShardRequest::Lookup { event_id } => ShardReply::Lookup {
                claim: self.claims.get(&event_id).cloned(),
            },
            ShardRequest::Store { record, sealed } => {
                let id = record.event_id.clone();
                let a = self.outbox.ingest(*record);
                if a == Arrival::Store {
                    self.sealed.insert(id.clone(), sealed);
                }
                ShardReply::Store {
                    verdict: verdict(a),
                    record: self.outbox.rows.get(&id).cloned(),
                }
            }
            ShardRequest::Get { event_id } => ShardReply::Get {
                record: self.outbox.rows.get(&event_id).cloned(),
                sealed: self.sealed.get(&event_id).cloned(),
            },
            ShardRequest::List { .. } => ShardReply::List {
                records: self.outbox.rows.values().cloned().collect(),
                more: false,
            },
            ShardRequest::Stats => ShardReply::Stats {
                stats: ShardStats {
                    dead_letters: 1,
                    ..Default::default()
                },
            },
            other => ShardReply::Error {
                message: format!("not faked: {other:?}"),
            },
        })
    }
}

fn request(
    e: &mut Engine<'_>,
    shards: &mut Shards,
    method: &str,
    path: &str,
    headers: &[(&str, String)],
    body: &[u8],
) -> Reply {
    let headers: Vec<(String, String)> = headers
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    let (path, query) = path.split_once('?').unwrap_or((path, ""));
    let req = Incoming {
        method,
        path,
        query,
        headers: &headers,
    };
    let now = Millis(NOW);
    let (mut f, mut out) = e.start(now, &req, &env(), 9);
    for _ in 0..10 {
        if let Some(r) = out.reply() {
            return r.clone();
        }
        let Some((io, op)) = out.commands.iter().find_map(|c| match c {
            Command::Events { io, op } => Some((*io, op.clone())),
            _ => None,
        }) else {
            panic!("unexpected {out:?}")
        };
        let heard = match op {
            Io::ReadBody { max_bytes } => Heard::Body(if body.len() as u64 > max_bytes {
                Err(crate::events::flow::BodyError::TooLarge)
            } else {
                Ok(body.to_vec())
            }),
            Io::Call(calls) => Heard::Shards(
                calls
                    .into_iter()
                    .map(|(s, r)| shards.answer(&s, r))
                    .collect(),
            ),
        };
        out = e.step(&mut f, now, Input::Heard(io, heard));
    }
    panic!("no answer")
}

fn post(e: &mut Engine<'_>, s: &mut Shards, tenant: Option<&str>, body: &[u8]) -> Reply {
    request(
        e,
        s,
        "POST",
        "/v1/events",
        &[
            ("Authorization", token(tenant)),
            ("Content-Type", "application/json".into()),
        ],
        body,
    )
}

fn json_of(r: &Reply) -> Value {
    serde_json::from_str(&r.body).unwrap()
}

#[test]
fn an_event_is_claimed_then_stored_sealed_before_the_202() {
    let b = bake(false);
    let mut e = Engine::new(&b).unwrap();
    let mut s = Shards::default();
    let r = post(&mut e, &mut s, Some("acme"), &event_body("evt-1", 1));
    assert_eq!(r.status, 202, "{}", r.body);
    assert_eq!(json_of(&r)["status"], "accepted");
    assert_eq!(s.calls.len(), 2);
    assert!(s.calls[0].0.starts_with("ids-") && matches!(s.calls[0].1, ShardRequest::Claim { .. }));
    assert!(s.calls[1].0.starts_with("agg-"));
    let rec = &s.outbox.rows["evt-1"];
    assert_eq!((rec.tenant.as_str(), rec.state), ("acme", State::Pending));
    // The stored bytes never contain the payload.
    let sealed = s.sealed["evt-1"].clone();
    for plain in [&b"ann@example.com"[..], b"4242424242424242", b"EUR"] {
        assert!(!sealed.windows(plain.len()).any(|w| w == plain));
    }
    // The log line names the event, never its payload.
    assert!(
        r.log.contains("evt-1") && r.log.contains("\"tenant\":\"acme\""),
        "{}",
        r.log
    );
    assert!(!r.log.contains("ann@example.com") && !r.log.contains("4242"));
    assert_eq!(e.counters().events.get("accepted"), Some(&1));
}

#[test]
fn a_repeated_event_id_is_acknowledged_once_and_another_tenant_is_refused() {
    let b = bake(false);
    let mut e = Engine::new(&b).unwrap();
    let mut s = Shards::default();
    post(&mut e, &mut s, Some("acme"), &event_body("evt-1", 1));
    let again = post(&mut e, &mut s, Some("acme"), &event_body("evt-1", 1));
    assert_eq!(
        (again.status, json_of(&again)["status"].as_str()),
        (202, Some("duplicate"))
    );
    assert_eq!(s.outbox.rows.len(), 1);
    let other = post(&mut e, &mut s, Some("globex"), &event_body("evt-1", 1));
    assert_eq!(other.status, 409);
    assert_eq!(json_of(&other)["code"], "EVENT_ID_REUSED");
    assert_eq!(json_of(&other)["field"], "eventId");
    assert_eq!(s.outbox.rows["evt-1"].tenant, "acme", "never merged");
}

/// The same event ID with another payload was answered `202 "duplicate"` and the payload
/// dropped; it is refused with 409 naming `eventId`, and a resend spaced differently is
/// still the same event.
#[test]
fn an_event_id_reused_with_another_payload_is_refused_and_a_respaced_resend_is_not() {
    let b = bake(false);
    let mut e = Engine::new(&b).unwrap();
    let mut s = Shards::default();
    let first = event_body("evt-1", 1);
    post(&mut e, &mut s, Some("acme"), &first);
    let mut changed: Value = serde_json::from_slice(&first).unwrap();
    changed["payload"]["total"] = json!(99);
    let reused = post(&mut e, &mut s, Some("acme"), changed.to_string().as_bytes());
    assert_eq!(reused.status, 409, "{}", reused.body);
    let body = json_of(&reused);
    assert_eq!(
        (&body["code"], &body["field"], &body["retryable"]),
        (&json!("EVENT_ID_REUSED"), &json!("eventId"), &json!(false))
    );
    assert!(
        body["message"].as_str().unwrap().contains("`payload`"),
        "{body}"
    );
    assert!(
        s.claims.contains_key("evt-1"),
        "the first event keeps its claim"
    );
    let pretty =
        serde_json::to_vec_pretty(&serde_json::from_slice::<Value>(&first).unwrap()).unwrap();
    let again = post(&mut e, &mut s, Some("acme"), &pretty);
    assert_eq!(
        (again.status, json_of(&again)["status"].as_str()),
        (202, Some("duplicate"))
    );
    assert_eq!(s.outbox.rows.len(), 1);
    assert_eq!(e.counters().events.get("refused"), Some(&1));
}

#[test]
fn a_sequence_taken_by_another_event_is_refused_and_the_event_id_stays_free() {
    let b = bake(false);
    let mut e = Engine::new(&b).unwrap();
    let mut s = Shards::default();
    post(&mut e, &mut s, Some("acme"), &event_body("evt-1", 1));
    let taken = post(&mut e, &mut s, Some("acme"), &event_body("evt-2", 1));
    assert_eq!(taken.status, 409, "{}", taken.body);
    assert_eq!(json_of(&taken)["code"], "SEQUENCE_TAKEN");
    assert_eq!(json_of(&taken)["retryable"], false);
    assert!(!s.claims.contains_key("evt-2"), "the claim was released");
    // The producer fixes the sequence and sends the same event ID again.
    let fixed = post(&mut e, &mut s, Some("acme"), &event_body("evt-2", 2));
    assert_eq!(fixed.status, 202, "{}", fixed.body);
}

#[test]
fn callers_are_authenticated_and_need_a_tenant() {
    let b = bake(false);
    let mut e = Engine::new(&b).unwrap();
    let mut s = Shards::default();
    let none = request(
        &mut e,
        &mut s,
        "POST",
        "/v1/events",
        &[],
        &event_body("e", 1),
    );
    assert_eq!(none.status, 401);
    let bad = request(
        &mut e,
        &mut s,
        "POST",
        "/v1/events",
        &[("Authorization", "Bearer x.y.z".into())],
        &event_body("e", 1),
    );
    assert_eq!(
        (bad.status, json_of(&bad)["code"].as_str()),
        (401, Some("INVALID_TOKEN"))
    );
    let no_tenant = post(&mut e, &mut s, None, &event_body("e", 1));
    assert_eq!(
        (no_tenant.status, json_of(&no_tenant)["code"].as_str()),
        (403, Some("TENANT_REQUIRED"))
    );
    let get = request(
        &mut e,
        &mut s,
        "GET",
        "/v1/events",
        &[("Authorization", token(Some("acme")))],
        b"",
    );
    assert_eq!(get.status, 405);
    assert!(s.calls.is_empty(), "nothing reached a shard");
}

#[test]
fn bad_envelopes_are_refused_naming_the_field_and_large_bodies_with_413() {
    let b = bake(false);
    let mut e = Engine::new(&b).unwrap();
    let mut s = Shards::default();
    let mut v: Value = serde_json::from_slice(&event_body("e", 1)).unwrap();
    v["schemaVersion"] = json!(7);
    let r = post(&mut e, &mut s, Some("acme"), v.to_string().as_bytes());
    assert_eq!(r.status, 422);
    assert_eq!(json_of(&r)["field"], "schemaVersion");
    assert_eq!(json_of(&r)["retryable"], false);
    let big = vec![b' '; 70 * 1024];
    assert_eq!(post(&mut e, &mut s, Some("acme"), &big).status, 413);
    let r = request(
        &mut e,
        &mut s,
        "POST",
        "/v1/events",
        &[
            ("Authorization", token(Some("acme"))),
            ("Content-Type", "application/json".into()),
            ("Content-Length", "999999".into()),
        ],
        b"",
    );
    assert_eq!(r.status, 413);
    assert!(s.calls.is_empty());
}

/// A POST without `Content-Type` was accepted while `text/plain` got 415: the media type is
/// required, as the README says.
#[test]
fn an_event_without_its_media_type_is_refused_with_415() {
    let b = bake(false);
    let mut e = Engine::new(&b).unwrap();
    let mut s = Shards::default();
    let r = request(
        &mut e,
        &mut s,
        "POST",
        "/v1/events",
        &[("Authorization", token(Some("acme")))],
        &event_body("evt-1", 1),
    );
    assert_eq!(r.status, 415);
    assert_eq!(json_of(&r)["code"], "UNSUPPORTED_MEDIA_TYPE");
    assert!(s.calls.is_empty(), "nothing stored");
}

#[test]
fn a_store_that_fails_answers_503_and_acknowledges_nothing() {
    let b = bake(false);
    let mut e = Engine::new(&b).unwrap();
    let mut s = Shards {
        fail: true,
        ..Default::default()
    };
    let r = post(&mut e, &mut s, Some("acme"), &event_body("evt-1", 1));
    assert_eq!(r.status, 503);
    assert_eq!(json_of(&r)["retryable"], true);
    assert_eq!(r.header("retry-after"), Some("1"));
    assert!(
        r.log.contains("\"detail\":\"connection lost\""),
        "{}",
        r.log
    );
    // The retry with the same eventId goes through.
    s.fail = false;
    assert_eq!(
        post(&mut e, &mut s, Some("acme"), &event_body("evt-1", 1)).status,
        202
    );
}

#[test]
fn without_the_encryption_key_nothing_is_stored() {
    let b = bake(false);
    let mut e = Engine::new(&b).unwrap();
    let mut s = Shards::default();
    let mut no_key = env();
    no_key.remove("EVENTS_KEY");
    let headers = vec![("Authorization".to_string(), token(Some("acme")))];
    let req = Incoming {
        method: "POST",
        path: "/v1/events",
        query: "",
        headers: &headers,
    };
    let (_, out) = e.start(Millis(NOW), &req, &no_key, 1);
    let r = out.reply().cloned().expect("an answer");
    assert_eq!(r.status, 503);
    assert!(r.body.contains("EVENTS_KEY_MISSING"));
    assert!(s.answer("x", ShardRequest::Stats).is_ok());
}

#[test]
fn operators_need_the_admin_token_and_replay_is_refused_while_switched_off() {
    let b = bake(false);
    let mut e = Engine::new(&b).unwrap();
    let mut s = Shards::default();
    post(&mut e, &mut s, Some("acme"), &event_body("evt-1", 1));
    let admin = [("Authorization", "Bearer admin-secret".to_string())];
    assert_eq!(
        request(&mut e, &mut s, "GET", "/__understudy/events", &[], b"").status,
        401
    );
    let list = request(
        &mut e,
        &mut s,
        "GET",
        "/__understudy/events?state=PENDING",
        &admin,
        b"",
    );
    assert_eq!(list.status, 200);
    let list_calls = s
        .calls
        .iter()
        .filter(|(_, r)| matches!(r, ShardRequest::List { .. }))
        .count();
    assert_eq!(list_calls, 4, "one per aggregate shard");
    let replay = request(
        &mut e,
        &mut s,
        "POST",
        "/__understudy/events/evt-1/replay",
        &admin,
        b"",
    );
    assert_eq!(
        (replay.status, json_of(&replay)["code"].as_str()),
        (403, Some("REPLAY_DISABLED"))
    );
}

#[test]
fn inspect_shows_the_payload_with_the_redacted_fields_masked() {
    let b = bake(true);
    let mut e = Engine::new(&b).unwrap();
    let mut s = Shards::default();
    post(&mut e, &mut s, Some("acme"), &event_body("evt-1", 1));
    let admin = [("Authorization", "Bearer admin-secret".to_string())];
    let r = request(
        &mut e,
        &mut s,
        "GET",
        "/__understudy/events/evt-1",
        &admin,
        b"",
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let v = json_of(&r);
    assert_eq!(v["payload"]["orderId"], "o-7");
    assert_eq!(v["payload"]["email"], "[REDACTED]");
    assert_eq!(v["payload"]["card"]["number"], "[REDACTED]");
    assert!(!r.body.contains("ann@example.com") && !r.log.contains("ann@example.com"));
    let missing = request(
        &mut e,
        &mut s,
        "GET",
        "/__understudy/events/nope",
        &admin,
        b"",
    );
    assert_eq!(missing.status, 404);
}

#[test]
fn the_status_endpoint_carries_the_events_block_and_its_alerts() {
    let b = bake(false);
    let mut e = Engine::new(&b).unwrap();
    let mut s = Shards::default();
    let admin = [("Authorization", "Bearer admin-secret".to_string())];
    let r = request(&mut e, &mut s, "GET", "/__understudy/status", &admin, b"");
    assert_eq!(r.status, 200);
    let v = json_of(&r);
    assert_eq!(v["events"]["dead_letters"], 4);
    assert_eq!(v["events"]["alerts"][0]["name"], "EVENTS_DEAD_LETTERS");
    assert!(v["breaker"].is_object());
    let _ = Record::new;
}

#[test]
fn every_refusal_carries_the_field_key_empty_when_no_envelope_field_is_at_fault() {
    // README: bad input gets `{code, message, correlationId, retryable: false, field}`, so a
    // producer reads `field` from every 4xx, not only from the envelope's own refusals.
    let b = bake(false);
    let mut e = Engine::new(&b).unwrap();
    let mut s = Shards::default();
    let body = event_body("evt-f", 1);
    let json = ("Content-Type", "application/json".to_string());
    let mut answers = vec![
        request(
            &mut e,
            &mut s,
            "GET",
            "/v1/events",
            &[("Authorization", token(Some("acme")))],
            b"",
        ),
        request(&mut e, &mut s, "POST", "/v1/events", &[], &body),
        request(
            &mut e,
            &mut s,
            "POST",
            "/v1/events",
            &[("Authorization", "Bearer x.y.z".into())],
            &body,
        ),
        post(&mut e, &mut s, None, &body),
        request(
            &mut e,
            &mut s,
            "POST",
            "/v1/events",
            &[
                ("Authorization", token(Some("acme"))),
                ("Content-Type", "text/plain".into()),
            ],
            &body,
        ),
        request(
            &mut e,
            &mut s,
            "POST",
            "/v1/events",
            &[
                ("Authorization", token(Some("acme"))),
                json.clone(),
                ("Content-Length", "999999".into()),
            ],
            b"",
        ),
        post(&mut e, &mut s, Some("acme"), &vec![b' '; 70 * 1024]),
        post(&mut e, &mut s, Some("acme"), b"{nope"),
        // The operators' endpoints are events endpoints too.
        request(&mut e, &mut s, "GET", "/__understudy/events", &[], b""),
        request(
            &mut e,
            &mut s,
            "GET",
            "/__understudy/events?state=LOST",
            &[("Authorization", "Bearer admin-secret".into())],
            b"",
        ),
    ];
    let statuses: Vec<u16> = answers.iter().map(|r| r.status).collect();
    assert_eq!(statuses, [405, 401, 401, 403, 415, 413, 413, 400, 401, 400]);
    for r in answers.drain(..) {
        let v = json_of(&r);
        assert_eq!(v["field"], "", "{}: {}", r.status, r.body);
        assert_eq!(v["retryable"], false, "{}", r.body);
        assert!(
            v["code"].is_string() && v["correlationId"].is_string(),
            "{}",
            r.body
        );
    }
    // A refusal that names a field still names it.
    let mut v: Value = serde_json::from_slice(&body).unwrap();
    v["sequence"] = json!(0);
    let r = post(&mut e, &mut s, Some("acme"), v.to_string().as_bytes());
    assert_eq!(
        (r.status, json_of(&r)["field"].as_str()),
        (400, Some("sequence"))
    );
}
