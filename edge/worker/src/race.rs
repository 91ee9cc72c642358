//! [E-RACE] An HTTP call (the origin, or an HTTP tier) raced against its timeout: headers
//! *and* body must arrive in time. The loser is cancelled with `AbortController::abort()`:
//! dropping a fetch future does not cancel the subrequest, and the aborted fetch frees its
//! connection slot. What happened is reported raw ([`Observed`]); the engine classifies it.

use std::pin::pin;
use std::time::Duration;

use futures_util::future::{select, Either};
use futures_util::StreamExt;
use understudy_core::classify::Observed;
use understudy_core::engine::Outbound;
use worker::{AbortController, Delay, Fetch, Headers, Method, Request, RequestInit};

fn request(o: &Outbound) -> Result<Request, String> {
    let headers = Headers::new();
    for (k, v) in &o.headers {
        headers
            .set(k, v)
            .map_err(|_| format!("header `{k}` cannot be sent"))?;
    }
    let mut init = RequestInit::new();
    init.with_method(Method::from(o.method.as_str().to_string()));
    init.with_headers(headers);
    if let Some(body) = &o.body {
        init.with_body(Some(wasm_bindgen::JsValue::from_str(body)));
    }
    Request::new_with_init(&o.url, &init).map_err(|_| "the request could not be built".to_string())
}

/// Sends `o`, reads a 2xx body up to its byte limit, all within `timeout_ms`.
pub async fn race(o: &Outbound, timeout_ms: u64) -> Observed {
    let req = match request(o) {
        Ok(r) => r,
        Err(e) => return Observed::Connect(e),
    };
    let max_body = o.max_body_bytes;
    let controller = AbortController::default();
    let signal = controller.signal();
    let work = async {
        let mut resp = match Fetch::Request(req).send_with_signal(&signal).await {
            Ok(r) => r,
            Err(e) => return Observed::Connect(e.to_string()),
        };
        let status = resp.status_code();
        if !(200..300).contains(&status) {
            let retry_after = resp.headers().get("retry-after").ok().flatten();
            return Observed::Response {
                status,
                retry_after,
                body: Vec::new(),
            };
        }
        let declared = resp
            .headers()
            .get("content-length")
            .ok()
            .flatten()
            .and_then(|v| v.trim().parse::<u64>().ok());
        if declared.is_some_and(|n| n > max_body) {
            return Observed::TooLarge { limit: max_body };
        }
        let mut body = Vec::new();
        if let Ok(mut stream) = resp.stream() {
            while let Some(chunk) = stream.next().await {
                match chunk {
                    Ok(c) => {
                        body.extend_from_slice(&c);
                        if body.len() as u64 > max_body {
                            return Observed::TooLarge { limit: max_body };
                        }
                    }
                    Err(e) => return Observed::Connect(format!("body cut off: {e}")),
                }
            }
        }
        Observed::Response {
            status,
            retry_after: None,
            body,
        }
    };
    let timer = Delay::from(Duration::from_millis(timeout_ms));
    let observed = match select(pin!(work), pin!(timer)).await {
        Either::Left((o, _)) => o,
        Either::Right(((), _)) => Observed::TimedOut,
    };
    if !matches!(&observed, Observed::Response { status, .. } if (200..300).contains(status)) {
        // Cancel the subrequest (and any unread body) so it stops costing a connection.
        controller.abort();
    }
    observed
}
