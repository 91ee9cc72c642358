//! The request path: correlation ID, bake, parameters, then the core's exchange driven to
//! an answer, the answer rendered, one log line written. Every branch ends in a response.

use std::time::Duration;

use serde_json::json;
use understudy_core::breaker::{Admission, Outcome as BreakerOutcome};
use understudy_core::cascade::Ctx;
use understudy_core::classify::{Failure, FailureReason};
use understudy_core::correlation::{self, Provenance};
use understudy_core::deadline::Deadline;
use understudy_core::disclosure::{self, Meta, Rendered};
use understudy_core::exchange::{Action, Answer, Event, Exchange, Gate};
use understudy_core::metrics::{data_point, Outcome as Counted};
use understudy_core::policy::{Method as PolicyMethod, Policy};
use understudy_core::request::{Params, RequestParts};
use understudy_core::retry::Backoff;
use understudy_core::writethrough;
use worker::{
    console_log, Context, Delay, Env, Headers, Method, Request, RequestInit, Response, Url,
};

use crate::isolate::{self, now, random16};
use crate::{analytics, guard, identity, kv, race, respond::to_response};

/// Wrangler `[vars]` entry that points the origin elsewhere (local dev and tests).
pub const ORIGIN_OVERRIDE_VAR: &str = "UNDERSTUDY_ORIGIN_URL";

/// What the log line says about a request.
struct Log {
    correlation_id: String,
    provenance: Provenance,
    outcome: &'static str,
    status: u16,
    tier: Option<String>,
    reason: Option<String>,
    notes: Vec<serde_json::Value>,
    attempts: usize,
    origin_override: bool,
    policy_version: String,
    /// The breaker's mode after this request (`X-Breaker-Mode`).
    breaker_mode: &'static str,
    /// `X-Degraded-Reason` of a fallback or unavailable answer, for the counters.
    degraded_reason: Option<&'static str>,
    service: String,
    /// Where the request's Analytics Engine data point goes.
    analytics: Box<dyn analytics::Sink>,
}

