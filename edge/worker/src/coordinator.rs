//! [F-SCOPE] The breaker's coordinator: a Durable Object that merges the isolates' reports
//! and answers each with the fleet's verdict, and holds their watches until the fleet opens
//! or closes (docs/adr/011-fleet-scoped-breaker.md). Every decision is
//! `understudy_core::breaker::fleet::Coordinator`'s; its I/O — the request, the storage,
//! the alarm, the region's call to the global object, a held watch's stream — is `io.js`'s
//! (`us_coordinator_fetch`, `us_coordinator_alarm`), which asks this module's [`Core`]
//! at each step, one call each (docs/adr/015-durable-objects-driven-from-js.md).
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

use std::cell::RefCell;
use std::rc::Rc;

use js_sys::{Array, Object, Promise, Reflect};
use understudy_core::breaker::fleet::place::{global_name, Role};
use understudy_core::breaker::fleet::{settings_hash, Coordinator, Snapshot, Verdict};
use understudy_core::policy::{Breaker, Scope};
use wasm_bindgen::prelude::*;

use crate::isolate;

/// How long a region waits for the global coordinator's answer to its window (as an isolate
/// waits for its region's: `member::REPORT_TIMEOUT_MS`).
pub const MERGE_TIMEOUT_MS: u64 = understudy_core::breaker::member::REPORT_TIMEOUT_MS;

// The object's driver (`io.js`): the runtime's calls performed, this module asked at each step.
#[wasm_bindgen(module = "/src/io.js")]
extern "C" {
    fn us_coordinator(state: &JsValue, env: &JsValue, core: JsValue) -> JsValue;
    fn us_coordinator_fetch(driver: &JsValue, req: &JsValue) -> Promise;
    fn us_coordinator_alarm(driver: &JsValue) -> Promise;
}

/// The Durable Object class the runtime instantiates (`new BreakerCoordinator(state, env)`):
/// its driver, and nothing else.
#[wasm_bindgen]
pub struct BreakerCoordinator {
    driver: JsValue,
}

#[wasm_bindgen]
impl BreakerCoordinator {
    #[wasm_bindgen(constructor)]
    pub fn new(state: JsValue, env: JsValue) -> BreakerCoordinator {
        let core = Rc::new(RefCell::new(Core::default()));
        BreakerCoordinator {
            driver: us_coordinator(&state, &env, core_object(&core)),
        }
    }

    pub fn fetch(&self, req: JsValue) -> Promise {
        us_coordinator_fetch(&self.driver, &req)
    }

    pub fn alarm(&self) -> Promise {
        us_coordinator_alarm(&self.driver)
    }
}

/// What one object knows: its role, its coordinator (built at the first call, resumed from
/// the snapshot its storage kept), the snapshot last written, and its merge's clock.
#[derive(Default)]
struct Core {
    role: Option<Role>,
    inner: Option<Coordinator>,
    /// The snapshot last written; the one being written.
    stored: Option<Snapshot>,
    writing: Option<Snapshot>,
    /// A region's merge alarm is set; the last window's number (its clock: a restarted
    /// object's windows still count as newer).
    alarm_set: bool,
    sent: u64,
}

/// An answer to the driver: `[status, body, broadcast, held, hold_ms]` — `broadcast`: the
/// fleet moved, every held watch gets `body`; `held`: this watch waits `hold_ms` at most
/// for the fleet to move (its answer begins at once, the verdict follows).
fn answer(result: Result<(String, bool), (String, u16)>, held: Option<u64>) -> JsValue {
    let out = Array::new();
    match result {
        Ok((body, moved)) => {
            out.push(&JsValue::from(200));
            out.push(&JsValue::from(body));
            out.push(&JsValue::from(moved));
        }
        Err((message, status)) => {
            out.push(&JsValue::from(status));
            out.push(&JsValue::from(message));
            out.push(&JsValue::FALSE);
        }
    }
    out.push(&JsValue::from(held.is_some()));
    out.push(&JsValue::from(held.unwrap_or(0) as f64));
    out.into()
}

impl Core {
    /// The object's role from its first request's URL (`?of=`): `None`, or why the name is
    /// not one (answered 400).
    fn place(&mut self, url: &str) -> Option<String> {
        if self.role.is_some() {
            return None;
        }
        match object_of(url).as_deref().map(Role::of) {
            None => self.role = Some(Role::Alone),
            Some(Ok(role)) => self.role = Some(role),
            Some(Err(e)) => return Some(e.to_string()),
        }
        None
    }

