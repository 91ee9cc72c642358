//! The request path: hand the request to the engine, perform each action it asks for, feed
//! back what happened with the time, and send its reply. Every branch ends in a response.

use std::time::Duration;

use understudy_core::engine::{self, Action, Bindings, Event, Incoming, Reply};
use worker::{console_log, Context, Delay, Env, Headers, Request, Response, ResponseBuilder};

use crate::isolate::{self, now};
use crate::{analytics, kv, race};

/// Secrets and vars, as the engine reads them.
struct WorkerEnv<'a>(&'a Env);

impl Bindings for WorkerEnv<'_> {
    fn secret(&self, name: &str) -> Option<String> {
        self.0.secret(name).ok().map(|s| s.to_string())
    }
    fn var(&self, name: &str) -> Option<String> {
        self.0.var(name).ok().map(|v| v.to_string())
    }
}

pub async fn serve(req: Request, env: Env, ctx: Context) -> Response {
    let arrived = now();
    let headers: Vec<(String, String)> = req.headers().entries().collect();
    let (path, query) = match req.url() {
        Ok(u) => (u.path().to_string(), u.query().unwrap_or("").to_string()),
        Err(_) => (req.path(), String::new()),
    };
    let method = req.method();
    let incoming = Incoming {
        method: method.as_ref(),
        path: &path,
        query: &query,
        headers: &headers,
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
                ..
            } => Event::Origin(race::race(&request, timeout_ms).await),
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
            } => Event::Http(race::race(&request, timeout_ms).await),
            Action::Respond(reply) => return send(*reply, &env, &ctx),
        };
        action = match isolate::with_engine(|e| e.step(&mut flight, now(), event)) {
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
fn send(reply: Reply, env: &Env, ctx: &Context) -> Response {
    console_log!("{}", reply.log);
    if let Some(point) = &reply.point {
        analytics::sink(env).write(point);
    }
    if !reply.writes.is_empty() {
        ctx.wait_until(kv::write_all(
            env.clone(),
            reply.writes,
            reply.correlation_id,
        ));
    }
    let headers = Headers::new();
    for (name, value) in &reply.headers {
        // The compiler validated every value the policy puts here; one the runtime still
        // refuses is dropped, never fatal.
        let _ = headers.set(name, value);
    }
    ResponseBuilder::new()
        .with_status(reply.status)
        .with_headers(headers)
        .fixed(reply.body.into_bytes())
}
