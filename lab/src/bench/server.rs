//! Both Workers in ONE workerd: `scripts/bench-server.mjs` runs the built edge and the bare
//! Worker in one Miniflare instance on one loopback port, routed by `Host` (see
//! [`Side::host`]); requests here carry the side's host, so the edge and the floor are
//! measured interleaved against the same runtime process. The process stops when the
//! handle is dropped (its stdin closes, and it is killed if it lingers).

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};

use crate::drill::driver::{self, Planned};
use crate::drill::edge::NodeServer;
use crate::drill::observe::Observed;

/// workerd's first start compiles both modules.
const START: Duration = Duration::from_secs(60);
const READY: &str = "bench listening on ";

/// Which Worker a request is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Edge,
    Bare,
}

impl Target {
    /// The `Host` header that routes to it (the `routes` of scripts/bench-server.mjs).
    pub fn host(self) -> &'static str {
        match self {
            Target::Edge => "edge.bench",
            Target::Bare => "bare.bench",
        }
    }
}

/// The address in the server's ready line, when it is one and on loopback.
pub fn parse_ready(line: &str) -> Option<SocketAddr> {
    let addr: SocketAddr = line
        .strip_prefix(READY)?
        .trim()
        .strip_prefix("http://")?
        .parse()
        .ok()?;
    addr.ip().is_loopback().then_some(addr)
}

pub struct BenchServer {
    pub addr: SocketAddr,
    /// From spawning `node` to both Workers listening.
    pub startup_ms: f64,
    _server: NodeServer,
}

impl BenchServer {
    pub fn start(root: &Path, edge: &Path, bare: &Path, origin: &str) -> Result<BenchServer> {
        let script = root.join("scripts/bench-server.mjs");
        if !root.join("node_modules/miniflare").is_dir() {
            bail!("{} has no node_modules/miniflare; run `scripts/setup.sh` there first (it runs `npm ci`)", root.display());
        }
        let t = Instant::now();
        let mut cmd = Command::new("node");
        cmd.arg(&script)
            .arg("--edge")
            .arg(edge)
            .arg("--bare")
            .arg(bare)
            .args(["--port", "0", "--origin", origin])
            .current_dir(root);
        let (server, rest) = NodeServer::start(cmd, READY, START, &script.display().to_string())?;
        let line = format!("{READY}{rest}");
        let startup_ms = t.elapsed().as_secs_f64() * 1000.0;
        let Some(addr) = parse_ready(&line) else {
            bail!("the bench server printed {line:?}, not a loopback address");
        };
        Ok(BenchServer {
            addr,
            startup_ms,
            _server: server,
        })
    }
}

pub use crate::drill::driver::Conn;

/// One request to `target` over `conn`: the drill driver's request, with the target's
/// `Host`. Latency is to the body's last byte.
pub async fn once(
    conn: &mut Option<Conn>,
    addr: SocketAddr,
    target: Target,
    p: &Planned,
    timeout: Duration,
) -> Observed {
    driver::once_with_host(conn, addr, target.host(), p, timeout).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_side_has_its_own_host_matching_the_server_routes() {
        assert_eq!(Target::Edge.host(), "edge.bench");
        assert_eq!(Target::Bare.host(), "bare.bench");
        let script = include_str!("../../../scripts/bench-server.mjs");
        for t in [Target::Edge, Target::Bare] {
            assert!(script.contains(&format!("\"{}/*\"", t.host())), "{t:?}");
        }
    }

    #[test]
    fn the_ready_line_gives_a_loopback_address_only() {
        assert_eq!(
            parse_ready("bench listening on http://127.0.0.1:40123"),
            Some("127.0.0.1:40123".parse().unwrap())
        );
        assert_eq!(parse_ready("bench listening on http://10.0.0.1:80"), None);
        assert_eq!(parse_ready("edge listening on http://127.0.0.1:1"), None);
        assert_eq!(parse_ready("bench listening on nonsense"), None);
    }
}
