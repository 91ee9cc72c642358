//! The HTTP/1.1 server: accepts loopback connections, sends `/__origin/…` to the control API
//! and everything else to the simulated model, which answers as its [`Behavior`] says.
//!
//! Everything is bounded: connections (a semaphore), header and body sizes, the time to send
//! headers and a body. A `hang` is the one thing that waits without limit, by design, until
//! the client goes away or the origin stops.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_TYPE, RETRY_AFTER};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use serde_json::json;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Notify, Semaphore};
use understudy_compiler::simulate::origin as simulated;

use super::answer::{self, Echo, SimBody};
use super::consumer::{Commit, ConsumerFault, Delivery};
use super::control;
use super::fault::Fault;
use super::http::{json_response, read_body, BodyError};
use super::state::{Outcome, Shared};

/// Open connections at most; further clients wait in the listen backlog.
const MAX_CONNECTIONS: usize = 512;
/// A client has this long to send its request headers.
const HEADER_TIMEOUT: Duration = Duration::from_secs(30);
/// Largest model request body read (1 MiB); larger ones get `413`.
const MAX_MODEL_BODY: usize = 1024 * 1024;
/// Largest buffered request head.
const MAX_BUF: usize = 64 * 1024;
/// The URL prefix of the control API.
pub(crate) const CONTROL_PREFIX: &str = "/__origin";

/// Accepts connections until `shutdown` changes (or its sender is gone).
pub(crate) async fn serve(
    listener: TcpListener,
    shared: Arc<Shared>,
    mut shutdown: watch::Receiver<bool>,
) {
    let permits = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let permit = tokio::select! {
            p = Arc::clone(&permits).acquire_owned() => p,
            _ = shutdown.changed() => break,
        };
        let Ok(permit) = permit else { break };
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = shutdown.changed() => break,
        };
        match accepted {
            Ok((stream, _peer)) => {
                let shared = Arc::clone(&shared);
                let shutdown = shutdown.clone();
                tokio::spawn(async move {
                    connection(stream, shared, shutdown).await;
                    drop(permit);
                });
            }
            // Out of file descriptors and the like: wait a moment instead of spinning.
            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
}

async fn connection(stream: TcpStream, shared: Arc<Shared>, mut shutdown: watch::Receiver<bool>) {
    let _ = stream.set_nodelay(true);
    // A second descriptor of the same socket, kept outside hyper: a `reset` fault sets
    // SO_LINGER to 0 on it, hyper's descriptor is dropped, and closing this last one makes
    // the kernel send RST instead of FIN.
    let Ok(twin) = socket2::SockRef::from(&stream).try_clone() else {
        return;
    };
    let reset = Arc::new(Notify::new());
    let on_reset = Arc::clone(&reset);
    let service = service_fn(move |req| {
        let shared = Arc::clone(&shared);
        let reset = Arc::clone(&on_reset);
        async move { Ok::<_, Infallible>(route(req, shared, reset).await) }
    });
    let conn = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT)
        .max_buf_size(MAX_BUF)
        .serve_connection(TokioIo::new(stream), service);
    tokio::select! {
        _ = conn => {}
        _ = reset.notified() => {
            let _ = twin.set_linger(Some(Duration::ZERO));
        }
        _ = shutdown.changed() => {}
    }
    drop(twin);
}

async fn route(
    req: Request<Incoming>,
    shared: Arc<Shared>,
    reset: Arc<Notify>,
) -> Response<SimBody> {
    let path = req.uri().path();
    if path == CONTROL_PREFIX || path.starts_with("/__origin/") {
        control::handle(req, &shared).await
    } else if path == EVENTS_PREFIX || path.starts_with("/__events/") {
        consume(req, shared, reset).await
    } else {
        model(req, shared, reset).await
    }
}

/// The URL prefix of the event consumer.
pub(crate) const EVENTS_PREFIX: &str = "/__events";

