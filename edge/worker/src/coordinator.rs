//! [F-SCOPE] The breaker's coordinator: a Durable Object that merges the isolates' reports
//! and answers each with the fleet's verdict (docs/adr/011-fleet-scoped-breaker.md). Every
//! decision is `understudy_core::breaker::fleet::Coordinator`'s; this module reads the
//! report and writes the answer.
//!
//! It is soft state: kept in memory, rebuilt from the next round of reports after a restart
//! (each report carries the isolate's whole window). The object runs in the same Worker as
//! the isolates, so it has the bake: its breaker settings are the policy's, and a report
//! made under other settings (another release) is refused, never merged. Nothing here may
//! panic: every problem is an HTTP answer the isolate counts as a failed report.

use std::cell::RefCell;

use understudy_core::breaker::fleet::{settings_hash, Coordinator};
use understudy_core::policy::{Breaker, Scope};
use worker::{durable_object, DurableObject, Env, Request, Response, Result, State};

use crate::isolate;

#[durable_object]
pub struct BreakerCoordinator {
    /// Built from the bake at the first report.
    inner: RefCell<Option<Coordinator>>,
}

impl DurableObject for BreakerCoordinator {
    fn new(_state: State, _env: Env) -> Self {
        BreakerCoordinator {
            inner: RefCell::new(None),
        }
    }

    async fn fetch(&self, mut req: Request) -> Result<Response> {
        let text = match req.text().await {
            Ok(t) => t,
            Err(e) => return Response::error(format!("unreadable report: {e}"), 400),
        };
        let now = isolate::now();
        let mut inner = self.inner.borrow_mut();
        if inner.is_none() {
            match coordinator() {
                Ok(c) => *inner = Some(c),
                Err(e) => return Response::error(e, 503),
            }
        }
        let Some(c) = inner.as_mut() else {
            return Response::error("no coordinator", 503);
        };
        match Coordinator::parse(&text).and_then(|r| c.report(now, r)) {
            Ok(verdict) => match serde_json::to_string(&verdict) {
                Ok(body) => Response::ok(body),
                Err(e) => Response::error(format!("cannot write the verdict: {e}"), 500),
            },
            Err(refusal) => Response::error(refusal.message(), refusal.status()),
        }
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
