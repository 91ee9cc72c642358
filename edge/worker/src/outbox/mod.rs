//! [V-STORE] The outbox shard: a Durable Object with SQLite storage (docs/adr/006). It
//! answers the Worker's [`ShardRequest`]s and delivers from its alarm ([`alarm`]). Every
//! decision is `understudy_core::events::outbox`'s; this module reads and writes rows, and
//! its I/O — the request's bytes, the alarm, the deliveries' fetches — is `io.js`'s
//! (`us_outbox_fetch`, `us_outbox_alarm`), which asks this module at each step, one call
//! each (docs/adr/015-durable-objects-driven-from-js.md). The SQL API is synchronous: a
//! command runs to its end in one call.
//!
//! Nothing here may panic or hang: a panic under `panic = "abort"` resets the whole module
//! and stalls alarms. So no `unwrap`, every error becomes a [`ShardReply::Error`] (the
//! Worker answers 503), and the alarm's steps always end in an instruction.

mod alarm;
mod rows;
mod sql;

use std::cell::RefCell;
use std::rc::Rc;

use js_sys::{Array, Object, Promise, Reflect, Uint8Array};
use understudy_core::events::outbox::{self, Arrival};
use understudy_core::events::protocol::{self, ShardReply, ShardRequest, Verdict};
use understudy_core::policy::events::Events;
use understudy_core::Millis;
use wasm_bindgen::prelude::*;

use crate::isolate;
use sql::SqlStorage;

// The object's driver (`io.js`): the runtime's calls performed, this module asked at each step.
#[wasm_bindgen(module = "/src/io.js")]
extern "C" {
    fn us_outbox(state: &JsValue, core: JsValue) -> JsValue;
    fn us_outbox_fetch(driver: &JsValue, req: &JsValue) -> Promise;
    fn us_outbox_alarm(driver: &JsValue) -> Promise;
}

/// The Durable Object class the runtime instantiates (`new OutboxShard(state, env)`): its
/// driver, and nothing else.
#[wasm_bindgen]
pub struct OutboxShard {
    driver: JsValue,
}

#[wasm_bindgen]
impl OutboxShard {
    #[wasm_bindgen(constructor)]
    pub fn new(state: JsValue, env: JsValue) -> OutboxShard {
        let sql = Reflect::get(&state, &JsValue::from_str("storage"))
            .and_then(|s| Reflect::get(&s, &JsValue::from_str("sql")))
            .unwrap_or(JsValue::UNDEFINED);
        let shard = Rc::new(RefCell::new(Shard {
            sql: SqlStorage(sql),
            env,
            ready: false,
            run: None,
        }));
        OutboxShard {
            driver: us_outbox(&state, core_object(&shard)),
        }
    }

    pub fn fetch(&self, req: JsValue) -> Promise {
        us_outbox_fetch(&self.driver, &req)
    }

    pub fn alarm(&self) -> Promise {
        us_outbox_alarm(&self.driver)
    }
}

/// One shard: its SQL storage, its bindings, and the alarm run under way.
pub struct Shard {
    sql: SqlStorage,
    env: JsValue,
    /// Whether the tables exist (created once per instance).
    ready: bool,
    run: Option<alarm::Running>,
}

/// When the alarm must fire: at `at`, unless one is set earlier; or, `if_none`, only when
/// none is set (the watchdog of a lost alarm).
#[derive(Clone, Copy)]
pub struct Arm {
    pub at: Millis,
    pub if_none: bool,
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

impl Shard {
    /// Creates the tables, once per instance.
    fn init(&mut self) -> std::result::Result<(), String> {
        if !self.ready {
            rows::init(&self.sql)?;
            self.ready = true;
        }
        Ok(())
    }

    fn sql(&mut self) -> std::result::Result<&SqlStorage, String> {
        self.init()?;
        Ok(&self.sql)
    }

    fn events(&self) -> std::result::Result<&'static Events, String> {
        isolate::with_engine(|e| e.policy().events.as_ref())?
            .ok_or_else(|| "the baked policy has no [events]".to_string())
    }

    /// A shard request's reply, and the alarm it needs.
    fn handle(&mut self, bytes: &[u8]) -> (ShardReply, Option<Arm>) {
        let mut arm = None;
        let reply = match protocol::decode::<ShardRequest>(bytes) {
            Ok(cmd) => match self.command(cmd, &mut arm) {
                Ok(r) => r,
                Err(message) => ShardReply::Error { message },
            },
            Err(message) => ShardReply::Error { message },
        };
        (reply, arm)
    }

