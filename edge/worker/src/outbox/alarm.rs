//! [V-DELIVER] [V-ORDER] Delivery from the shard's alarm: choose the due heads (the core's
//! `select`), lease them (committed before any fetch, so a runtime killed mid-attempt
//! retries after its restart), deliver up to `concurrency` at once with
//! `Idempotency-Key: <eventId>`, settle each outcome (the core's `settle`), and set the
//! alarm to the next due time. Loops while events are due, for a bounded time per run.
//! Always ends normally: the runtime's own alarm retries are never the retry mechanism.

use futures_util::future::join_all;
use understudy_core::events::delivery;
use understudy_core::events::flow::aad_of;
use understudy_core::events::outbox::run::{Next, Run};
use understudy_core::events::outbox::{self, Record};
use understudy_core::events::seal::{self, SealKey};
use understudy_core::events::stats::{self, ShardStats, MAX_HELD};
use understudy_core::http::Credential;
use understudy_core::policy::events::Events;
use understudy_core::Millis;
use worker::{console_log, SqlStorage};

use super::rows::{self, Sql};
use super::OutboxShard;
use crate::{analytics, isolate};

/// The var that points deliveries elsewhere (local dev, tests, drills), like
/// `UNDERSTUDY_ORIGIN_URL` for the model.
pub const EVENTS_URL_VAR: &str = "UNDERSTUDY_EVENTS_URL";

pub async fn run(shard: &OutboxShard) {
    if let Err(e) = deliver(shard).await {
        console_log!(
            "{}",
            serde_json::json!({"event": "event_alarm_failed", "error": understudy_core::classify::bounded(&e)})
        );
        // Try again a little later rather than never.
        shard.arm(Run::after_failure(isolate::now())).await;
    }
}

struct Ready {
    record: Record,
    request: Option<understudy_core::engine::Outbound>,
}

async fn deliver(shard: &OutboxShard) -> Result<(), String> {
    let sql = shard.sql()?;
    let events = shard.events()?;
    let (service, release) =
        isolate::with_engine(|e| (e.policy().service.name.clone(), e.release_id().to_string()))?;
    let env = &shard.env;
    let url = env
        .var(EVENTS_URL_VAR)
        .ok()
        .map(|v| v.to_string())
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| events.delivery.url.clone());
    let credential = events
        .delivery
        .credential_secret
        .as_deref()
        .and_then(|n| env.secret(n).ok())
        .map(|s| Credential::new(&events.delivery.credential_header, &s.to_string()));
    let key = env
        .secret(&events.encryption_key_secret)
        .ok()
        .and_then(|s| SealKey::from_secret(&s.to_string()));
    let sink = analytics::sink(env);
    let run = Run::start(isolate::now());
    let max = events.delivery.concurrency.max(1) as usize;
    let wake;
    loop {
        let now = isolate::now();
        rows::erase_delivered(&sql, now.0.saturating_sub(events.retention_ms))?;
        let (heads, loose) = rows::heads(&sql)?;
        let plan = outbox::select(now, &heads, &loose, events.dead_letter, max);
        for (t, a, to) in &plan.advance {
            rows::set_cursor(&sql, t, a, *to)?;
        }
        match run.next(now, &plan) {
            Next::Deliver => {}
            Next::End { wake_at } => {
                wake = wake_at;
                break;
            }
        }
        // Lease every chosen attempt before the first fetch: one write batch.
        let mut ready = Vec::with_capacity(plan.deliver.len());
        for id in &plan.deliver {
            let Some(rec) = rows::by_id(&sql, id)? else {
                continue;
            };
            let leased = outbox::lease(now, &rec, events.delivery.attempt_timeout_ms);
            rows::update(&sql, &leased)?;
            rows::bump(&sql, "attempts", 1)?;
            let request = match (&key, rows::payload(&sql, id)?) {
                (Some(k), Some(sealed)) => seal::open(k, &aad_of(&leased), &sealed)
                    .ok()
                    .and_then(|p| String::from_utf8(p).ok())
                    .map(|p| {
                        delivery::request(&url, &leased, &p, leased.attempts, credential.as_ref())
                    }),
                _ => None,
            };
            ready.push(Ready {
                record: leased,
                request,
            });
        }
        let timeout = events.delivery.attempt_timeout_ms;
        let outcomes = join_all(ready.iter().map(|r| async move {
            match &r.request {
                Some(req) => Some(super::attempt::deliver(req, timeout).await),
                None => None,
            }
        }))
        .await;
        // After the awaits: re-read the clock and the cursors (ingest may have run).
        let now = isolate::now();
        for (r, observed) in ready.into_iter().zip(outcomes) {
            let Some(observed) = observed else {
                // No key, or a payload that does not open: the lease stands and the
                // attempt is made again after it (an operator must fix the key).
                console_log!(
                    "{}",
                    serde_json::json!({"event": "event_delivery", "event_id": r.record.event_id,
                        "aggregate_id": r.record.aggregate, "outcome": "not_attempted",
                        "error": "EVENTS_KEY_MISSING: the payload cannot be opened with the configured key"})
                );
                continue;
            };
            let cursor = rows::cursor(&sql, &r.record.tenant, &r.record.aggregate)?;
            let unit = js_sys::Math::random();
            let settled = outbox::settle(now, &r.record, &observed, events, cursor, unit);
            rows::update(&sql, &settled.record)?;
            if let Some(to) = settled.advance_to {
                rows::set_cursor(&sql, &settled.record.tenant, &settled.record.aggregate, to)?;
            }
            match settled.verdict {
                outbox::Verdict::Delivered => {
                    rows::bump(&sql, "delivered", 1)?;
                    let b = stats::bucket(settled.latency_ms.unwrap_or(0));
                    rows::bump(&sql, &format!("lat_{b}"), 1)?;
                }
                outbox::Verdict::Retry => rows::bump(&sql, "retries", 1)?,
                outbox::Verdict::DeadPermanent | outbox::Verdict::DeadExhausted => {
                    rows::bump(&sql, "dead_lettered", 1)?
                }
            }
            console_log!("{}", delivery::log_line(&settled, &service, &release));
            sink.write(&stats::delivery_point(&service, &release, &settled));
        }
    }
    let now = isolate::now();
    if let Ok(s) = stats(&sql, now, events) {
        for p in stats::backlog_points(&service, &release, now, &s) {
            sink.write(&p);
        }
    }
    // The alarm is set last, to the earliest due attempt (or at once when the run's budget
    // ended with events still due).
    let storage = shard.state.storage();
    match wake {
        Some(at) => {
            let at = at.max(now);
            let date = js_sys::Date::new(&wasm_bindgen::JsValue::from_f64(at.0 as f64));
            storage
                .set_alarm(worker::ScheduledTime::new(date))
                .await
                .map_err(|e| e.to_string())?;
        }
        None => {
            let _ = storage.delete_alarm().await;
        }
    }
    Ok(())
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