pub async fn serve(req: Request, env: Env, ctx: Context) -> Response {
    let started = now();
    let headers: Vec<(String, String)> = req.headers().entries().collect();
    let incoming = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(correlation::HEADER))
        .map(|(_, v)| v.as_str());
    let (cid, provenance) = correlation::resolve(incoming, random16);
    let mut log = Log {
        correlation_id: cid.clone(),
        provenance,
        outcome: "bake_invalid",
        status: 503,
        tier: None,
        reason: None,
        notes: Vec::new(),
        attempts: 0,
        origin_override: false,
        policy_version: "none".into(),
        breaker_mode: "UNKNOWN",
        degraded_reason: None,
        service: "unknown".into(),
        analytics: analytics::sink(&env),
    };

    let loaded = match isolate::loaded() {
        Ok(l) => l,
        Err(message) => {
            log.reason = Some(message.clone());
            return finish(disclosure::bake_invalid(&message, &cid), log, started);
        }
    };
    let bake = &loaded.bake;
    let policy = &bake.policy;
    log.policy_version = bake.release_id.clone();
    log.service = policy.service.name.clone();
    let meta = Meta {
        correlation_id: &cid,
        policy_version: &bake.release_id,
    };
    log.breaker_mode = loaded.breaker.borrow_mut().mode_name(started);

    // [E-INPUT] Nothing below runs before the parameters are valid.
    let (path, query) = match req.url() {
        Ok(u) => (u.path().to_string(), u.query().unwrap_or("").to_string()),
        Err(_) => (req.path(), String::new()),
    };
    let method = req.method();
    if let Some(r) = guard::admin(
        &path,
        &headers,
        &env,
        policy,
        &mut loaded.breaker.borrow_mut(),
        now(),
        &meta,
    ) {
        log.outcome = "admin";
        return finish(r, log, started);
    }
    let claims = match identity::claims(&headers, &env, policy, now()) {
        Ok(c) => c,
        Err(e) => {
            log.outcome = "rejected";
            log.reason = Some(format!("INVALID_TOKEN: {}", e.reason()));
            let mut r = disclosure::error(401, "INVALID_TOKEN", e.client_message(), false, &meta);
            r.headers.push(("WWW-Authenticate", "Bearer".into()));
            return finish(r, log, started);
        }
    };
    let parts = RequestParts {
        method: method.as_ref(),
        path: &path,
        query: &query,
        headers: &headers,
        claims: claims.as_ref(),
    };
    let params = match loaded.validator.validate(&parts) {
        Ok(p) => p,
        Err(rej) => {
            log.outcome = "rejected";
            log.reason = Some(rej.code.to_string());
            return finish(
                disclosure::error(rej.status, rej.code, &rej.message, false, &meta),
                log,
                started,
            );
        }
    };
    let subject = claims
        .as_ref()
        .and_then(|c| c.get("sub"))
        .map(String::as_str);
    if let Some(r) = guard::storm(
        &env,
        policy,
        method.as_ref(),
        &headers,
        subject,
        &params,
        &meta,
    )
    .await
    {
        log.outcome = "storm_limited";
        log.reason = Some("ERR_RETRY_STORM_DETECTED".into());
        return finish(r, log, started);
    }
    // The client's idempotency key, forwarded unchanged to every attempt.
    let idempotency_key = policy.origin.idempotency_key_header.as_ref().and_then(|h| {
        headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(h))
            .map(|(_, v)| v.clone())
            .filter(|v| !v.is_empty() && v.len() <= 256 && !v.chars().any(char::is_control))
    });

    let override_url = env
        .var(ORIGIN_OVERRIDE_VAR)
        .ok()
        .map(|v| v.to_string())
        .filter(|v| !v.is_empty());
    log.origin_override = override_url.is_some();
    let origin_url = override_url.as_deref().unwrap_or(&policy.origin.url);

    let ctx_core = Ctx {
        policy,
        catalog: bake.catalog.as_ref(),
        params: &params,
        deadline: Deadline::new(started, policy.budget),
    };
    let retry = Backoff::new(
        &policy.origin,
        idempotency_key.is_some(),
        js_sys::Math::random,
    );
    let mut exchange = Exchange::with_retry(ctx_core, retry);
    // [E-BREAKER] The isolate's breaker decides whether this request may call the model.
    let admission = loaded.breaker.borrow_mut().admit(now());
    let gate = if admission.calls_origin() {
        Gate::Allow
    } else {
        Gate::Open
    };
    let mut action = exchange.step(now(), Event::Start(gate));
    let answer = loop {
        action = match action {
            Action::FetchOrigin { timeout_ms, .. } => {
                let attempt_started = now();
                let result = match origin_request(
                    policy,
                    origin_url,
                    &params,
                    &cid,
                    idempotency_key.as_deref(),
                    &env,
                ) {
                    Ok(r) => {
                        race::race(
                            r,
                            timeout_ms,
                            policy.origin.max_body_bytes,
                            &policy.origin.result_path,
                        )
                        .await
                    }
                    Err(e) => Err(Failure::new(FailureReason::MlConnect, e)),
                };
                let ended = now();
                let latency = ended.since(attempt_started);
                let outcome = match &result {
                    Ok(_) => BreakerOutcome::success(latency),
                    Err(f) if f.reason == FailureReason::MlTimeout => {
                        BreakerOutcome::timeout(latency)
                    }
                    Err(_) => BreakerOutcome::failure(latency),
                };
                if admission != Admission::Reject {
                    loaded
                        .breaker
                        .borrow_mut()
                        .record(ended, admission, outcome);
                }
                exchange.step(ended, Event::Origin(result))
            }
            Action::Wait { ms } => {
                Delay::from(Duration::from_millis(ms)).await;
                exchange.step(now(), Event::Woke)
            }
            Action::ReadKv {
                binding,
                key,
                timeout_ms,
                ..
            } => {
                let read = kv::read(&env, binding, &key, timeout_ms).await;
                exchange.step(now(), Event::Kv(read))
            }
            Action::FetchHttp {
                url,
                timeout_ms,
                credential_secret,
                result_path,
                ..
            } => {
                let result = match tier_request(url, credential_secret, &cid, &env) {
                    Ok(r) => {
                        race::race(r, timeout_ms, policy.origin.max_body_bytes, result_path).await
                    }
                    Err(e) => Err(Failure::new(FailureReason::MlConnect, e)),
                };
                exchange.step(now(), Event::Http(result))
            }
            Action::Respond(answer) => break answer,
        };
    };

    log.attempts = exchange.attempts().len();
    log.breaker_mode = loaded.breaker.borrow_mut().mode_name(now());
    log.notes = exchange
        .notes()
        .iter()
        .map(|n| json!({"tier": n.tier, "code": n.code, "detail": n.detail}))
        .collect();
    if let Some(f) = exchange.failure() {
        log.reason = Some(format!("{}: {}", f.reason.code(), f.detail));
    }
    match &answer {
        Answer::Live { items, .. } => {
            log.outcome = "live";
            let at = now();
            let writes =
                isolate::with_writes(|wt| writethrough::plan(policy, &params, items, at, wt));
            if !writes.is_empty() {
                ctx.wait_until(kv::write_all(env.clone(), writes, cid.clone()));
            }
        }
        Answer::Fallback(f) => {
            log.outcome = "fallback";
            log.tier = Some(f.tier.clone());
            log.degraded_reason = Some(f.reason.code());
        }
        Answer::Unavailable { failure, .. } => {
            log.outcome = "unavailable";
            log.degraded_reason = Some(failure.reason.code());
        }
    }
    finish(disclosure::render(&answer, policy, &meta), log, started)
}