/// Answers one event delivery as the consumer's rules say, committing its side effect
/// once per `Idempotency-Key`.
async fn consume(
    req: Request<Incoming>,
    shared: Arc<Shared>,
    reset: Arc<Notify>,
) -> Response<SimBody> {
    let (parts, body) = req.into_parts();
    let header = |name: &str| {
        parts
            .headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let body = match read_body(body, MAX_MODEL_BODY).await {
        Ok(b) => b,
        Err(_) => {
            return json_response(
                StatusCode::BAD_REQUEST,
                answer::error("BAD_BODY", "delivery body unreadable or over 1 MiB"),
            )
        }
    };
    let v: serde_json::Value = serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null);
    let text = |k: &str| v.get(k).and_then(|x| x.as_str()).unwrap_or("").to_string();
    let d = Delivery {
        key: header("idempotency-key"),
        event_id: text("eventId"),
        tenant: header("x-event-tenant").unwrap_or_default(),
        aggregate: text("aggregateId"),
        sequence: v.get("sequence").and_then(|x| x.as_u64()).unwrap_or(0),
    };
    let plan = shared.consumer.begin(&d);
    let committed = |shared: &Shared| match shared.consumer.commit(&d) {
        Commit::New => json_response(
            StatusCode::OK,
            Bytes::from(json!({"committed": true, "eventId": d.event_id}).to_string()),
        ),
        Commit::Duplicate => json_response(
            StatusCode::OK,
            Bytes::from(json!({"duplicate": true, "eventId": d.event_id}).to_string()),
        ),
        Commit::NoKey => json_response(
            StatusCode::BAD_REQUEST,
            answer::error("NO_IDEMPOTENCY_KEY", "deliveries need an Idempotency-Key"),
        ),
    };
    match plan.fault {
        ConsumerFault::Healthy => committed(&shared),
        ConsumerFault::Latency { ms } => {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            committed(&shared)
        }
        ConsumerFault::Hang => {
            std::future::pending::<()>().await;
            committed(&shared)
        }
        ConsumerFault::Reset => {
            reset.notify_one();
            std::future::pending::<()>().await;
            committed(&shared)
        }
        ConsumerFault::ResetAfterCommit => {
            let _ = shared.consumer.commit(&d);
            reset.notify_one();
            std::future::pending::<()>().await;
            committed(&shared)
        }
        ConsumerFault::Status { code } => {
            let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            json_response(
                status,
                answer::error(&format!("SIMULATED_{code}"), "simulated consumer failure"),
            )
        }
        ConsumerFault::RateLimited { retry_after_s } => {
            let mut r = json_response(
                StatusCode::TOO_MANY_REQUESTS,
                answer::error("RATE_LIMITED", "simulated consumer rate limit"),
            );
            r.headers_mut()
                .insert(RETRY_AFTER, HeaderValue::from(retry_after_s));
            r
        }
    }
}

