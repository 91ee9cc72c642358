//! One request's path through the engine: what is decided before any I/O (this file), the
//! storm verdict, breaker admission and the race ([`steps`]), and the finished answer
//! ([`finish`]).

use crate::admin;
use crate::breaker::Admission;
use crate::cascade::{Ctx, Note};
use crate::correlation::{self, Provenance};
use crate::deadline::Deadline;
use crate::disclosure;
use crate::exchange::Exchange;
use crate::metrics::Outcome;
use crate::request::RequestParts;
use crate::retry::Backoff;
use crate::storm::{self, Client};
use crate::time::Millis;
use crate::token;

use super::action::Action;
use super::finish::finish_early;
use super::outbound::Common;
use super::rng::Rng;
use super::steps::admit;
use super::trace::{self, Trace};
use super::{meta, Bindings, Engine, Incoming, Race, ORIGIN_OVERRIDE_VAR};
use crate::http::Credential;

/// Longest idempotency key forwarded to the origin.
pub const MAX_IDEMPOTENCY_KEY: usize = 256;

/// One request in flight. Created by [`Engine::start`], advanced by [`Engine::step`].
pub struct Flight<'p> {
    pub(super) started: Millis,
    pub(super) correlation_id: String,
    pub(super) provenance: Provenance,
    pub(super) trace: Trace,
    pub(super) credentialed: bool,
    pub(super) origin_url: String,
    pub(super) origin_override: bool,
    pub(super) idempotency_key: Option<String>,
    pub(super) origin_credential: Option<Credential>,
    /// Resolved secret of each HTTP tier's credential, by tier index.
    pub(super) tier_secrets: Vec<Option<String>>,
    pub(super) admission: Admission,
    /// The bulkhead slot of the origin call in flight, if one is.
    pub(super) lease: Option<super::Lease>,
    /// The request may be repeated: an idempotent call, or the client's idempotency key.
    pub(super) repeatable: bool,
    /// The origin attempt in flight took a hedge token.
    pub(super) hedge_token: bool,
    /// When the origin attempt in flight hedges (ms after it starts), and whether the
    /// hedge's answer won: the hedge's delay follows the answers' own times.
    pub(super) hedge_after_ms: Option<u64>,
    pub(super) hedge_won: bool,
    /// The KV read in flight (binding, key), for the isolate's read cache.
    pub(super) pending_kv: Option<(&'p str, String)>,
    /// Speculative tier reads this request asked for and has not read yet.
    pub(super) prefetched: Vec<(&'p str, String)>,
    /// Notes of the engine's own (a missing secret, an unreachable limiter).
    pub(super) notes: Vec<Note>,
    pub(super) stage: Stage<'p>,
}

pub(super) enum Stage<'p> {
    /// Waiting for the rate limiter's verdict.
    Limiting(Box<Race<'p>>),
    /// Racing the origin or walking the cascade.
    Racing(Box<Race<'p>>),
    /// [V-*] An event request: ingest, the operators' endpoints, the status endpoint's
    /// events block.
    Events(Box<crate::events::flow::Flow>),
    Done,
}

impl Flight<'_> {
    pub fn correlation_id(&self) -> &str {
        &self.correlation_id
    }

    pub fn trace_id(&self) -> &str {
        &self.trace.trace_id
    }

    pub fn is_done(&self) -> bool {
        matches!(self.stage, Stage::Done)
    }

    pub(super) fn note(&mut self, code: &'static str, detail: String) {
        self.notes.push(Note {
            tier: String::new(),
            code,
            detail: crate::classify::bounded(&detail),
        });
    }

    pub(super) fn common(&self) -> Common<'_> {
        Common {
            correlation_id: &self.correlation_id,
            trace: &self.trace,
        }
    }
}

