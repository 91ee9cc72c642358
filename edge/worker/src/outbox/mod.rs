//! [V-STORE] The outbox shard: a Durable Object with SQLite storage (docs/adr/006). It
//! answers the Worker's [`ShardRequest`]s and delivers from its alarm ([`alarm`]). Every
//! decision is `understudy_core::events::outbox`'s; this module reads and writes rows.
//!
//! Nothing here may panic or hang: a panic under `panic = "abort"` resets the whole module
//! and stalls alarms, a JS exception through a non-`catch` binding hangs the call. So no
//! `unwrap`, no `SqlCursor::one()`, every error becomes a [`ShardReply::Error`] (the Worker
//! answers 503) and `alarm()` always returns `Ok`.

mod alarm;
mod attempt;
mod rows;

use std::cell::Cell;

use understudy_core::events::outbox::{self, Arrival};
use understudy_core::events::protocol::{self, ShardReply, ShardRequest, Verdict};
use understudy_core::policy::events::Events;
use understudy_core::Millis;
use worker::{durable_object, DurableObject, Env, Request, Response, Result, SqlStorage, State};

use crate::isolate;

#[durable_object]
pub struct OutboxShard {
    state: State,
    env: Env,
    /// Whether the tables exist (created once per instance, synchronously).
    ready: Cell<bool>,
}

impl DurableObject for OutboxShard {
    fn new(state: State, env: Env) -> Self {
        OutboxShard {
            state,
            env,
            ready: Cell::new(false),
        }
    }

    async fn fetch(&self, mut req: Request) -> Result<Response> {
        let reply = match req.bytes().await {
            Ok(bytes) => match protocol::decode::<ShardRequest>(&bytes) {
                Ok(cmd) => self.handle(cmd).await,
                Err(message) => ShardReply::Error { message },
            },
            Err(e) => ShardReply::Error {
                message: format!("unreadable shard request: {e}"),
            },
        };
        Response::from_bytes(protocol::encode(&reply))
    }

    async fn alarm(&self) -> Result<Response> {
        alarm::run(self).await;
        Response::ok("")
    }
}

fn refused(status: u16, code: &str, message: String) -> Verdict {
    Verdict::Refused {
        status,
        code: code.to_string(),
        message,
    }
}

fn verdict(a: Arrival) -> Verdict {
    match a {
        Arrival::Store => Verdict::Stored,
        Arrival::Duplicate => Verdict::Duplicate,
        Arrival::Conflict(code, message) => refused(409, code, message),
    }
}

impl OutboxShard {
    fn sql(&self) -> std::result::Result<SqlStorage, String> {
        let sql = self.state.storage().sql();
        if !self.ready.get() {
            rows::init(&sql)?;
            self.ready.set(true);
        }
        Ok(sql)
    }

