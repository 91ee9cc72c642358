//! The bench's Workers in ONE workerd: `scripts/bench-server.mjs` runs each named dist in one
//! Miniflare instance on one loopback port, routed by `Host` (`NAME.bench`), so the edge, the
//! bare floor and the JS peer are measured interleaved against the same runtime process. The
//! server reports its workerd pids (for CPU accounting, see [`super::cpu`]). It stops when
//! the handle is dropped (its stdin closes, and it is killed if it lingers).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};

use crate::drill::driver::{self, Planned};
use crate::drill::edge::NodeServer;
use crate::drill::observe::Observed;

/// workerd's first start compiles every module.
const START: Duration = Duration::from_secs(90);
const READY: &str = "bench listening on ";

/// A Worker of the bench, by name; requests reach it with `Host: NAME.bench`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target(pub &'static str);

impl Target {
    pub fn host(self) -> String {
        format!("{}.bench", self.0)
    }
}

/// The address and workerd pids of the server's ready line (loopback only).
pub fn parse_ready(line: &str) -> Option<(SocketAddr, Vec<u32>)> {
    let rest = line.strip_prefix(READY)?.trim();
    let mut words = rest.split_whitespace();
    let addr: SocketAddr = words.next()?.strip_prefix("http://")?.parse().ok()?;
    let pids = words
        .filter_map(|w| w.strip_prefix("pid=")?.parse().ok())
        .collect();
    addr.ip().is_loopback().then_some((addr, pids))
}

pub struct BenchServer {
    pub addr: SocketAddr,
    /// The workerd processes (their CPU time is what the Workers cost).
    pub workerd: Vec<u32>,
    /// From spawning `node` to every Worker listening.
    pub startup_ms: f64,
    _server: NodeServer,
}

impl BenchServer {
    /// Starts `workers` (name, dist directory) with optional KV seed files (name, file).
    pub fn start(
        root: &Path,
        workers: &[(&str, PathBuf)],
        seeds: &[(&str, PathBuf)],
        origin: &str,
    ) -> Result<BenchServer> {
        let script = root.join("scripts/bench-server.mjs");
        if !root.join("node_modules/miniflare").is_dir() {
            bail!("{} has no node_modules/miniflare; run `scripts/setup.sh` there first (it runs `npm ci`)", root.display());
        }
        let t = Instant::now();
        let mut cmd = Command::new("node");
        cmd.arg(&script)
            .args(["--port", "0", "--origin", origin])
            .current_dir(root);
        for (name, dir) in workers {
            cmd.arg("--worker").arg(format!("{name}={}", dir.display()));
        }
        for (name, file) in seeds {
            cmd.arg("--seed").arg(format!("{name}={}", file.display()));
        }
        let (server, rest) = NodeServer::start(cmd, READY, START, &script.display().to_string())?;
        let line = format!("{READY}{rest}");
        let startup_ms = t.elapsed().as_secs_f64() * 1000.0;
        let Some((addr, workerd)) = parse_ready(&line) else {
            bail!("the bench server printed {line:?}, not a loopback address");
        };
        Ok(BenchServer {
            addr,
            workerd,
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
    driver::once_with_host(conn, addr, &target.host(), p, timeout).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ready_line_gives_a_loopback_address_and_the_workerd_pids() {
        assert_eq!(
            parse_ready("bench listening on http://127.0.0.1:40123 pid=17 pid=18"),
            Some(("127.0.0.1:40123".parse().unwrap(), vec![17, 18]))
        );
        assert_eq!(
            parse_ready("bench listening on http://127.0.0.1:1"),
            Some(("127.0.0.1:1".parse().unwrap(), vec![]))
        );
        assert_eq!(parse_ready("bench listening on http://10.0.0.1:80"), None);
        assert_eq!(parse_ready("edge listening on http://127.0.0.1:1"), None);
        assert_eq!(parse_ready("bench listening on nonsense"), None);
    }

    #[test]
    fn hosts_follow_the_server_routes() {
        assert_eq!(Target("edge").host(), "edge.bench");
        let script = include_str!("../../../scripts/bench-server.mjs");
        assert!(script.contains("routes: [`${name}.bench/*`]"));
    }
}
