//! [V-DELIVER] [V-ORDER] Delivery from the shard's alarm, in steps the driver performs
//! (`io.js`, `us_outbox_alarm`): choose the due heads (the core's `select`), lease them
//! (committed before any fetch, so a runtime killed mid-attempt retries after its restart),
//! hand the driver up to `concurrency` requests at once with `Idempotency-Key: <eventId>`
//! and the attempt's timeout, settle each outcome it reports (the core's `settle`; an
//! attempt without an answer in time is `events::attempt::ended`'s), and give the alarm's
//! next due time. Loops while events are due, for a bounded time per run
//! (`events::outbox::run`). Always ends in an instruction: the runtime's own alarm retries
//! are never the retry mechanism.

use js_sys::{Array, Uint8Array};
use understudy_core::classify::Observed;
use understudy_core::events::flow::aad_of;
use understudy_core::events::outbox::run::{Next, Run};
use understudy_core::events::outbox::{self, Record};
use understudy_core::events::seal::{self, SealKey};
use understudy_core::events::stats::{self, ShardStats, MAX_HELD};
use understudy_core::events::{attempt, delivery};
use understudy_core::http::{Credential, Outbound};
use understudy_core::policy::events::Events;
use understudy_core::{wire, Millis};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

use super::rows::{self, Sql, SqlStorage};
use super::Shard;
use crate::shim::log;
use crate::{analytics, isolate};

/// The var that points deliveries elsewhere (local dev, tests, drills), like
/// `UNDERSTUDY_ORIGIN_URL` for the model.
pub const EVENTS_URL_VAR: &str = "UNDERSTUDY_EVENTS_URL";

/// An alarm run under way: what it delivers with, and the attempts leased and handed out.
pub struct Running {
    run: Run,
    events: &'static Events,
    service: String,
    release: String,
    url: String,
    credential: Option<Credential>,
    key: Option<SealKey>,
    ready: Vec<Ready>,
}

struct Ready {
    record: Record,
    request: Option<Outbound>,
}

/// A string binding of `env` (a var or a secret).
fn binding(env: &JsValue, name: &str) -> Option<String> {
    js_sys::Reflect::get(env, &JsValue::from_str(name))
        .ok()
        .and_then(|v| v.as_string())
}

/// One step of the alarm run. `outcomes` is `undefined` when the alarm fires, else what the
/// driver's last deliveries ended in (one per request handed out: `[status, head, bytes]`
/// as a fetch reports, `null` when no answer came within the attempt's timeout, `undefined`
/// for none sent). Returns the driver's next instruction:
/// `["deliver", timeout_ms, requests]` (each `[url, method, head, body, max_body]`, or
/// `undefined`: nothing to send), `["end", wake_at]` (`undefined`: no alarm), or
/// `["failed", retry_at]` (an alarm at `retry_at` unless one is set earlier).
pub fn step(shard: &mut Shard, outcomes: JsValue) -> JsValue {
    match try_step(shard, outcomes) {
        Ok(next) => next,
        Err(e) => {
            shard.run = None;
            log(&serde_json::json!({"event": "event_alarm_failed", "error": understudy_core::classify::bounded(&e)}).to_string());
            // Try again a little later rather than never.
            instruction("failed", Some(Run::after_failure(isolate::now())))
        }
    }
}

fn instruction(what: &str, at: Option<Millis>) -> JsValue {
    let out = Array::new();
    out.push(&JsValue::from_str(what));
    out.push(&at.map_or(JsValue::UNDEFINED, |a| JsValue::from_f64(a.0 as f64)));
    out.into()
}

fn try_step(shard: &mut Shard, outcomes: JsValue) -> Result<JsValue, String> {
    shard.init()?;
    if outcomes.is_undefined() {
        shard.run = Some(start(shard)?);
    } else {
        settle(shard, &outcomes)?;
    }
    let events = shard.events()?;
    let sql = &shard.sql;
    let Some(running) = shard.run.as_mut() else {
        return Err("no alarm run under way".into());
    };
    let now = isolate::now();
    rows::erase_delivered(sql, now.0.saturating_sub(events.retention_ms))?;
    let (heads, loose) = rows::heads(sql)?;
    let max = events.delivery.concurrency.max(1) as usize;
    let plan = outbox::select(now, &heads, &loose, events.dead_letter, max);
    for (t, a, to) in &plan.advance {
        rows::set_cursor(sql, t, a, *to)?;
    }
    if let Next::End { wake_at } = running.run.next(now, &plan) {
        finish(shard, now);
        // The alarm is set last, to the earliest due attempt (or at once when the run's
        // budget ended with events still due).
        return Ok(instruction("end", wake_at.map(|at| at.max(now))));
    }
    // Lease every chosen attempt before the first fetch: one write batch.
    let mut ready = Vec::with_capacity(plan.deliver.len());
    for id in &plan.deliver {
        let Some(rec) = rows::by_id(sql, id)? else {
            continue;
        };
        let leased = outbox::lease(now, &rec, events.delivery.attempt_timeout_ms);
        rows::update(sql, &leased)?;
        rows::bump(sql, "attempts", 1)?;
        let request = match (&running.key, rows::payload(sql, id)?) {
            (Some(k), Some(sealed)) => seal::open(k, &aad_of(&leased), &sealed)
                .ok()
                .and_then(|p| String::from_utf8(p).ok())
                .map(|p| {
                    delivery::request(
                        &running.url,
                        &leased,
                        &p,
                        leased.attempts,
                        running.credential.as_ref(),
                    )
                }),
            _ => None,
        };
        ready.push(Ready {
            record: leased,
            request,
        });
    }
    let requests = Array::new();
    for r in &ready {
        requests.push(&r.request.as_ref().map_or(JsValue::UNDEFINED, request_js));
    }
    running.ready = ready;
    let out = Array::new();
    out.push(&JsValue::from_str("deliver"));
    out.push(&JsValue::from_f64(
        events.delivery.attempt_timeout_ms as f64,
    ));
    out.push(&requests);
    Ok(out.into())
}