    /// Builds the coordinator, resumed from `snapshot` (what the storage kept, if anything);
    /// a line to log when it cannot be read.
    fn resume(&mut self, snapshot: Option<String>) -> Option<String> {
        if self.inner.is_some() {
            return None;
        }
        let mut c = coordinator().ok()?;
        let mut log = None;
        if let Some(text) = snapshot {
            match serde_json::from_str::<Snapshot>(&text) {
                Ok(snap) => {
                    c.restore(isolate::now(), snap.clone());
                    self.stored = Some(snap);
                }
                Err(e) => log = Some(format!("fleet snapshot: unreadable, not resumed: {e}")),
            }
        }
        self.inner = Some(c);
        log
    }

    /// Runs `f` on the coordinator (built at the first call): the verdict it gave, and
    /// whether it moved the fleet.
    fn with(
        &mut self,
        f: impl FnOnce(&mut Coordinator) -> Result<Verdict, (String, u16)>,
    ) -> Result<(String, bool), (String, u16)> {
        if self.inner.is_none() {
            self.inner = Some(coordinator().map_err(|e| (e, 503))?);
        }
        let Some(c) = self.inner.as_mut() else {
            return Err(("no coordinator".into(), 503));
        };
        let verdict = f(c)?;
        let body = serde_json::to_string(&verdict)
            .map_err(|e| (format!("cannot write the verdict: {e}"), 500))?;
        Ok((body, c.moved()))
    }

    fn report(&mut self, text: &str) -> JsValue {
        let result = self.with(|c| {
            let verdict = Coordinator::parse(text).and_then(|r| c.report(isolate::now(), r));
            verdict.map_err(|refusal| (refusal.message(), refusal.status()))
        });
        answer(result, None)
    }

    /// A watch: answered at once when the fleet is not as the isolate last heard it, else
    /// held until it opens or closes, or its hold passed — `fleet::WATCH_MS` or less, as it asks
    /// (then with the verdict as it stands).
    fn watch(&mut self, text: &str) -> JsValue {
        let mut held = None;
        let result = self.with(|c| {
            let now = isolate::now();
            let w = Coordinator::parse_watch(text).map_err(|r| (r.message(), r.status()))?;
            match c.watch(now, &w).map_err(|r| (r.message(), r.status()))? {
                Some(v) => Ok(v),
                None => {
                    held = Some(w.hold_ms());
                    Ok(c.verdict(now))
                }
            }
        });
        answer(result, held)
    }

    /// The verdict as it stands (a held watch whose hold passed).
    fn verdict(&mut self) -> String {
        self.inner
            .as_mut()
            .and_then(|c| serde_json::to_string(&c.verdict(isolate::now())).ok())
            .unwrap_or_default()
    }

    /// The snapshot to write now (`Snapshot::due`: its decisions changed, at most once a
    /// second), or none.
    fn snapshot_due(&mut self) -> Option<String> {
        let now = isolate::now();
        let snap = self.inner.as_ref()?.snapshot(now);
        if !snap.due(self.stored.as_ref(), now) {
            return None;
        }
        let text = serde_json::to_string(&snap).ok()?;
        self.writing = Some(snap);
        Some(text)
    }

    /// The snapshot being written was stored.
    fn snapshot_stored(&mut self) {
        if let Some(s) = self.writing.take() {
            self.stored = Some(s);
        }
    }

    /// A region's alarm: one report interval from now (ms), unless one is set or the region
    /// keeps no isolate.
    fn arm_in(&mut self) -> Option<f64> {
        if self.alarm_set || !matches!(self.role, Some(Role::Region(_))) {
            return None;
        }
        let c = self.inner.as_mut()?;
        if !c.merging(isolate::now()) {
            return None;
        }
        self.alarm_set = true;
        Some(c.report_interval_ms() as f64)
    }

    /// A region's merge, from its alarm: `[body, binding, object]` to send the global
    /// coordinator, or `[why]` when there is nothing to send.
    fn merge(&mut self) -> JsValue {
        self.alarm_set = false;
        let out = Array::new();
        let Some(Role::Region(region)) = self.role else {
            out.push(&JsValue::from("no merge"));
            return out.into();
        };
        let now = isolate::now();
        let seq = self.sent.max(now.0.saturating_sub(1)) + 1;
        self.sent = seq;
        let window = self.inner.as_mut().and_then(|c| {
            c.merging(now)
                .then(|| c.window_report(now, region.name(), seq))
        });
        let Some(window) = window else {
            out.push(&JsValue::from("nothing to merge"));
            return out.into();
        };
        let Ok(body) = serde_json::to_string(&window) else {
            out.push(&JsValue::from("the window cannot be written"));
            return out.into();
        };
        match global_of() {
            Ok((service, config, binding)) => {
                out.push(&JsValue::from(body));
                out.push(&JsValue::from(binding));
                out.push(&JsValue::from(global_name(&service, &config)));
                out.push(&JsValue::from(MERGE_TIMEOUT_MS as f64));
            }
            Err(e) => {
                out.push(&JsValue::from(format!("fleet merge: {e}")));
            }
        }
        out.into()
    }

