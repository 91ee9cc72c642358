//! A request's start: what is decided before any I/O — correlation and trace context, the
//! admin endpoint, the token, the parameters (400/404/405 before any I/O), the secrets —
//! then the retry-storm limiter's call or the first attempt ([`super::race`]).

use crate::admin;
use crate::cascade::Ctx;
use crate::correlation;
use crate::deadline::Deadline;
use crate::disclosure;
use crate::http::Credential;
use crate::io::Op;
use crate::metrics::Outcome;
use crate::request::RequestParts;
use crate::retry::Backoff;
use crate::storm::{self, Client};
use crate::time::Millis;
use crate::token;

use super::command::{Command, Output};
use super::flight::{Flight, Req, Stage};
use super::rng::Rng;
use super::steps::Step;
use super::timers::Timer;
use super::trace::{self, Trace};
use super::{meta, Bindings, Engine, Incoming, ORIGIN_OVERRIDE_VAR};

/// Longest idempotency key forwarded to the origin.
pub const MAX_IDEMPOTENCY_KEY: usize = 256;

/// A request arrived at `now`: its flight, and what to do first.
pub(super) fn start<'p>(
    engine: &mut Engine<'p>,
    now: Millis,
    req: &Incoming<'_>,
    env: &dyn Bindings,
    seed: u64,
) -> (Flight<'p>, Output<'p>) {
    let policy = engine.policy();
    engine.identify(seed);
    let mut rng = Rng::new(seed);
    let (correlation_id, provenance) =
        correlation::resolve(req.header(correlation::HEADER), || rng.bytes::<16>());
    let trace = Trace::resolve(
        req.header(trace::TRACEPARENT),
        req.header(trace::TRACESTATE),
        &mut rng,
    );
    let mut f = Flight {
        started: now,
        correlation_id,
        provenance,
        trace,
        credentialed: req.header("authorization").is_some() || req.header("cookie").is_some(),
        origin_url: policy.origin.url.clone(),
        origin_override: false,
        idempotency_key: None,
        origin_credential: None,
        tier_secrets: Vec::new(),
        prefetched: Vec::new(),
        repeatable: false,
        notes: Vec::new(),
        armed: None,
        timers: Default::default(),
        stage: Stage::Done,
    };
    let mut step = Step::new(engine, &mut f, now);
    step.begin(req, env, rng);
    let out = step.output();
    (f, out)
}

