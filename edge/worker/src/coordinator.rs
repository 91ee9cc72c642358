//! [F-SCOPE] The breaker's coordinator: a Durable Object that merges the isolates' reports
//! and answers each with the fleet's verdict, and holds their watches until the fleet opens
//! or closes (docs/adr/011-fleet-scoped-breaker.md). Every decision is
//! `understudy_core::breaker::fleet::Coordinator`'s; this module reads the request and
//! writes the answer.
//!
//! One object per service, settings and region (`{service}/{settings}/{region}`), and a
//! global one (`…/global`) of the same class: the driver names the object in the URL it
//! reaches it at (`?of=`), and the name says its role ([`Role`]). A region's object, while it
//! keeps isolates (`Coordinator::merging`), sends its window to the global one once per
//! report interval from its alarm and heeds the verdict that comes back; the global one
//! lost (an error, no answer within [`MERGE_TIMEOUT_MS`]), the region's verdict stands on
//! its own evidence once the last global verdict expired.
//!
//! It is soft state: kept in memory, its decisions (the fleet's mode and times, the last
//! global verdict) written to the object's storage at most once a second when they changed
//! (`Snapshot`), and resumed from there after a restart; the window's counts rebuild from the
//! next round of reports (each carries the isolate's whole window). A restart drops the held
//! watches: a watch's answer begins at once (its headers; the verdict follows in the body
//! when the fleet moves or its hold passed), so an isolate knows within the report timeout
//! that its watch is held, and one that failed is sent again. The object runs in the same Worker
//! as the isolates, so it has the bake: its breaker settings are the policy's, and a report
//! made under other settings (another release) is refused, never merged. Nothing here may
//! panic: every problem is an HTTP answer the isolate counts as a failed report.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Duration;

use futures_channel::oneshot;
use js_sys::{Array, Promise};
use understudy_core::breaker::fleet::place::{global_name, Role};
use understudy_core::breaker::fleet::{settings_hash, Coordinator, Snapshot, Verdict, WATCH_MS};
use understudy_core::policy::{Breaker, Scope};
use wasm_bindgen::prelude::*;
use worker::wasm_bindgen_futures::JsFuture;
use worker::{durable_object, DurableObject, Env, Request, Response, Result, State};

use crate::{isolate, shim};

/// Held watches below which no sweep runs.
const SWEEP_MIN: usize = 64;
/// How long a region waits for the global coordinator's answer to its window (as an isolate
/// waits for its region's: `member::REPORT_TIMEOUT_MS`).
pub const MERGE_TIMEOUT_MS: u64 = understudy_core::breaker::member::REPORT_TIMEOUT_MS;

// A region's window to the global coordinator, within `timeout_ms`: `[true, verdict]` or
// `[false, why]` (`io.js`, raced through its one timing primitive).
#[wasm_bindgen(module = "/src/io.js")]
extern "C" {
    fn us_merge(ns: &JsValue, object: &str, body: &str, timeout_ms: f64) -> Promise;
}

#[durable_object]
pub struct BreakerCoordinator {
    state: State,
    env: Env,
    /// Built from the bake at the first report (and what the storage kept).
    inner: Rc<RefCell<Option<Coordinator>>>,
    /// The snapshot last written.
    stored: RefCell<Option<Snapshot>>,
    /// The watches held: each is answered with the verdict when the fleet opens or closes.
    watchers: RefCell<Vec<oneshot::Sender<String>>>,
    /// How many held watches make the next sweep of those whose caller is gone.
    sweep_at: Cell<usize>,
    /// What this object is, from the name in its first request's URL.
    role: Cell<Option<Role>>,
    /// A region's merge alarm is set; the last window's number (its clock: a restarted
    /// object's windows still count as newer).
    alarm_set: Cell<bool>,
    sent: Cell<u64>,
}

impl DurableObject for BreakerCoordinator {
    fn new(state: State, env: Env) -> Self {
        BreakerCoordinator {
            state,
            env,
            inner: Rc::new(RefCell::new(None)),
            stored: RefCell::new(None),
            watchers: RefCell::new(Vec::new()),
            sweep_at: Cell::new(SWEEP_MIN),
            role: Cell::new(None),
            alarm_set: Cell::new(false),
            sent: Cell::new(0),
        }
    }

    async fn fetch(&self, mut req: Request) -> Result<Response> {
        let watch = req.path() == understudy_core::breaker::member::WATCH_PATH;
        if self.role.get().is_none() {
            let of = object_of(&req.inner().url());
            let role = match of.as_deref().map(Role::of) {
                None => Role::Alone,
                Some(Ok(role)) => role,
                Some(Err(e)) => return Response::error(e, 400),
            };
            self.role.set(Some(role));
        }
        let text = match req.text().await {
            Ok(t) => t,
            Err(e) => return Response::error(format!("unreadable request: {e}"), 400),
        };
        self.resume().await;
        if watch {
            let answer = self.watch(&text);
            self.persist().await;
            return answer;
        }
        let answer = self.with(|c| {
            let verdict = Coordinator::parse(&text).and_then(|r| c.report(isolate::now(), r));
            verdict.map_err(|refusal| (refusal.message(), refusal.status()))
        });
        self.persist().await;
        match answer {
            Ok(body) => {
                self.arm().await;
                Response::ok(body)
            }
            Err((message, status)) => Response::error(message, status),
        }
    }

