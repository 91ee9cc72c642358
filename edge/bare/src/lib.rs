//! The floor `understudy bench` measures the edge against: the same origin call the
//! Understudy Worker makes (POST of the query parameters as JSON, the correlation ID, JSON
//! accepted) and the origin's answer passed through — no deadline, no breaker, no cascade,
//! no disclosure, no log line. Whatever the edge costs on top of this is the shell's price.
//!
//! Built with `--features obliged` (`scripts/build-edge.sh --bare-obliged`, into
//! edge/bare/build-obliged) it also does what any Worker keeping the edge's promises must do
//! on a healthy request, and nothing more: verify the caller's HS256 token (the core's own
//! `token::verify`, against `TOKEN_HMAC_KEY`, `BARE_ISSUER`, `BARE_AUDIENCE`), write a log
//! line the size of the edge's, answer with the edge's disclosure headers, and — when the
//! bench's policy has a write-through tier (`BARE_WRITE_BINDING`, `BARE_WRITE_PREFIX`) —
//! write the origin's body back to KV in the background under the key prefix and the
//! token's subject, once per key per isolate (issued from the next task, as the edge's put
//! is). That is as many writes as the edge makes when the tier's key is the prefix and the
//! caller's subject (recommendations.toml: `user_rec:{user_id}`) and the bench lasts less
//! than its refresh interval; it is not the edge's rendered entry or hashed key, and a
//! failed write is logged, not retried. A tier keyed otherwise gets no writes here. All written the direct workers-rs way (the secret read and one call into
//! JavaScript per header on every request). `understudy bench` runs it beside the plain floor and the edge
//! (`cpu_us_healthy_steps`): what those promises cost when kept the direct way, against the
//! edge, which keeps them and more with one crossing per step.
#![forbid(unsafe_code)]

use worker::{event, Context, Env, Headers, Method, Request, RequestInit, Response, Result, Url};

/// The var holding the origin's URL (the same one the edge honours).
const ORIGIN_VAR: &str = "UNDERSTUDY_ORIGIN_URL";

#[event(fetch)]
async fn fetch(req: Request, env: Env, ctx: Context) -> Result<Response> {
    let Ok(origin) = env.var(ORIGIN_VAR).map(|v| v.to_string()) else {
        return Response::error("UNDERSTUDY_ORIGIN_URL is not set", 500);
    };
    let cid = req.headers().get("X-Correlation-ID")?;
    #[cfg(feature = "obliged")]
    let subject = match obliged::verify(&req, &env) {
        Ok(s) => s,
        Err(res) => return res,
    };
    let url = req.url()?;
    let params: serde_json::Map<String, serde_json::Value> = url
        .query_pairs()
        .map(|(k, v)| (k.into_owned(), serde_json::Value::from(v.into_owned())))
        .collect();
    let headers = Headers::new();
    headers.set("Accept", "application/json")?;
    headers.set("Content-Type", "application/json")?;
    if let Some(cid) = &cid {
        headers.set("X-Correlation-ID", cid)?;
    }
    let mut init = RequestInit::new();
    init.with_method(Method::Post)
        .with_headers(headers)
        .with_body(Some(serde_json::Value::Object(params).to_string().into()));
    let target = Url::parse(&origin)?;
    let mut res = worker::Fetch::Request(Request::new_with_init(target.as_str(), &init)?)
        .send()
        .await?;
    let body = res.bytes().await?;
    let out = Headers::new();
    out.set("Content-Type", "application/json")?;
    #[cfg(feature = "obliged")]
    obliged::write_through(&env, &ctx, subject.as_deref(), &body);
    #[cfg(not(feature = "obliged"))]
    let _ = ctx;
    #[cfg(feature = "obliged")]
    obliged::finish(
        &out,
        cid.unwrap_or_default(),
        subject,
        res.status_code(),
        body.len(),
    )?;
    Ok(Response::from_bytes(body)?
        .with_status(res.status_code())
        .with_headers(out))
}