    /// The global coordinator's answer to the region's window (`ok`: its verdict; else why
    /// there is none): `[log, broadcast, verdict]`.
    fn heed(&mut self, ok: bool, text: &str) -> JsValue {
        let out = Array::new();
        if !ok {
            // The global coordinator lost: this region decides on its own once the last
            // global verdict expired (`Coordinator::followed`).
            out.push(&JsValue::from(format!("fleet merge: {text}")));
            return out.into();
        }
        match serde_json::from_str::<Verdict>(text) {
            Ok(v) => {
                let heard = self.with(|c| {
                    c.heed(v);
                    Ok(c.verdict(isolate::now()))
                });
                out.push(&JsValue::from(""));
                if let Ok((body, moved)) = heard {
                    out.push(&JsValue::from(moved));
                    out.push(&JsValue::from(body));
                }
            }
            Err(e) => {
                out.push(&JsValue::from(format!(
                    "fleet merge: the global answer is no verdict: {e}"
                )));
            }
        }
        out.into()
    }
}

/// The driver's view of a [`Core`]: one function per step (`io.js`, `us_coordinator`).
fn core_object(core: &Rc<RefCell<Core>>) -> JsValue {
    let o = Object::new();
    let set = |name: &str, f: JsValue| {
        let _ = Reflect::set(&o, &JsValue::from_str(name), &f);
    };
    let c = Rc::clone(core);
    set(
        "place",
        Closure::<dyn Fn(String) -> Option<String>>::new(move |url: String| {
            c.borrow_mut().place(&url)
        })
        .into_js_value(),
    );
    let c = Rc::clone(core);
    set(
        "ready",
        Closure::<dyn Fn() -> bool>::new(move || c.borrow().inner.is_some()).into_js_value(),
    );
    let c = Rc::clone(core);
    set(
        "resume",
        Closure::<dyn Fn(Option<String>) -> Option<String>>::new(move |s: Option<String>| {
            c.borrow_mut().resume(s)
        })
        .into_js_value(),
    );
    let c = Rc::clone(core);
    set(
        "report",
        Closure::<dyn Fn(String) -> JsValue>::new(move |t: String| c.borrow_mut().report(&t))
            .into_js_value(),
    );
    let c = Rc::clone(core);
    set(
        "watch",
        Closure::<dyn Fn(String) -> JsValue>::new(move |t: String| c.borrow_mut().watch(&t))
            .into_js_value(),
    );
    let c = Rc::clone(core);
    set(
        "verdict",
        Closure::<dyn Fn() -> String>::new(move || c.borrow_mut().verdict()).into_js_value(),
    );
    let c = Rc::clone(core);
    set(
        "snapshotDue",
        Closure::<dyn Fn() -> Option<String>>::new(move || c.borrow_mut().snapshot_due())
            .into_js_value(),
    );
    let c = Rc::clone(core);
    set(
        "snapshotStored",
        Closure::<dyn Fn()>::new(move || c.borrow_mut().snapshot_stored()).into_js_value(),
    );
    let c = Rc::clone(core);
    set(
        "armIn",
        Closure::<dyn Fn() -> Option<f64>>::new(move || c.borrow_mut().arm_in()).into_js_value(),
    );
    let c = Rc::clone(core);
    set(
        "armFailed",
        Closure::<dyn Fn()>::new(move || c.borrow_mut().alarm_set = false).into_js_value(),
    );
    let c = Rc::clone(core);
    set(
        "merge",
        Closure::<dyn Fn() -> JsValue>::new(move || c.borrow_mut().merge()).into_js_value(),
    );
    let c = Rc::clone(core);
    set(
        "heed",
        Closure::<dyn Fn(bool, String) -> JsValue>::new(move |ok: bool, t: String| {
            c.borrow_mut().heed(ok, &t)
        })
        .into_js_value(),
    );
    o.into()
}

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