/// The origin request: validated parameters in the query string (or a JSON body for
/// methods with one), the correlation ID, and the credential from its secret binding.
fn origin_request(
    policy: &Policy,
    base: &str,
    params: &Params,
    cid: &str,
    idempotency_key: Option<&str>,
    env: &Env,
) -> Result<Request, String> {
    let o = &policy.origin;
    let mut url = Url::parse(base).map_err(|_| "origin URL does not parse".to_string())?;
    let has_body = matches!(
        o.method,
        PolicyMethod::Post | PolicyMethod::Put | PolicyMethod::Patch
    );
    if !has_body {
        let mut q = url.query_pairs_mut();
        for v in &params.values {
            q.append_pair(&v.name, &v.value);
        }
    }
    let headers = Headers::new();
    let _ = headers.set("Accept", "application/json");
    let _ = headers.set(correlation::HEADER, cid);
    if let Some(name) = &o.credential_secret {
        set_credential(&headers, env, name, &o.credential_header);
    }
    if let (Some(h), Some(k)) = (&o.idempotency_key_header, idempotency_key) {
        let _ = headers.set(h, k);
    }
    let mut init = RequestInit::new();
    init.with_method(Method::from(o.method.as_str().to_string()));
    if has_body {
        let _ = headers.set("Content-Type", "application/json");
        let body: serde_json::Map<String, serde_json::Value> = params
            .values
            .iter()
            .map(|v| (v.name.clone(), serde_json::Value::from(v.value.clone())))
            .collect();
        init.with_body(Some(wasm_bindgen::JsValue::from_str(
            &serde_json::Value::Object(body).to_string(),
        )));
    }
    init.with_headers(headers);
    Request::new_with_init(url.as_str(), &init)
        .map_err(|_| "origin request could not be built".to_string())
}

/// An HTTP tier's request: its own credential only, never the origin's [E-SECRET], and no
/// user parameters beyond the correlation ID.
fn tier_request(
    url: &str,
    credential_secret: Option<&str>,
    cid: &str,
    env: &Env,
) -> Result<Request, String> {
    let headers = Headers::new();
    let _ = headers.set("Accept", "application/json");
    let _ = headers.set(correlation::HEADER, cid);
    if let Some(name) = credential_secret {
        set_credential(&headers, env, name, "Authorization");
    }
    let mut init = RequestInit::new();
    init.with_headers(headers);
    Request::new_with_init(url, &init).map_err(|_| "tier request could not be built".to_string())
}

/// [E-SECRET] The credential goes into one request header and nowhere else (not the log).
fn set_credential(headers: &Headers, env: &Env, secret: &str, header: &str) {
    match env.secret(secret) {
        Ok(s) => {
            let value = s.to_string();
            let value = if header.eq_ignore_ascii_case("authorization") {
                format!("Bearer {value}")
            } else {
                value
            };
            let _ = headers.set(header, &value);
        }
        Err(_) => console_log!(
            "{}",
            json!({"event": "secret_missing", "secret_binding": secret})
        ),
    }
}

fn finish(mut rendered: Rendered, mut log: Log, started: understudy_core::Millis) -> Response {
    log.status = rendered.status;
    rendered
        .headers
        .push(("X-Breaker-Mode", log.breaker_mode.to_string()));
    let counted = match log.outcome {
        "live" => Some(Counted::Live),
        "fallback" => Some(Counted::Fallback {
            tier: log.tier.as_deref().unwrap_or(""),
            reason: log.degraded_reason.unwrap_or(""),
        }),
        "unavailable" => Some(Counted::Unavailable {
            reason: log.degraded_reason.unwrap_or(""),
        }),
        "rejected" if log.status == 401 => Some(Counted::Unauthorized),
        "rejected" => Some(Counted::BadRequest),
        "storm_limited" => Some(Counted::Storm),
        "bake_invalid" => Some(Counted::BakeInvalid),
        _ => None,
    };
    let latency_ms = now().since(started);
    if let Some(c) = counted {
        crate::isolate::with_counters(|k| k.record(c));
        log.analytics.write(&data_point(
            &log.service,
            &log.policy_version,
            c,
            latency_ms,
            log.breaker_mode,
        ));
    }
    let line = json!({
        "correlation_id": log.correlation_id,
        "correlation": log.provenance.as_str(),
        "outcome": log.outcome,
        "status": log.status,
        "tier": log.tier,
        "reason": log.reason,
        "notes": log.notes,
        "attempts": log.attempts,
        "latency_ms": latency_ms,
        "origin_override": log.origin_override,
        "policy_version": log.policy_version,
        "breaker_mode": log.breaker_mode,
    });
    console_log!("{}", line);
    to_response(rendered)
}
