//! The bounded load driver: plays a list of requests against one loopback address on their
//! schedule, over at most `concurrency` keep-alive HTTP/1.1 connections, each request with
//! its own timeout, the whole run under a time limit. It records what the client saw.
//!
//! Open loop with a cap: request `i` leaves at its due time if a connection is free, else
//! as soon as one is (the lag is recorded, so a saturated run shows it instead of hiding it
//! — "coordinated omission"). Latency is measured from sending to the body's last byte.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _, Result};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use tokio::sync::mpsc;

use super::observe::{Disclosed, Observed};

/// Most requests one drive may send.
pub const MAX_REQUESTS: usize = 2_000_000;
/// Most connections.
pub const MAX_CONCURRENCY: usize = 512;

/// One request to send: the same request `simulate` hands its engine.
pub use understudy_compiler::simulate::request::Planned;

#[derive(Debug, Clone, Copy)]
pub struct Config {
    pub addr: SocketAddr,
    pub concurrency: usize,
    pub timeout: Duration,
    /// The whole drive stops after this; requests not yet sent are recorded as not sent.
    pub limit: Duration,
}

/// Something that wants to hear about each finished request (a progress bar).
pub trait Progress: Send {
    fn done(&mut self, o: &Observed);
}

impl Progress for () {
    fn done(&mut self, _: &Observed) {}
}

pub type Conn = SendRequest<Full<Bytes>>;

async fn connect(addr: SocketAddr) -> Result<Conn> {
    let stream = tokio::net::TcpStream::connect(addr)
        .await
        .with_context(|| format!("cannot connect to {addr}"))?;
    let _ = stream.set_nodelay(true);
    let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .context("HTTP handshake")?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(send)
}

struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: Bytes,
}

