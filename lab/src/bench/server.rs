//! The bench's Workers in ONE workerd: `scripts/bench-server.mjs` runs each named dist in one
//! Miniflare instance, so the edge, the bare floor and the JS peer are measured interleaved
//! against the same runtime process. Each Worker has a loopback port of its own (Miniflare's
//! direct sockets: no routing entry worker in front, as in production), and the requests
//! still carry `Host: NAME.bench`. The server reports its workerd pids (for CPU accounting,
//! see [`super::cpu`]). It stops when the handle is dropped (its stdin closes, and it is
//! killed if it lingers).

use std::collections::HashMap;

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

/// Where each Worker of the bench listens, by name (loopback only).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Routes(HashMap<String, SocketAddr>);

/// The routes of the running bench server: they live as long as the run, and a `&'static`
/// handle is `Copy` into every task of the load loops.
pub type Addr = &'static Routes;

impl Routes {
    /// `target`'s own port. Every target the bench uses is started by it, so a missing one is
    /// a bug in the bench; the caller gets a loopback port nothing listens on, and the
    /// request fails (counted, not a panic).
    pub fn of(&self, target: Target) -> SocketAddr {
        self.0
            .get(target.0)
            .copied()
            .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 9)))
    }
}

/// The routed address, the workerd pids and the direct routes of the server's ready line
/// (loopback only).
pub fn parse_ready(line: &str) -> Option<(SocketAddr, Vec<u32>, Routes)> {
    let rest = line.strip_prefix(READY)?.trim();
    let mut words = rest.split_whitespace();
    let loopback = |url: &str| -> Option<SocketAddr> {
        let a: SocketAddr = url.strip_prefix("http://")?.parse().ok()?;
        a.ip().is_loopback().then_some(a)
    };
    let addr = loopback(words.next()?)?;
    let (mut pids, mut routes) = (Vec::new(), HashMap::new());
    for w in words {
        if let Some(p) = w.strip_prefix("pid=") {
            pids.push(p.parse().ok()?);
        } else {
            let (name, url) = w.split_once('=')?;
            routes.insert(name.to_string(), loopback(url)?);
        }
    }
    Some((addr, pids, Routes(routes)))
}

pub struct BenchServer {
    pub addr: Addr,
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
        let Some((_, workerd, routes)) = parse_ready(&line) else {
            bail!("the bench server printed {line:?}, not loopback addresses");
        };
        if let Some((name, _)) = workers.iter().find(|(n, _)| !routes.0.contains_key(*n)) {
            bail!("the bench server printed {line:?}, with no port for {name}");
        }
        // One bench per process: the routes are leaked once, to be shared by every task.
        let addr: Addr = Box::leak(Box::new(routes));
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
/// `Host`, to the target's own port. Latency is to the body's last byte.
pub async fn once(
    conn: &mut Option<Conn>,
    addr: Addr,
    target: Target,
    p: &Planned,
    timeout: Duration,
) -> Observed {
    driver::once_with_host(conn, addr.of(target), &target.host(), p, timeout).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ready_line_gives_loopback_addresses_and_the_workerd_pids() {
        let (addr, pids, routes) = parse_ready(
            "bench listening on http://127.0.0.1:40123 pid=17 pid=18 edge=http://127.0.0.1:40124 peer=http://127.0.0.1:40125",
        )
        .unwrap();
        assert_eq!(addr, "127.0.0.1:40123".parse().unwrap());
        assert_eq!(pids, vec![17, 18]);
        assert_eq!(
            routes.of(Target("edge")),
            "127.0.0.1:40124".parse().unwrap()
        );
        assert_eq!(
            routes.of(Target("peer")),
            "127.0.0.1:40125".parse().unwrap()
        );
        assert_eq!(routes.of(Target("bare")), "127.0.0.1:9".parse().unwrap());
        assert_eq!(
            parse_ready("bench listening on http://127.0.0.1:1").map(|r| r.2),
            Some(Routes::default())
        );
        assert_eq!(parse_ready("bench listening on http://10.0.0.1:80"), None);
        assert_eq!(
            parse_ready("bench listening on http://127.0.0.1:1 edge=http://10.0.0.1:80"),
            None
        );
        assert_eq!(parse_ready("edge listening on http://127.0.0.1:1"), None);
        assert_eq!(parse_ready("bench listening on nonsense"), None);
    }

    #[test]
    fn hosts_follow_the_server_routes() {
        assert_eq!(Target("edge").host(), "edge.bench");
        let script = include_str!("../../../scripts/bench-server.mjs");
        assert!(script.contains("routes: [`${name}.bench/*`]"));
        assert!(script.contains("direct: true"));
    }
}