    /// A region's merge: its window to the global coordinator, the verdict heeded (the held
    /// watches answered if it moved the region), and the next alarm while the region keeps
    /// isolates.
    async fn alarm(&self) -> Result<Response> {
        self.alarm_set.set(false);
        let Some(Role::Region(region)) = self.role.get() else {
            return Response::ok("no merge");
        };
        let now = isolate::now();
        let seq = self.sent.get().max(now.0.saturating_sub(1)) + 1;
        self.sent.set(seq);
        let window = self.inner.borrow_mut().as_mut().and_then(|c| {
            c.merging(now)
                .then(|| c.window_report(now, region.name(), seq))
        });
        let Some(window) = window else {
            return Response::ok("nothing to merge");
        };
        let Ok(body) = serde_json::to_string(&window) else {
            return Response::ok("the window cannot be written");
        };
        match self.merge(&body).await {
            Ok(text) => match serde_json::from_str::<Verdict>(&text) {
                Ok(v) => {
                    let _ = self.with(|c| {
                        c.heed(v);
                        Ok(c.verdict(isolate::now()))
                    });
                }
                Err(e) => worker::console_log!("fleet merge: the global answer is no verdict: {e}"),
            },
            // The global coordinator lost: this region decides on its own once the last
            // global verdict expired (`Coordinator::followed`).
            Err(e) => worker::console_log!("fleet merge: {e}"),
        }
        self.persist().await;
        self.arm().await;
        Response::ok("merged")
    }
}

impl BreakerCoordinator {
    /// A region's alarm, one report interval from now, unless one is set or the region
    /// keeps no isolate.
    async fn arm(&self) {
        if self.alarm_set.get() || !matches!(self.role.get(), Some(Role::Region(_))) {
            return;
        }
        let interval = {
            let mut inner = self.inner.borrow_mut();
            match inner.as_mut() {
                Some(c) => match c.merging(isolate::now()) {
                    true => c.report_interval_ms(),
                    false => return,
                },
                None => return,
            }
        };
        let at = Duration::from_millis(interval);
        match self.state.storage().set_alarm(at).await {
            Ok(()) => self.alarm_set.set(true),
            Err(e) => worker::console_log!("fleet merge: cannot set the alarm: {e}"),
        }
    }

    /// Sends a region's window (`body`) to the global coordinator: its verdict's JSON, or
    /// why there is none.
    async fn merge(&self, body: &str) -> std::result::Result<String, String> {
        let (service, config, binding) = global_of()?;
        let ns = js_sys::Reflect::get(self.env.as_ref(), &JsValue::from_str(&binding))
            .ok()
            .filter(JsValue::is_object)
            .ok_or_else(|| format!("Durable Object binding `{binding}` is not bound"))?;
        let object = global_name(&service, &config);
        let got = JsFuture::from(us_merge(&ns, &object, body, MERGE_TIMEOUT_MS as f64))
            .await
            .map_err(|e| understudy_core::classify::bounded(&format!("{e:?}")))?;
        let got = Array::from(&got);
        let text = got.get(1).as_string().unwrap_or_default();
        if got.get(0).as_bool() == Some(true) {
            Ok(text)
        } else {
            Err(text)
        }
    }

    /// Runs `f` on the coordinator (built at the first call), answers the held watches when
    /// the verdict `f` gave moved the fleet, and writes that verdict.
    fn with(
        &self,
        f: impl FnOnce(&mut Coordinator) -> std::result::Result<Verdict, (String, u16)>,
    ) -> std::result::Result<String, (String, u16)> {
        let mut inner = self.inner.borrow_mut();
        if inner.is_none() {
            *inner = Some(coordinator().map_err(|e| (e, 503))?);
        }
        let Some(c) = inner.as_mut() else {
            return Err(("no coordinator".into(), 503));
        };
        let verdict = f(c)?;
        let body = serde_json::to_string(&verdict)
            .map_err(|e| (format!("cannot write the verdict: {e}"), 500))?;
        if c.moved() {
            for tx in self.watchers.borrow_mut().drain(..) {
                let _ = tx.send(body.clone());
            }
        }
        Ok(body)
    }