async fn send_one(conn: &mut Conn, host: &str, p: &Planned) -> Result<Answer> {
    conn.ready().await.context("connection closed")?;
    let mut b = hyper::Request::builder()
        .method(p.method.as_str())
        .uri(p.target.as_str())
        .header("host", host);
    for (k, v) in p
        .headers
        .iter()
        .filter(|(k, _)| !k.eq_ignore_ascii_case("host"))
    {
        b = b.header(k.as_str(), v.as_str());
    }
    let req = b.body(Full::new(Bytes::new())).context("request")?;
    let res = conn.send_request(req).await.context("request failed")?;
    let status = res.status().as_u16();
    let headers = res
        .headers()
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().to_string(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
    let body = res.into_body().collect().await.context("body")?.to_bytes();
    Ok(Answer {
        status,
        headers,
        body,
    })
}

/// Fills the body-derived fields of `o`.
pub fn read_body(o: &mut Observed, body: &[u8]) {
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(body) else {
        return;
    };
    o.items = v.get("items").and_then(|i| i.as_array()).map(Vec::len);
    o.body_degraded = v.get("degraded").and_then(serde_json::Value::as_bool);
    o.body_personalized = v
        .get("is_personalized")
        .and_then(serde_json::Value::as_bool);
}

/// Sends one request now (outside a drive), e.g. a calibration or a probe.
pub async fn once(
    conn: &mut Option<Conn>,
    addr: SocketAddr,
    p: &Planned,
    timeout: Duration,
) -> Observed {
    once_with_host(conn, addr, &addr.to_string(), p, timeout).await
}

/// [`once`] with an explicit `Host` header (to pick one of several Workers sharing a port).
/// `conn` is opened on first use and dropped on error; latency is to the body's last byte.
pub async fn once_with_host(
    conn: &mut Option<Conn>,
    addr: SocketAddr,
    host: &str,
    p: &Planned,
    timeout: Duration,
) -> Observed {
    let start = Instant::now();
    let mut o = Observed {
        index: p.index,
        user: p.user.clone(),
        ..Observed::default()
    };
    let result = tokio::time::timeout(timeout, async {
        if conn.is_none() {
            *conn = Some(connect(addr).await?);
        }
        match conn.as_mut() {
            Some(c) => send_one(c, host, p).await,
            None => bail!("no connection"),
        }
    })
    .await;
    o.latency_ms = start.elapsed().as_secs_f64() * 1000.0;
    match result {
        Ok(Ok(a)) => {
            o.status = a.status;
            o.headers =
                Disclosed::from_headers(a.headers.iter().map(|(k, v)| (k.as_str(), v.as_str())));
            read_body(&mut o, &a.body);
        }
        Ok(Err(e)) => {
            *conn = None;
            o.error = Some(format!("{e:#}"));
        }
        Err(_) => {
            *conn = None;
            o.error = Some(format!("no answer within {} ms", timeout.as_millis()));
        }
    }
    o
}

/// Plays `plan` (sorted by due time) and returns one observation per planned request, in
/// index order. `start` is the instant due times count from.
pub async fn drive(
    cfg: Config,
    plan: Vec<Planned>,
    start: Instant,
    mut progress: Box<dyn Progress>,
) -> Result<Vec<Observed>> {
    if plan.len() > MAX_REQUESTS {
        bail!(
            "{} requests is more than a drill may send ({MAX_REQUESTS})",
            plan.len()
        );
    }
    if !cfg.addr.ip().is_loopback() {
        bail!("the drill sends traffic to loopback only, not {}", cfg.addr);
    }
    let concurrency = cfg.concurrency.clamp(1, MAX_CONCURRENCY);
    let plan = Arc::new(plan);
    let next = Arc::new(AtomicU64::new(0));
    let (tx, mut rx) = mpsc::unbounded_channel::<Observed>();
    let deadline = start + cfg.limit;
    for _ in 0..concurrency {
        let (plan, next, tx) = (Arc::clone(&plan), Arc::clone(&next), tx.clone());
        tokio::spawn(async move {
            let mut conn: Option<Conn> = None;
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed) as usize;
                let Some(p) = plan.get(i) else { break };
                let due = start + Duration::from_micros(p.due_us);
                tokio::time::sleep_until(due.into()).await;
                let sent = Instant::now();
                let mut o = if sent >= deadline {
                    Observed {
                        index: p.index,
                        error: Some("not sent: the drill's time limit was reached".into()),
                        ..Observed::default()
                    }
                } else {
                    once(&mut conn, cfg.addr, p, cfg.timeout).await
                };
                o.user = p.user.clone();
                o.scheduled_ms = p.due_us as f64 / 1000.0;
                o.sent_ms = sent.duration_since(start).as_secs_f64() * 1000.0;
                if tx.send(o).is_err() {
                    break;
                }
            }
        });
    }
    drop(tx);
    let mut out = Vec::with_capacity(plan.len());
    while let Some(o) = rx.recv().await {
        progress.done(&o);
        out.push(o);
    }
    out.sort_by_key(|o| o.index);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_give_items_and_disclosure_fields() {
        let mut o = Observed::default();
        read_body(
            &mut o,
            br#"{"items":[{"sku":"A"},{"sku":"B"}],"degraded":true,"is_personalized":false}"#,
        );
        assert_eq!(
            (o.items, o.body_degraded, o.body_personalized),
            (Some(2), Some(true), Some(false))
        );
        let mut bad = Observed::default();
        read_body(&mut bad, b"not json");
        assert_eq!(bad.items, None);
    }

    #[test]
    fn a_drive_refuses_non_loopback_targets() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let cfg = Config {
            addr: "192.0.2.1:80".parse().expect("addr"),
            concurrency: 1,
            timeout: Duration::from_millis(10),
            limit: Duration::from_millis(10),
        };
        let e = rt
            .block_on(drive(cfg, Vec::new(), Instant::now(), Box::new(())))
            .unwrap_err();
        assert!(e.to_string().contains("loopback"), "{e}");
    }
}
