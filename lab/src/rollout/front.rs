//! [R-GRADUAL] The local driver of a rollout: the front of `drill --rollout`
//! (scripts/rollout-front.mjs), which splits traffic between the two versions as a gradual
//! deployment does and counts each version's answers. `deploy` sets its split; `figures`
//! reads both versions' answers over a window.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{bail, Context as _, Result};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use serde::Deserialize;
use understudy_compiler::release::rollout::run::Driver;
use understudy_compiler::release::rollout::Figures;

/// How long one call to the front may take.
const CALL: Duration = Duration::from_secs(10);

pub struct Front {
    url: String,
    addr: SocketAddr,
    rt: tokio::runtime::Runtime,
}

#[derive(Deserialize)]
struct State {
    worker: String,
    old: String,
    new: String,
}

/// A deployment the front made, as its state lists them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
pub struct Deployment {
    /// ms since the epoch.
    pub at: u64,
    pub new_percent: u8,
}

#[derive(Deserialize)]
struct Deployments {
    deployments: Vec<Deployment>,
}

#[derive(Deserialize)]
struct Both {
    old: Figures,
    new: Figures,
}

impl Front {
    /// The front at `url` (`http://127.0.0.1:PORT`: loopback only).
    pub fn new(url: &str) -> Result<Front> {
        let addr: SocketAddr = url
            .trim_end_matches('/')
            .strip_prefix("http://")
            .and_then(|a| a.parse().ok())
            .with_context(|| {
                format!("--front {url}: write the front's address as http://127.0.0.1:PORT")
            })?;
        if !addr.ip().is_loopback() {
            bail!("--front {url}: the local front listens on loopback only");
        }
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        Ok(Front {
            url: format!("http://{addr}"),
            addr,
            rt,
        })
    }

    fn call(&self, method: &str, path: &str, body: &str) -> Result<serde_json::Value> {
        let addr = self.addr;
        let req = hyper::Request::builder()
            .method(method)
            .uri(path)
            .header("host", addr.to_string())
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body.to_string())))?;
        let (status, bytes) = self
            .rt
            .block_on(async {
                tokio::time::timeout(CALL, async {
                    let stream = tokio::net::TcpStream::connect(addr).await?;
                    let (mut send, conn) =
                        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
                    tokio::spawn(conn);
                    let res = send.send_request(req).await?;
                    let status = res.status().as_u16();
                    let bytes = res.into_body().collect().await?.to_bytes();
                    anyhow::Ok((status, bytes))
                })
                .await
                .map_err(|_| anyhow::anyhow!("no answer within {} s", CALL.as_secs()))?
            })
            .with_context(|| format!("{method} {}{path}", self.url))?;
        let v: serde_json::Value = serde_json::from_slice(&bytes).with_context(|| {
            format!(
                "{method} {}{path}: answered {status} with a body that is not JSON",
                self.url
            )
        })?;
        if status != 200 {
            bail!("{method} {}{path}: answered {status}: {v}", self.url);
        }
        Ok(v)
    }
}

impl Front {
    /// Every deployment the front made, in order.
    pub fn deployments(&self) -> Result<Vec<Deployment>> {
        let d: Deployments = serde_json::from_value(self.call("GET", "/__rollout/state", "")?)
            .context("the front's /__rollout/state")?;
        Ok(d.deployments)
    }
}

impl Driver for Front {
    fn name(&self) -> String {
        format!("local {}", self.url)
    }

    fn check(&mut self, old: &str, new: &str) -> Result<()> {
        let s: State = serde_json::from_value(self.call("GET", "/__rollout/state", "")?)
            .context("the front's /__rollout/state")?;
        if s.old != old || s.new != new {
            bail!(
                "the front at {} serves {} (old) and {} (new) of {}, not {old} and {new}",
                self.url,
                s.old,
                s.new,
                s.worker
            );
        }
        Ok(())
    }

    fn deploy(&mut self, new_percent: u8) -> Result<()> {
        self.call(
            "POST",
            "/__rollout/deploy",
            &format!("{{\"new_percent\":{new_percent}}}"),
        )?;
        Ok(())
    }

    fn current(&mut self) -> Result<Vec<(String, u8)>> {
        let s: State = serde_json::from_value(self.call("GET", "/__rollout/state", "")?)
            .context("the front's /__rollout/state")?;
        let p = self
            .deployments()?
            .last()
            .map_or(0, |d| d.new_percent.min(100));
        Ok([(s.old, 100 - p), (s.new, p)]
            .into_iter()
            .filter(|(_, share)| *share > 0)
            .collect())
    }

    fn figures(&mut self, from: u64, to: u64) -> Result<(Figures, Figures)> {
        let v = self.call(
            "GET",
            &format!("/__rollout/figures?from={from}&to={to}"),
            "",
        )?;
        let both: Both = serde_json::from_value(v).context("the front's figures")?;
        Ok((both.old, both.new))
    }
}