pub(super) fn start<'p>(
    engine: &mut Engine<'p>,
    now: Millis,
    req: &Incoming<'_>,
    env: &dyn Bindings,
    seed: u64,
) -> (Flight<'p>, Action<'p>) {
    let policy = engine.policy();
    let mut rng = Rng::new(seed);
    let (correlation_id, provenance) =
        correlation::resolve(req.header(correlation::HEADER), || rng.bytes::<16>());
    let trace = Trace::resolve(
        req.header(trace::TRACEPARENT),
        req.header(trace::TRACESTATE),
        &mut rng,
    );
    let authorization = req.header("authorization");
    let mut f = Flight {
        started: now,
        correlation_id,
        provenance,
        trace,
        credentialed: authorization.is_some() || req.header("cookie").is_some(),
        origin_url: policy.origin.url.clone(),
        origin_override: false,
        idempotency_key: None,
        origin_credential: None,
        tier_secrets: Vec::new(),
        admission: Admission::Reject,
        lease: None,
        pending_kv: None,
        prefetched: Vec::new(),
        repeatable: false,
        hedge_token: false,
        hedge_after_ms: None,
        hedge_won: false,
        notes: Vec::new(),
        stage: Stage::Done,
    };

    // The admin status endpoint.
    if let Some(a) = policy.admin.as_ref().filter(|a| a.path == req.path) {
        let m = meta(&f.correlation_id, &engine.bake.release_id, true);
        let authorized = admin::authorized(authorization, env.secret(&a.secret).as_deref());
        let rendered = if authorized {
            let fresh = engine
                .freshness
                .json(policy, engine.bake.catalog.as_ref(), now);
            admin::status(
                &policy.service.name,
                &mut engine.breaker,
                &engine.counters,
                fresh,
                now,
                &m,
            )
        } else {
            admin::unauthorized(&m)
        };
        if let (true, Some(ev)) = (authorized, &policy.events) {
            // The events block needs every shard's figures.
            let action = super::events::status(engine, &mut f, now, &rendered, ev);
            return (f, action);
        }
        let action = finish_early(engine, &f, now, rendered, Outcome::Admin, None);
        return (f, action);
    }

    // [V-*] Event ingest and the operators' events endpoints.
    if let Some(ev) = policy
        .events
        .as_ref()
        .filter(|ev| crate::events::flow::handles(ev, req.path))
    {
        let action = super::events::start(engine, &mut f, now, req, env, ev);
        return (f, action);
    }

    // Verified identity: only a valid token's claims can fill `token_claim` parameters.
    let claims = match (&policy.identity, authorization.and_then(token::bearer)) {
        (Some(rules), Some(tok)) => {
            // A missing secret verifies nothing (`NoKey`); it never makes tokens forgeable.
            let key = env.secret(&rules.secret).unwrap_or_default();
            match engine.tokens.verify(tok, key.as_bytes(), rules, now) {
                Ok(c) => Some(c.into_map()),
                Err(e) => {
                    let m = meta(&f.correlation_id, &engine.bake.release_id, true);
                    let mut r =
                        disclosure::error(401, "INVALID_TOKEN", e.client_message(), false, &m);
                    r.headers.push(("WWW-Authenticate", "Bearer".into()));
                    let reason = Some(format!("INVALID_TOKEN: {}", e.reason()));
                    let action = finish_early(engine, &f, now, r, Outcome::Unauthorized, reason);
                    return (f, action);
                }
            }
        }
        _ => None,
    };
    f.credentialed |= claims.is_some();

    // [E-INPUT] Nothing below runs before the parameters are valid.
    let parts = RequestParts {
        method: req.method,
        path: req.path,
        query: req.query,
        headers: req.headers,
        claims: claims.as_ref(),
    };
    let params = match engine.validator.validate(&parts) {
        Ok(p) => p,
        Err(rej) => {
            let m = meta(&f.correlation_id, &engine.bake.release_id, f.credentialed);
            let r = disclosure::error(rej.status, rej.code, &rej.message, false, &m);
            let action = finish_early(
                engine,
                &f,
                now,
                r,
                Outcome::BadRequest,
                Some(rej.code.to_string()),
            );
            return (f, action);
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
                f.origin_credential = Some(Credential::new(&policy.origin.credential_header, &v))
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
        .map(|t| match &t.kind {
            crate::policy::TierKind::Http(h) => {
                h.credential_secret.as_deref().and_then(|n| env.secret(n))
            }
            _ => None,
        })
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
        catalog: engine.bake.catalog.as_ref(),
        params,
        deadline: Deadline::new(now, policy.budget),
    };
    let retry = Backoff::new(&policy.origin, f.idempotency_key.is_some(), rng);
    let race = Box::new(Exchange::with_retry(ctx, retry));
    match storm_key {
        Some((binding, key)) => {
            f.stage = Stage::Limiting(race);
            (f, Action::Limit { binding, key })
        }
        None => {
            let action = admit(engine, &mut f, now, race);
            (f, action)
        }
    }
}