/// A request as the driver's fetch takes it: `[url, method, head, body, max_body]`.
fn request_js(req: &Outbound) -> JsValue {
    let head = wire::flat(req.headers.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    let out = Array::new();
    out.push(&JsValue::from_str(&req.url));
    out.push(&JsValue::from_str(req.method.as_str()));
    out.push(&JsValue::from_str(&head));
    out.push(
        &req.body
            .as_deref()
            .map_or(JsValue::UNDEFINED, JsValue::from_str),
    );
    out.push(&JsValue::from_f64(req.max_body_bytes as f64));
    out.into()
}

fn start(shard: &Shard) -> Result<Running, String> {
    let events = shard.events()?;
    let (service, release) =
        isolate::with_engine(|e| (e.policy().service.name.clone(), e.release_id().to_string()))?;
    let env = &shard.env;
    let url = binding(env, EVENTS_URL_VAR)
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| events.delivery.url.clone());
    let credential = events
        .delivery
        .credential_secret
        .as_deref()
        .and_then(|n| binding(env, n))
        .map(|s| Credential::new(&events.delivery.credential_header, &s));
    let key = binding(env, &events.encryption_key_secret).and_then(|s| SealKey::from_secret(&s));
    Ok(Running {
        run: Run::start(isolate::now()),
        events,
        service,
        release,
        url,
        credential,
        key,
        ready: Vec::new(),
    })
}

/// Settles each attempt handed out with what the driver reports of it.
fn settle(shard: &mut Shard, outcomes: &JsValue) -> Result<(), String> {
    let Some(running) = shard.run.as_mut() else {
        return Err("outcomes reported with no alarm run under way".into());
    };
    let ready = std::mem::take(&mut running.ready);
    let outcomes = Array::from(outcomes);
    let (events, service, release) = (
        running.events,
        running.service.clone(),
        running.release.clone(),
    );
    let env = shard.env.clone();
    let sql = &shard.sql;
    // After the awaits: re-read the clock and the cursors (ingest may have run).
    let now = isolate::now();
    for (i, r) in ready.into_iter().enumerate() {
        let Some(req) = &r.request else {
            // No key, or a payload that does not open: the lease stands and the attempt is
            // made again after it (an operator must fix the key).
            log(&serde_json::json!({"event": "event_delivery", "event_id": r.record.event_id,
                "aggregate_id": r.record.aggregate, "outcome": "not_attempted",
                "error": "EVENTS_KEY_MISSING: the payload cannot be opened with the configured key"})
            .to_string());
            continue;
        };
        let got = outcomes.get(i as u32);
        let answer = (!got.is_null()).then(|| observed(&got, req.max_body_bytes));
        let observed = attempt::ended(answer);
        let cursor = rows::cursor(sql, &r.record.tenant, &r.record.aggregate)?;
        let unit = js_sys::Math::random();
        let settled = outbox::settle(now, &r.record, &observed, events, cursor, unit);
        rows::update(sql, &settled.record)?;
        if let Some(to) = settled.advance_to {
            rows::set_cursor(sql, &settled.record.tenant, &settled.record.aggregate, to)?;
        }
        match settled.verdict {
            outbox::Verdict::Delivered => {
                rows::bump(sql, "delivered", 1)?;
                let b = stats::bucket(settled.latency_ms.unwrap_or(0));
                rows::bump(sql, &format!("lat_{b}"), 1)?;
            }
            outbox::Verdict::Retry => rows::bump(sql, "retries", 1)?,
            outbox::Verdict::DeadPermanent | outbox::Verdict::DeadExhausted => {
                rows::bump(sql, "dead_lettered", 1)?
            }
        }
        log(&delivery::log_line(&settled, &service, &release));
        analytics::write(&env, &stats::delivery_point(&service, &release, &settled));
    }
    Ok(())
}

/// The fetch's result, read as the engine reads its own (`understudy_core::wire::fetched`).
fn observed(v: &JsValue, max_body: u64) -> Observed {
    let Some(r) = v.dyn_ref::<Array>() else {
        return Observed::Connect("the fetch reported no result".into());
    };
    wire::fetched(
        r.get(0).as_f64().unwrap_or(f64::from(wire::FETCH_FAILED)),
        r.get(1).as_string(),
        r.get(2).dyn_into::<Uint8Array>().ok().map(|b| b.to_vec()),
        max_body,
    )
}

/// The run's end: the backlog's points.
fn finish(shard: &mut Shard, now: Millis) {
    let Some(running) = shard.run.take() else {
        return;
    };
    let env = shard.env.clone();
    if let Ok(s) = stats(&shard.sql, now, running.events) {
        for p in stats::backlog_points(&running.service, &running.release, now, &s) {
            analytics::write(&env, &p);
        }
    }
}

/// The shard's figures for the status endpoint.
pub fn stats(sql: &SqlStorage, now: Millis, events: &Events) -> Sql<ShardStats> {
    let (c, oldest) = rows::counts(sql)?;
    let (tally, latency) = rows::tally(sql)?;
    let (heads, loose) = rows::heads(sql)?;
    let mut held = outbox::select(now, &heads, &loose, events.dead_letter, 0).held;
    held.truncate(MAX_HELD);
    Ok(ShardStats {
        pending: c[0],
        delivered: c[1],
        dead_letters: c[2],
        skipped: c[3],
        oldest_pending_stored_at: oldest,
        tally,
        latency,
        held,
    })
}