/// Answers one model request as the current behaviour says.
async fn model(
    req: Request<Incoming>,
    shared: Arc<Shared>,
    reset: Arc<Notify>,
) -> Response<SimBody> {
    let (parts, body) = req.into_parts();
    let (plan, mut tracker) = shared.begin(&parts);
    // Read the whole request first: hyper notices a client that goes away only once the
    // request body has been read, and the echo needs it.
    let body = match read_body(body, MAX_MODEL_BODY).await {
        Ok(b) => b,
        Err(BodyError::TooLarge) => {
            tracker.finish(Outcome::Completed);
            return json_response(
                StatusCode::PAYLOAD_TOO_LARGE,
                answer::error("TOO_LARGE", "request body over 1 MiB"),
            );
        }
        // The client stopped sending: nobody is left to answer.
        Err(BodyError::Io | BodyError::Timeout) => {
            tracker.finish(Outcome::Disconnected);
            return json_response(
                StatusCode::BAD_REQUEST,
                answer::error("BAD_BODY", "request body unreadable"),
            );
        }
    };
    let echo = Echo {
        n: plan.n,
        method: parts.method.to_string(),
        path: parts.uri.path().to_string(),
        query: parts.uri.query().map(str::to_string),
        correlation_id: parts
            .headers
            .get("x-correlation-id")
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned()),
        params: params_of(&body),
    };
    let wait = plan.base_latency + Duration::from_millis(plan.behavior.delay_ms);
    if !wait.is_zero() {
        tokio::time::sleep(wait).await;
    }
    let ok = |bytes: Bytes, tracker| {
        let mut r = Response::new(SimBody::full(bytes, Some(tracker)));
        r.headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        r
    };
    match plan.behavior.fault {
        Fault::Healthy => ok(answer::healthy(&echo), tracker),
        Fault::Latency { ms } => {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            ok(answer::healthy(&echo), tracker)
        }
        Fault::Bimodal {
            fast_ms,
            slow_ms,
            slow_per_mille,
        } => {
            // A drill's request draws what `understudy simulate` draws for the same call, so
            // the two agree on which calls are slow (and so on what a hedge wins).
            let slow = match plan.call {
                Some((i, call)) => u64::from(simulated::draw(i, call)) < slow_per_mille * 1000,
                None => rand_unit() * 1000.0 < slow_per_mille as f64,
            };
            let ms = if slow { slow_ms } else { fast_ms };
            tokio::time::sleep(Duration::from_millis(ms)).await;
            ok(answer::healthy(&echo), tracker)
        }
        Fault::Hang => {
            // Held until hyper drops this future (the client went away: the tracker
            // records a disconnect) or the origin stops.
            std::future::pending::<()>().await;
            ok(Bytes::new(), tracker)
        }
        Fault::Status { code } => {
            let status = u16::try_from(code)
                .ok()
                .and_then(|c| StatusCode::from_u16(c).ok())
                .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let body = answer::error(
                &format!("SIMULATED_{}", status.as_u16()),
                &format!("simulated origin failure ({status})"),
            );
            let mut r = ok(body, tracker);
            *r.status_mut() = status;
            r
        }
        Fault::RateLimited { retry_after_s } => {
            let body = answer::error(
                "RATE_LIMITED",
                &format!("simulated rate limit; retry after {retry_after_s} s"),
            );
            let mut r = ok(body, tracker);
            *r.status_mut() = StatusCode::TOO_MANY_REQUESTS;
            r.headers_mut()
                .insert(RETRY_AFTER, HeaderValue::from(retry_after_s));
            r
        }
        Fault::Reset => {
            tracker.finish(Outcome::Reset);
            reset.notify_one();
            // The connection task drops this future with the connection.
            std::future::pending::<()>().await;
            ok(Bytes::new(), tracker)
        }
        Fault::SlowBody { ms, chunks } => {
            let body = SimBody::dripped(
                answer::healthy(&echo),
                chunks,
                Duration::from_millis(ms),
                tracker,
            );
            let mut r = Response::new(body);
            r.headers_mut()
                .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
            r
        }
        Fault::Malformed => ok(answer::malformed(&echo), tracker),
        Fault::Empty => ok(answer::empty(&echo), tracker),
        Fault::WrongShape => ok(answer::wrong_shape(&echo), tracker),
        Fault::Huge { bytes } => ok(answer::huge(&echo, bytes), tracker),
    }
}

/// What the answer echoes of a request body: its `params` when it is a JSON object that
/// has them, the whole JSON value otherwise, `null` when empty or not JSON.
fn params_of(body: &[u8]) -> serde_json::Value {
    match serde_json::from_slice::<serde_json::Value>(body) {
        Ok(serde_json::Value::Object(mut m)) => match m.remove("params") {
            Some(p) => p,
            None => serde_json::Value::Object(m),
        },
        Ok(v) => v,
        Err(_) => serde_json::Value::Null,
    }
}

/// A uniform draw in `[0, 1)` for the bimodal fault: the clock's nanoseconds mixed by a
/// process-wide counter (no RNG crate for one coin per request; its quality is plenty).
fn rand_unit() -> f64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0x9E37_79B9_7F4A_7C15);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos() as u64)
        .unwrap_or(0);
    let mut z = N.fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed) ^ t;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)) as f64 / u64::MAX as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_are_echoed_from_json_bodies() {
        assert_eq!(
            params_of(br#"{"params":{"user":"u1"}}"#),
            serde_json::json!({"user": "u1"})
        );
        assert_eq!(
            params_of(br#"{"q":"shoes"}"#),
            serde_json::json!({"q": "shoes"})
        );
        assert_eq!(params_of(b"not json"), serde_json::Value::Null);
        assert_eq!(params_of(b""), serde_json::Value::Null);
    }
}