impl<'p> Step<'_, 'p> {
    /// What is decided before any I/O, then the storm limiter's call or the first attempt.
    fn begin(&mut self, req: &Incoming<'_>, env: &dyn Bindings, rng: Rng) {
        let now = self.now;
        let policy = self.engine.policy();
        let authorization = req.header("authorization");

        // The admin status endpoint.
        if let Some(a) = policy.admin.as_ref().filter(|a| a.path == req.path) {
            let engine = &mut *self.engine;
            let m = meta(&self.flight.correlation_id, &engine.bake.release_id, true);
            let authorized = admin::authorized(authorization, env.secret(&a.secret).as_deref());
            let rendered = if authorized {
                let fresh = engine
                    .curated
                    .status(policy, engine.bake.catalog.as_ref(), now);
                admin::status(
                    &policy.service.name,
                    engine.health.status(now),
                    &engine.counters,
                    fresh,
                    &m,
                )
            } else {
                admin::unauthorized(&m)
            };
            match (authorized, &policy.events) {
                // The events block needs every shard's figures.
                (true, Some(ev)) => self.event_status(&rendered, ev),
                _ => self.finish_early(rendered, Outcome::Admin, None),
            }
            return;
        }

        // [V-*] Event ingest and the operators' events endpoints.
        if let Some(ev) = policy
            .events
            .as_ref()
            .filter(|ev| crate::events::flow::handles(ev, req.path))
        {
            self.event_start(req, env, ev);
            return;
        }

        // Verified identity: only a valid token's claims can fill `token_claim` parameters.
        let claims = match (&policy.identity, authorization.and_then(token::bearer)) {
            (Some(rules), Some(tok)) => {
                // A missing secret verifies nothing (`NoKey`); it never makes tokens
                // forgeable.
                let key = env.secret(&rules.secret).unwrap_or_default();
                match self.engine.tokens.verify(tok, key.as_bytes(), rules, now) {
                    Ok(c) => Some(c.into_map()),
                    Err(e) => {
                        let m = meta(
                            &self.flight.correlation_id,
                            &self.engine.bake.release_id,
                            true,
                        );
                        let mut r =
                            disclosure::error(401, "INVALID_TOKEN", e.client_message(), false, &m);
                        r.headers.push(("WWW-Authenticate", "Bearer".into()));
                        let reason = Some(format!("INVALID_TOKEN: {}", e.reason()));
                        self.finish_early(r, Outcome::Unauthorized, reason);
                        return;
                    }
                }
            }
            _ => None,
        };
        let f = &mut *self.flight;
        f.credentialed |= claims.is_some();

        // [E-INPUT] Nothing below runs before the parameters are valid.
        let parts = RequestParts {
            method: req.method,
            path: req.path,
            query: req.query,
            headers: req.headers,
            claims: claims.as_ref(),
        };
        let params = match self.engine.validator.validate(&parts) {
            Ok(p) => p,
            Err(rej) => {
                let m = meta(
                    &f.correlation_id,
                    &self.engine.bake.release_id,
                    f.credentialed,
                );
                let r = disclosure::error(rej.status, rej.code, &rej.message, false, &m);
                self.finish_early(r, Outcome::BadRequest, Some(rej.code.to_string()));
                return;
            }
        };

        // The client's idempotency key, forwarded unchanged to every attempt.
        f.idempotency_key = policy
            .origin
            .idempotency_key_header
            .as_deref()
            .and_then(|h| req.header(h))
            .filter(|v| {
                !v.is_empty() && v.len() <= MAX_IDEMPOTENCY_KEY && !v.chars().any(char::is_control)
            })
            .map(str::to_string);
        f.repeatable = policy.origin.idempotent
            || (f.idempotency_key.is_some() && policy.origin.idempotency_key_header.is_some());
        if let Some(url) = env.var(ORIGIN_OVERRIDE_VAR).filter(|v| !v.is_empty()) {
            f.origin_url = url;
            f.origin_override = true;
        }
        // [E-SECRET] The credential goes into the origin request and nowhere else.
        if let Some(name) = &policy.origin.credential_secret {
            match env.secret(name) {
                Some(v) => {
                    f.origin_credential =
                        Some(Credential::new(&policy.origin.credential_header, &v))
                }
                None => f.note(
                    "SECRET_MISSING",
                    format!("secret binding `{name}` is not set"),
                ),
            }
        }
        f.tier_secrets = policy
            .cascade
            .tiers
            .iter()
            .map(|t| t.kind.secret().and_then(|s| env.secret(s.value)))
            .collect();

        let subject = claims.as_ref().and_then(|c| c.get("sub")).cloned();
        let storm_key = policy.storm.as_ref().map(|s| {
            let client = match (&subject, req.header("cf-connecting-ip")) {
                (Some(sub), _) => Client::Verified(sub),
                (None, Some(ip)) => Client::Address(ip),
                (None, None) => Client::Unknown,
            };
            (
                s.binding.as_str(),
                storm::key(client, req.method, &policy.service.route, &params),
            )
        });
        let ctx = Ctx {
            policy,
            catalog: self.engine.bake.catalog.as_ref(),
            params,
            deadline: Deadline::new(now, policy.budget),
        };
        let retry = Backoff::new(&policy.origin, f.idempotency_key.is_some(), rng);
        let req = Box::new(Req {
            ctx,
            retry,
            attempts: Vec::new(),
            calls: Default::default(),
            calling: None,
            last_failure: None,
            walker: None,
            tier: None,
            open: Vec::new(),
            asking: false,
        });
        match storm_key {
            Some((binding, key)) => {
                let io = self.engine.ios.next();
                self.cmds.push(Command::Start {
                    io,
                    op: Op::Limit { binding, key },
                });
                // The limiter's verdict is awaited at most until the race deadline.
                f.timers.set(Timer::Limiter, req.ctx.deadline.origin_end());
                f.stage = Stage::Limiting { io, req };
            }
            None => self.serve(req, |s, r| s.attempt(r)),
        }
    }
}