    fn command(
        &mut self,
        cmd: ShardRequest,
        arm: &mut Option<Arm>,
    ) -> std::result::Result<ShardReply, String> {
        let events = self.events();
        let sql = self.sql()?;
        let now = isolate::now();
        let mut arm_now = || {
            *arm = Some(Arm {
                at: now,
                if_none: false,
            })
        };
        Ok(match cmd {
            ShardRequest::Claim { claim } => {
                let held = rows::claim(sql, &claim.event_id)?;
                let a = outbox::claim(&claim, held.as_ref());
                if a == Arrival::Store {
                    rows::insert_claim(sql, &claim)?;
                }
                ShardReply::Claim {
                    verdict: verdict(a),
                }
            }
            ShardRequest::Unclaim { claim } => {
                rows::delete_claim(sql, &claim)?;
                ShardReply::Claim {
                    verdict: Verdict::Stored,
                }
            }
            ShardRequest::Lookup { event_id } => ShardReply::Lookup {
                claim: rows::claim(sql, &event_id)?,
            },
            ShardRequest::Store { record, sealed } => {
                let same_id = rows::by_id(sql, &record.event_id)?;
                let same_place =
                    rows::at_place(sql, &record.tenant, &record.aggregate, record.sequence)?;
                let cursor = rows::cursor(sql, &record.tenant, &record.aggregate)?;
                let a = outbox::arrival(&record, same_id.as_ref(), same_place.as_ref(), cursor);
                let stored = match &a {
                    Arrival::Store => {
                        rows::insert(sql, &record, sealed)?;
                        Some(*record)
                    }
                    _ => same_id,
                };
                if a == Arrival::Store {
                    // The insert is committed with this object's next output; arming the
                    // alarm after it is at-least-once either way.
                    arm_now();
                }
                ShardReply::Store {
                    verdict: verdict(a),
                    record: stored,
                }
            }
            ShardRequest::List { filter } => {
                let (records, more) = rows::list(sql, &filter)?;
                ShardReply::List { records, more }
            }
            ShardRequest::Get { event_id } => {
                let record = rows::by_id(sql, &event_id)?;
                let sealed = match &record {
                    Some(_) => rows::payload(sql, &event_id)?,
                    None => None,
                };
                ShardReply::Get { record, sealed }
            }
            ShardRequest::Replay { event_id } => {
                let events = events?;
                let Some(rec) = rows::by_id(sql, &event_id)? else {
                    return Ok(ShardReply::Replay {
                        verdict: refused(404, "EVENT_NOT_FOUND", "no event has this ID".into()),
                        record: None,
                    });
                };
                match outbox::replay(now, &rec, events) {
                    Ok(r) => {
                        rows::update(sql, &r)?;
                        rows::bump(sql, "replayed", 1)?;
                        arm_now();
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
                let head = rows::head(sql, &tenant, &aggregate)?;
                match outbox::skip(&head) {
                    Ok((skip, rec)) => {
                        if let Some(r) = &rec {
                            rows::update(sql, r)?;
                        }
                        let to = match &skip {
                            outbox::Skip::DeadLetter { to, .. } | outbox::Skip::Gap { to, .. } => {
                                *to
                            }
                        };
                        rows::set_cursor(sql, &tenant, &aggregate, to)?;
                        rows::bump(sql, "skipped", 1)?;
                        arm_now();
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
                let stats = alarm::stats(sql, now, events?)?;
                // Watchdog: pending events with no alarm (a lost alarm) get one.
                if stats.pending > 0 {
                    *arm = Some(Arm {
                        at: now,
                        if_none: true,
                    });
                }
                ShardReply::Stats { stats }
            }
        })
    }
}

/// `[at, if_none]` for the driver, or `undefined`.
fn arm_js(arm: Option<Arm>) -> JsValue {
    match arm {
        Some(a) => {
            let out = Array::new();
            out.push(&JsValue::from(a.at.0 as f64));
            out.push(&JsValue::from(a.if_none));
            out.into()
        }
        None => JsValue::UNDEFINED,
    }
}

/// The driver's view of a [`Shard`]: one function per step (`io.js`, `us_outbox`).
fn core_object(shard: &Rc<RefCell<Shard>>) -> JsValue {
    let o = Object::new();
    let set = |name: &str, f: JsValue| {
        let _ = Reflect::set(&o, &JsValue::from_str(name), &f);
    };
    let s = Rc::clone(shard);
    set(
        "command",
        Closure::<dyn Fn(Vec<u8>) -> Array>::new(move |bytes: Vec<u8>| {
            let (reply, arm) = s.borrow_mut().handle(&bytes);
            let out = Array::new();
            out.push(&Uint8Array::from(protocol::encode(&reply).as_slice()).into());
            out.push(&arm_js(arm));
            out
        })
        .into_js_value(),
    );
    let s = Rc::clone(shard);
    set(
        "unreadable",
        Closure::<dyn Fn(String) -> Vec<u8>>::new(move |why: String| {
            let _ = &s;
            protocol::encode(&ShardReply::Error {
                message: format!("unreadable shard request: {why}"),
            })
        })
        .into_js_value(),
    );
    let s = Rc::clone(shard);
    set(
        "alarm",
        Closure::<dyn Fn(JsValue) -> JsValue>::new(move |outcomes: JsValue| {
            alarm::step(&mut s.borrow_mut(), outcomes)
        })
        .into_js_value(),
    );
    o.into()
}
