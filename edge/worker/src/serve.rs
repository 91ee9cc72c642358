//! The request path: hand the request to the engine, perform each action it asks for, feed
//! back what happened with the time, and send its reply. Every branch ends in a response.

use std::time::Duration;

use understudy_core::engine::{self, Action, Bindings, Event, Incoming, Reply};
use worker::{console_log, web_sys, Context, Delay, Env};

use crate::isolate::{self, now};
use crate::{analytics, body, kv, race, shards, shim};

/// Secrets and vars, as the engine reads them — each read from the environment once per
/// isolate (a changed secret or var is a new deployment, hence a new isolate).
struct WorkerEnv<'a>(&'a Env);

impl Bindings for WorkerEnv<'_> {
    fn secret(&self, name: &str) -> Option<String> {
        isolate::binding(name, || self.0.secret(name).ok().map(|s| s.to_string()))
    }
    fn var(&self, name: &str) -> Option<String> {
        isolate::binding(name, || self.0.var(name).ok().map(|v| v.to_string()))
    }
    fn random_bytes(&self, buf: &mut [u8]) -> bool {
        isolate::random_bytes(buf)
    }
}

pub async fn serve(req: web_sys::Request, env: Env, ctx: Context) -> web_sys::Response {
    let arrived = now();
    let r = shim::incoming(&req);
    // The URL is absolute (`scheme://host/path?query#fragment`): the path starts at the
    // first `/` after `://`, the query after the first `?`.
    let after_scheme = r.url.find("://").map_or(0, |i| i + 3);
    let target = r.url[after_scheme..]
        .find('/')
        .map_or("/", |i| &r.url[after_scheme + i..]);
    let target = target.split('#').next().unwrap_or(target);
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let incoming = Incoming {
        method: &r.method,
        path,
        query,
        headers: &r.headers,
    };
    let seed = isolate::seed();
    let started = isolate::with_engine(|e| e.start(arrived, &incoming, &WorkerEnv(&env), seed));
    let (mut flight, mut action) = match started {
        Ok(s) => s,
        Err(message) => {
            return send(
                engine::unbaked(arrived, &incoming, &message, seed),
                &env,
                &ctx,
            )
        }
    };
    loop {
        let event = match action {
            Action::Limit { binding, key } => Event::Limited(limit(&env, binding, key).await),
            Action::FetchOrigin {
                timeout_ms,
                request,
                hedge_after_ms,
                ..
            } => race::origin(&request, timeout_ms, hedge_after_ms).await,
            Action::Wait { ms } => {
                Delay::from(Duration::from_millis(ms)).await;
                Event::Woke
            }
            Action::ReadKv {
                binding,
                key,
                timeout_ms,
                ..
            } => Event::Kv(kv::read(&env, binding, &key, timeout_ms).await),
            Action::FetchHttp {
                timeout_ms,
                request,
                ..
            } => race::tier(&request, timeout_ms).await,
            Action::ReadBody { max_bytes } => Event::Body(body::read(&req, max_bytes).await),
            Action::CallShards { calls } => Event::Shards(shards::call_all(&env, calls).await),
            Action::Respond(reply) => return send(*reply, &env, &ctx),
        };
        let lag = matches!(event, Event::Origin(_) | Event::OriginHedged { .. }).then(shim::lag_ms);
        action = match isolate::with_engine(|e| {
            if let Some(ms) = lag {
                e.set_queue_delay(ms);
            }
            e.step(&mut flight, now(), event)
        }) {
            Ok(a) => a,
            Err(message) => {
                return send(
                    engine::unbaked(now(), &incoming, &message, seed),
                    &env,
                    &ctx,
                )
            }
        };
    }
}

/// [E-STORM] The Rate Limiting binding's verdict for `key`.
async fn limit(env: &Env, binding: &str, key: String) -> Result<bool, String> {
    let limiter = env.rate_limiter(binding).map_err(|e| e.to_string())?;
    limiter
        .limit(key)
        .await
        .map(|o| o.success)
        .map_err(|e| e.to_string())
}

/// Sends the engine's reply: the response, the log line, the data point, and the
/// write-through in the background.
fn send(reply: Reply, env: &Env, ctx: &Context) -> web_sys::Response {
    console_log!("{}", reply.log);
    if let Some(point) = &reply.point {
        analytics::write(env, point);
    }
    if !reply.writes.is_empty() {
        ctx.wait_until(kv::write_all(
            env.clone(),
            reply.writes,
            reply.correlation_id,
        ));
    }
    // The compiler validated every value the policy puts here; one the runtime still
    // refuses is dropped, never fatal.
    shim::response(reply.status, &reply.headers, &reply.body)
}