/// What keeping the edge's promises costs on a healthy request, and nothing more.
#[cfg(feature = "obliged")]
mod obliged {
    use std::cell::RefCell;
    use std::collections::HashSet;
    use understudy_core::policy::IdentityRules;
    use understudy_core::time::Millis;
    use understudy_core::token;
    use worker::{Context, Delay, Env, Headers, Request, Response, Result};

    thread_local! {
        /// Keys this isolate has written: the edge rewrites a key only after its refresh
        /// interval (minutes), longer than any bench phase, so once per key is the same.
        static WRITTEN: RefCell<HashSet<String>> = RefCell::new(HashSet::new());
    }

    /// The live answer written back to KV under `wait_until`, from the next task.
    pub fn write_through(env: &Env, ctx: &Context, subject: Option<&str>, body: &[u8]) {
        let var = |name: &str| env.var(name).map(|v| v.to_string()).ok();
        let (Some(binding), Some(prefix), Some(subject)) =
            (var("BARE_WRITE_BINDING"), var("BARE_WRITE_PREFIX"), subject)
        else {
            return;
        };
        let key = format!("{prefix}{subject}");
        if !WRITTEN.with(|w| w.borrow_mut().insert(key.clone())) {
            return;
        }
        let Ok(kv) = env.kv(&binding) else {
            return;
        };
        let value = String::from_utf8_lossy(body).into_owned();
        let now = worker::Date::now().as_millis();
        ctx.wait_until(async move {
            Delay::from(std::time::Duration::ZERO).await;
            let put = kv
                .put(&key, value)
                .and_then(|p| p.metadata(serde_json::json!({ "written_at": now })));
            let done = match put {
                Ok(p) => p.execute().await,
                Err(e) => Err(e),
            };
            if let Err(e) = done {
                worker::console_error!("bare-obliged: write-through of {key} failed: {e}");
            }
        });
    }

    /// The edge's log line for a live answer is ~560 bytes; this pads a line to that.
    const LOG_PAD: usize = 300;

    /// The caller's subject, or the 401 to answer.
    pub fn verify(
        req: &Request,
        env: &Env,
    ) -> std::result::Result<Option<String>, Result<Response>> {
        let var = |name: &str| env.var(name).map(|v| v.to_string()).unwrap_or_default();
        let rules = IdentityRules {
            secret: "TOKEN_HMAC_KEY".into(),
            issuer: var("BARE_ISSUER"),
            audience: var("BARE_AUDIENCE"),
            leeway_ms: 30_000,
        };
        let key = env
            .secret("TOKEN_HMAC_KEY")
            .map(|s| s.to_string())
            .unwrap_or_default();
        let auth = req
            .headers()
            .get("Authorization")
            .ok()
            .flatten()
            .unwrap_or_default();
        let now = Millis(worker::Date::now().as_millis());
        match token::bearer(&auth).map(|t| token::verify(t, key.as_bytes(), &rules, now)) {
            Some(Ok(claims)) => Ok(claims.subject().map(str::to_string)),
            _ => Err(Response::error("unauthorized", 401)),
        }
    }

    /// The edge's disclosure headers and a log line the size of its.
    pub fn finish(
        out: &Headers,
        cid: String,
        subject: Option<String>,
        status: u16,
        bytes: usize,
    ) -> Result<()> {
        for (k, v) in [
            ("X-Correlation-ID", cid.as_str()),
            ("X-Degraded", "false"),
            ("X-Result-Source", "origin"),
            ("X-Breaker-Mode", "PRIMARY_HEALTHY"),
            ("X-Policy-Version", "bare-obliged"),
            ("Cache-Control", "private, no-store"),
            ("Vary", "Authorization"),
        ] {
            out.set(k, v)?;
        }
        let line = serde_json::json!({
            "correlation_id": cid, "outcome": "live", "status": status,
            "subject": subject, "bytes": bytes, "pad": "x".repeat(LOG_PAD),
        });
        worker::console_log!("{}", line);
        Ok(())
    }
}
