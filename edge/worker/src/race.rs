//! [E-RACE] An HTTP call (the origin, or an HTTP tier) raced against its timeout: headers
//! *and* body must arrive in time. The loser is cancelled with `AbortController::abort()`:
//! dropping a fetch future does not cancel the subrequest, and the aborted fetch frees its
//! connection slot.

use std::pin::pin;
use std::time::Duration;

use futures_util::future::{select, Either};
use futures_util::StreamExt;
use understudy_core::classify::{classify, Failure, Items, Outcome};
use worker::{AbortController, Delay, Fetch, Request};

enum Observed {
    TimedOut,
    Connect(String),
    TooLarge,
    Status {
        status: u16,
        retry_after: Option<String>,
    },
    Body {
        status: u16,
        body: Vec<u8>,
    },
}

/// Sends `req`, reads a 2xx body up to `max_body` bytes, all within `timeout_ms`, and
/// classifies the outcome against `result_path`.
pub async fn race(
    req: Request,
    timeout_ms: u64,
    max_body: u64,
    result_path: &[String],
) -> Result<Items, Failure> {
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
            return Observed::Status {
                status,
                retry_after,
            };
        }
        let declared = resp
            .headers()
            .get("content-length")
            .ok()
            .flatten()
            .and_then(|v| v.trim().parse::<u64>().ok());
        if declared.is_some_and(|n| n > max_body) {
            return Observed::TooLarge;
        }
        let mut stream = match resp.stream() {
            Ok(s) => s,
            Err(_) => {
                return Observed::Body {
                    status,
                    body: Vec::new(),
                }
            }
        };
        let mut body = Vec::new();
        while let Some(chunk) = stream.next().await {
            match chunk {
                Ok(c) => {
                    body.extend_from_slice(&c);
                    if body.len() as u64 > max_body {
                        return Observed::TooLarge;
                    }
                }
                Err(e) => return Observed::Connect(format!("body cut off: {e}")),
            }
        }
        Observed::Body { status, body }
    };
    let timer = Delay::from(Duration::from_millis(timeout_ms));
    let observed = match select(pin!(work), pin!(timer)).await {
        Either::Left((o, _)) => o,
        Either::Right(((), _)) => Observed::TimedOut,
    };
    if !matches!(observed, Observed::Body { .. }) {
        // Cancel the subrequest (and any unread body) so it stops costing a connection.
        controller.abort();
    }
    let outcome = match &observed {
        Observed::TimedOut => Outcome::TimedOut,
        Observed::Connect(e) => Outcome::Connect(e),
        Observed::TooLarge => Outcome::BodyTooLarge { limit: max_body },
        Observed::Status {
            status,
            retry_after,
        } => Outcome::Response {
            status: *status,
            retry_after: retry_after.as_deref(),
            body: &[],
        },
        Observed::Body { status, body } => Outcome::Response {
            status: *status,
            retry_after: None,
            body,
        },
    };
    classify(outcome, result_path, max_body)
}
