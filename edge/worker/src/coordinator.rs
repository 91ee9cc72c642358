//! [F-SCOPE] The breaker's coordinator: a Durable Object that merges the isolates' reports
//! and answers each with the fleet's verdict, and holds their watches until the fleet opens
//! or closes (docs/adr/011-fleet-scoped-breaker.md). Every decision is
//! `understudy_core::breaker::fleet::Coordinator`'s; this module reads the request and
//! writes the answer.
//!
//! It is soft state: kept in memory, rebuilt from the next round of reports after a restart
//! (each report carries the isolate's whole window); a restart drops the held watches, and
//! their isolates watch again with their next request. The object runs in the same Worker
//! as the isolates, so it has the bake: its breaker settings are the policy's, and a report
//! made under other settings (another release) is refused, never merged. Nothing here may
//! panic: every problem is an HTTP answer the isolate counts as a failed report.

use std::cell::{Cell, RefCell};
use std::time::Duration;

use futures_channel::oneshot;
use futures_util::future::{select, Either};
use understudy_core::breaker::fleet::{settings_hash, Coordinator, Verdict, WATCH_MS};
use understudy_core::policy::{Breaker, Scope};
use worker::{durable_object, Delay, DurableObject, Env, Request, Response, Result, State};

use crate::isolate;

/// Held watches below which no sweep runs.
const SWEEP_MIN: usize = 64;

#[durable_object]
pub struct BreakerCoordinator {
    /// Built from the bake at the first report.
    inner: RefCell<Option<Coordinator>>,
    /// The watches held: each is answered with the verdict when the fleet opens or closes.
    watchers: RefCell<Vec<oneshot::Sender<String>>>,
    /// How many held watches make the next sweep of those whose caller is gone.
    sweep_at: Cell<usize>,
}

impl DurableObject for BreakerCoordinator {
    fn new(_state: State, _env: Env) -> Self {
        BreakerCoordinator {
            inner: RefCell::new(None),
            watchers: RefCell::new(Vec::new()),
            sweep_at: Cell::new(SWEEP_MIN),
        }
    }

    async fn fetch(&self, mut req: Request) -> Result<Response> {
        let watch = req.path() == "/watch";
        let text = match req.text().await {
            Ok(t) => t,
            Err(e) => return Response::error(format!("unreadable request: {e}"), 400),
        };
        if watch {
            return self.watch(&text).await;
        }
        let answer = self.with(|c| {
            let verdict = Coordinator::parse(&text).and_then(|r| c.report(isolate::now(), r));
            verdict.map_err(|refusal| (refusal.message(), refusal.status()))
        });
        match answer {
            Ok(body) => Response::ok(body),
            Err((message, status)) => Response::error(message, status),
        }
    }
}

impl BreakerCoordinator {
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
    /// held until it opens or closes, or [`WATCH_MS`] passed (then with the verdict as it
    /// stands).
    async fn watch(&self, text: &str) -> Result<Response> {
        let mut held = None;
        let answer = self.with(|c| {
            let now = isolate::now();
            let w = Coordinator::parse_watch(text).map_err(|r| (r.message(), r.status()))?;
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
        let body = match (answer, held) {
            (Err((message, status)), _) => return Response::error(message, status),
            (Ok(body), None) => body,
            (Ok(_), Some(rx)) => {
                let timeout = Delay::from(Duration::from_millis(WATCH_MS));
                match select(rx, timeout).await {
                    Either::Left((Ok(body), _)) => body,
                    // Timed out, or the object dropped its watchers: the verdict as it stands.
                    _ => match self.with(|c| Ok(c.verdict(isolate::now()))) {
                        Ok(body) => body,
                        Err((message, status)) => return Response::error(message, status),
                    },
                }
            }
        };
        Response::ok(body)
    }
}

/// The coordinator for this Worker's bake: its service, its breaker settings.
fn coordinator() -> std::result::Result<Coordinator, String> {
    let (service, rate) = isolate::with_engine(|e| {
        let p = e.policy();
        match &p.breaker {
            Breaker::Rate(r) => Some((p.service.name.clone(), r.clone())),
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
        &settings_hash(&rate),
        rate,
        interval,
    ))
}
