//! An HTTP/1.1 client for the edge's event endpoints on loopback or a local network: the
//! producer's `POST` and the operators' `/__understudy/events` API (list, inspect, replay,
//! skip) and status endpoint. Used by `understudy events` and the events drill. Plain
//! `http://` only: a deployed edge is reached through `wrangler dev --remote` or a tunnel.

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

use anyhow::{bail, Context as _, Result};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use serde_json::Value;

pub use understudy_core::events::flow::OPS_PATH;

/// An answer: status and body (JSON when it parses, `Null` otherwise).
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub body: Value,
    pub text: String,
}

/// Where the edge listens and the operator token.
#[derive(Debug, Clone)]
pub struct Edge {
    pub addr: SocketAddr,
    pub host: String,
    pub token: Option<String>,
}

impl Edge {
    /// `http://HOST:PORT` (a path is ignored).
    pub fn parse(url: &str, token: Option<String>) -> Result<Edge> {
        let Some(rest) = url.strip_prefix("http://") else {
            bail!("--edge {url}: only http:// edges are reachable (a local `understudy dev`, `wrangler dev`, or a tunnel to a deployment)");
        };
        let host = rest.split('/').next().unwrap_or(rest).to_string();
        let with_port = if host.contains(':') {
            host.clone()
        } else {
            format!("{host}:80")
        };
        let addr = with_port
            .to_socket_addrs()
            .with_context(|| format!("--edge {url}: cannot resolve {with_port}"))?
            .next()
            .with_context(|| format!("--edge {url}: no address for {with_port}"))?;
        Ok(Edge { addr, host, token })
    }

    pub fn from_addr(addr: SocketAddr, token: Option<String>) -> Edge {
        Edge {
            addr,
            host: addr.to_string(),
            token,
        }
    }

    async fn connect(&self) -> Result<SendRequest<Full<Bytes>>> {
        let stream = tokio::net::TcpStream::connect(self.addr)
            .await
            .with_context(|| format!("cannot connect to the edge at {}", self.addr))?;
        let _ = stream.set_nodelay(true);
        let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .context("HTTP handshake with the edge")?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(send)
    }

    /// One request with the operator token (or `auth` instead), within `timeout`.
    pub async fn call(
        &self,
        method: &str,
        target: &str,
        auth: Option<&str>,
        body: Option<Vec<u8>>,
        timeout: Duration,
    ) -> Result<Answer> {
        let work = async {
            let mut send = self.connect().await?;
            let mut b = hyper::Request::builder()
                .method(method)
                .uri(target)
                .header("host", &self.host);
            if let Some(a) = auth
                .map(str::to_string)
                .or_else(|| self.token.as_ref().map(|t| format!("Bearer {t}")))
            {
                b = b.header("authorization", a);
            }
            if body.is_some() {
                b = b.header("content-type", "application/json");
            }
            let req = b
                .body(Full::new(Bytes::from(body.unwrap_or_default())))
                .context("building the request")?;
            let res = send
                .send_request(req)
                .await
                .context("the edge did not answer")?;
            let status = res.status().as_u16();
            let bytes = res
                .into_body()
                .collect()
                .await
                .context("reading the edge's answer")?
                .to_bytes();
            let text = String::from_utf8_lossy(&bytes).into_owned();
            let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            Ok::<_, anyhow::Error>(Answer { status, body, text })
        };
        match tokio::time::timeout(timeout, work).await {
            Ok(r) => r,
            Err(_) => bail!(
                "the edge at {} did not answer within {timeout:?}",
                self.addr
            ),
        }
    }

    pub async fn list(&self, query: &str, timeout: Duration) -> Result<Answer> {
        let target = if query.is_empty() {
            OPS_PATH.to_string()
        } else {
            format!("{OPS_PATH}?{query}")
        };
        self.call("GET", &target, None, None, timeout).await
    }

    pub async fn inspect(&self, id: &str, timeout: Duration) -> Result<Answer> {
        self.call(
            "GET",
            &format!("{OPS_PATH}/{}", encode(id)),
            None,
            None,
            timeout,
        )
        .await
    }

    pub async fn replay(&self, id: &str, timeout: Duration) -> Result<Answer> {
        self.call(
            "POST",
            &format!("{OPS_PATH}/{}/replay", encode(id)),
            None,
            None,
            timeout,
        )
        .await
    }

    pub async fn skip(&self, tenant: &str, aggregate: &str, timeout: Duration) -> Result<Answer> {
        let target = format!(
            "{OPS_PATH}/skip?tenant={}&aggregate={}",
            encode(tenant),
            encode(aggregate)
        );
        self.call("POST", &target, None, None, timeout).await
    }
}

/// Percent-encodes a path segment or query value.
pub fn encode(s: &str) -> String {
    understudy_compiler::simulate::request::encode(s)
}

/// Runs `fut` on a fresh single-threaded runtime (for synchronous callers).
pub fn block_on<T>(fut: impl std::future::Future<Output = Result<T>>) -> Result<T> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start a runtime")?
        .block_on(fut)
}