    fn events(&self) -> std::result::Result<&'static Events, String> {
        isolate::with_engine(|e| e.policy().events.as_ref())?
            .ok_or_else(|| "the baked policy has no [events]".to_string())
    }

    /// Arms the alarm for `at` unless one is already set earlier.
    async fn arm(&self, at: Millis) {
        let storage = self.state.storage();
        let current = storage.get_alarm().await.ok().flatten();
        if current.is_none_or(|c| c > at.0 as i64) {
            let date = js_sys::Date::new(&wasm_bindgen::JsValue::from_f64(at.0 as f64));
            let _ = storage.set_alarm(worker::ScheduledTime::new(date)).await;
        }
    }

    async fn handle(&self, cmd: ShardRequest) -> ShardReply {
        match self.command(cmd).await {
            Ok(r) => r,
            Err(message) => ShardReply::Error { message },
        }
    }

    async fn command(&self, cmd: ShardRequest) -> std::result::Result<ShardReply, String> {
        let sql = self.sql()?;
        let now = isolate::now();
        Ok(match cmd {
            ShardRequest::Claim { claim } => {
                let held = rows::claim(&sql, &claim.event_id)?;
                let a = outbox::claim(&claim, held.as_ref());
                if a == Arrival::Store {
                    rows::insert_claim(&sql, &claim)?;
                }
                ShardReply::Claim {
                    verdict: verdict(a),
                }
            }
            ShardRequest::Unclaim { claim } => {
                rows::delete_claim(&sql, &claim)?;
                ShardReply::Claim {
                    verdict: Verdict::Stored,
                }
            }
            ShardRequest::Lookup { event_id } => ShardReply::Lookup {
                claim: rows::claim(&sql, &event_id)?,
            },
            ShardRequest::Store { record, sealed } => {
                let same_id = rows::by_id(&sql, &record.event_id)?;
                let same_place =
                    rows::at_place(&sql, &record.tenant, &record.aggregate, record.sequence)?;
                let cursor = rows::cursor(&sql, &record.tenant, &record.aggregate)?;
                let a = outbox::arrival(&record, same_id.as_ref(), same_place.as_ref(), cursor);
                let stored = match &a {
                    Arrival::Store => {
                        rows::insert(&sql, &record, sealed)?;
                        Some(*record)
                    }
                    _ => same_id,
                };
                if a == Arrival::Store {
                    // The insert is committed with this object's next output; arming the
                    // alarm after it is at-least-once either way.
                    self.arm(now).await;
                }
                ShardReply::Store {
                    verdict: verdict(a),
                    record: stored,
                }
            }
            ShardRequest::List { filter } => {
                let (records, more) = rows::list(&sql, &filter)?;
                ShardReply::List { records, more }
            }
            ShardRequest::Get { event_id } => {
                let record = rows::by_id(&sql, &event_id)?;
                let sealed = match &record {
                    Some(_) => rows::payload(&sql, &event_id)?,
                    None => None,
                };
                ShardReply::Get { record, sealed }
            }
            ShardRequest::Replay { event_id } => {
                let events = self.events()?;
                let Some(rec) = rows::by_id(&sql, &event_id)? else {
                    return Ok(ShardReply::Replay {
                        verdict: refused(404, "EVENT_NOT_FOUND", "no event has this ID".into()),
                        record: None,
                    });
                };
                match outbox::replay(now, &rec, events) {
                    Ok(r) => {
                        rows::update(&sql, &r)?;
                        rows::bump(&sql, "replayed", 1)?;
                        self.arm(now).await;
                        ShardReply::Replay {
                            verdict: Verdict::Stored,
                            record: Some(r),
                        }
                    }
                    Err(f) => ShardReply::Replay {
                        verdict: refused(f.status, f.code, f.message),
                        record: Some(rec),
                    },
                }
            }
            ShardRequest::Skip { tenant, aggregate } => {
                let head = rows::head(&sql, &tenant, &aggregate)?;
                match outbox::skip(&head) {
                    Ok((skip, rec)) => {
                        if let Some(r) = &rec {
                            rows::update(&sql, r)?;
                        }
                        let to = match &skip {
                            outbox::Skip::DeadLetter { to, .. } | outbox::Skip::Gap { to, .. } => {
                                *to
                            }
                        };
                        rows::set_cursor(&sql, &tenant, &aggregate, to)?;
                        rows::bump(&sql, "skipped", 1)?;
                        self.arm(now).await;
                        ShardReply::Skip {
                            verdict: Verdict::Stored,
                            skip: Some(skip),
                        }
                    }
                    Err(f) => ShardReply::Skip {
                        verdict: refused(f.status, f.code, f.message),
                        skip: None,
                    },
                }
            }
            ShardRequest::Stats => {
                let events = self.events()?;
                let stats = alarm::stats(&sql, now, events)?;
                // Watchdog: pending events with no alarm (a lost alarm) get one.
                if stats.pending > 0 {
                    let current = self.state.storage().get_alarm().await.ok().flatten();
                    if current.is_none() {
                        self.arm(now).await;
                    }
                }
                ShardReply::Stats { stats }
            }
        })
    }
}
