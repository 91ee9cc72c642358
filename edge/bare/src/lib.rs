//! The floor `understudy bench` measures the edge against: the same origin call the
//! Understudy Worker makes (POST of the query parameters as JSON, the correlation ID, JSON
//! accepted) and the origin's answer passed through — no deadline, no breaker, no cascade,
//! no disclosure, no log line. Whatever the edge costs on top of this is the shell's price.
#![forbid(unsafe_code)]

use worker::{event, Context, Env, Headers, Method, Request, RequestInit, Response, Result, Url};

/// The var holding the origin's URL (the same one the edge honours).
const ORIGIN_VAR: &str = "UNDERSTUDY_ORIGIN_URL";

#[event(fetch)]
async fn fetch(req: Request, env: Env, _ctx: Context) -> Result<Response> {
    let Ok(origin) = env.var(ORIGIN_VAR).map(|v| v.to_string()) else {
        return Response::error("UNDERSTUDY_ORIGIN_URL is not set", 500);
    };
    let url = req.url()?;
    let params: serde_json::Map<String, serde_json::Value> = url
        .query_pairs()
        .map(|(k, v)| (k.into_owned(), serde_json::Value::from(v.into_owned())))
        .collect();
    let headers = Headers::new();
    headers.set("Accept", "application/json")?;
    headers.set("Content-Type", "application/json")?;
    if let Some(cid) = req.headers().get("X-Correlation-ID")? {
        headers.set("X-Correlation-ID", &cid)?;
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
    Ok(Response::from_bytes(body)?
        .with_status(res.status_code())
        .with_headers(out))
}