    /// A watch: answered at once when the fleet is not as the isolate last heard it, else
    /// held until it opens or closes, or its hold passed — [`WATCH_MS`] or less, as it asks
    /// (then with the verdict as it stands). A held watch's answer begins at once: its
    /// headers now, the verdict in its body later, so the isolate knows its watch is held.
    fn watch(&self, text: &str) -> Result<Response> {
        let mut held = None;
        let mut hold_ms = WATCH_MS;
        let answer = self.with(|c| {
            let now = isolate::now();
            let w = Coordinator::parse_watch(text).map_err(|r| (r.message(), r.status()))?;
            hold_ms = w.hold_ms();
            match c.watch(now, &w).map_err(|r| (r.message(), r.status()))? {
                Some(v) => Ok(v),
                None => {
                    let (tx, rx) = oneshot::channel();
                    let mut watchers = self.watchers.borrow_mut();
                    if watchers.len() >= self.sweep_at.get() {
                        // Amortised: a watch whose request the runtime cancelled is dropped.
                        watchers.retain(|tx| !tx.is_canceled());
                        self.sweep_at.set((2 * watchers.len()).max(SWEEP_MIN));
                    }
                    watchers.push(tx);
                    held = Some(rx);
                    Ok(c.verdict(now))
                }
            }
        });
        let rx = match (answer, held) {
            (Err((message, status)), _) => return Response::error(message, status),
            (Ok(body), None) => return Response::ok(body),
            (Ok(_), Some(rx)) => rx,
        };
        let inner = Rc::clone(&self.inner);
        let body = async move {
            let body = match shim::within(rx, hold_ms).await {
                Some(Ok(body)) => body,
                // Timed out, or the object dropped its watchers: the verdict as it stands
                // (a move it makes is answered to the others with the next call).
                _ => inner
                    .borrow_mut()
                    .as_mut()
                    .and_then(|c| serde_json::to_string(&c.verdict(isolate::now())).ok())
                    .unwrap_or_default(),
            };
            Ok::<Vec<u8>, worker::Error>(body.into_bytes())
        };
        Response::from_stream(futures_util::stream::once(body))
    }

    /// Builds the coordinator, resumed from the snapshot its storage kept, when this object
    /// has none yet (its first call, or the first after a restart).
    async fn resume(&self) {
        if self.inner.borrow().is_some() {
            return;
        }
        let Ok(mut c) = coordinator() else {
            return;
        };
        match self.state.storage().get::<String>(SNAPSHOT_KEY).await {
            Ok(Some(text)) => match serde_json::from_str::<Snapshot>(&text) {
                Ok(snap) => {
                    c.restore(isolate::now(), snap.clone());
                    *self.stored.borrow_mut() = Some(snap);
                }
                Err(e) => worker::console_log!("fleet snapshot: unreadable, not resumed: {e}"),
            },
            Ok(None) => {}
            Err(e) => worker::console_log!("fleet snapshot: cannot read it: {e}"),
        }
        let mut inner = self.inner.borrow_mut();
        if inner.is_none() {
            *inner = Some(c);
        }
    }

    /// Writes the coordinator's snapshot when it is due (`Snapshot::due`: its decisions
    /// changed, at most once a second).
    async fn persist(&self) {
        let now = isolate::now();
        let snap = match self.inner.borrow().as_ref() {
            Some(c) => c.snapshot(now),
            None => return,
        };
        if !snap.due(self.stored.borrow().as_ref(), now) {
            return;
        }
        let Ok(text) = serde_json::to_string(&snap) else {
            return;
        };
        match self.state.storage().put(SNAPSHOT_KEY, text).await {
            Ok(()) => *self.stored.borrow_mut() = Some(snap),
            Err(e) => worker::console_log!("fleet snapshot: cannot write it: {e}"),
        }
    }
}

/// The storage key of the coordinator's snapshot.
const SNAPSHOT_KEY: &str = "snapshot";

/// The object name in a coordinator URL's query (`?of=`, percent-encoded by the driver's
/// `encodeURIComponent`): read here rather than through a URL parser, which would cost the
/// module a fifth of its size.
fn object_of(url: &str) -> Option<String> {
    let query = url.split_once('?')?.1.split('#').next()?;
    let raw = query.split('&').find_map(|pair| pair.strip_prefix("of="))?;
    js_sys::decode_uri_component(raw)
        .ok()
        .and_then(|s| s.as_string())
}

/// Where a region's window goes: the service, the settings hash and the coordinator's
/// binding of this Worker's bake.
fn global_of() -> std::result::Result<(String, String, String), String> {
    isolate::with_engine(|e| {
        let p = e.policy();
        match &p.breaker {
            Breaker::Rate(r) => match &r.scope {
                Scope::Fleet(f) => Some((
                    p.service.name.clone(),
                    settings_hash(r, e.policy_hash()),
                    f.coordinator.clone(),
                )),
                Scope::Isolate => None,
            },
            _ => None,
        }
    })?
    .ok_or_else(|| "this release's breaker is not fleet-scoped".to_string())
}

/// The coordinator for this Worker's bake: its service, its breaker settings.
fn coordinator() -> std::result::Result<Coordinator, String> {
    let (service, rate, policy_hash) = isolate::with_engine(|e| {
        let p = e.policy();
        match &p.breaker {
            Breaker::Rate(r) => Some((p.service.name.clone(), r.clone(), e.policy_hash())),
            _ => None,
        }
    })?
    .ok_or("this release's breaker is not a rate breaker: it has no fleet scope")?;
    let Scope::Fleet(fleet) = &rate.scope else {
        return Err(
            "this release's breaker is in isolate scope: it reports to no coordinator".into(),
        );
    };
    let interval = fleet.report_interval_ms;
    Ok(Coordinator::new(
        &service,
        &settings_hash(&rate, policy_hash),
        rate,
        interval,
    ))
}
