//! The built Worker running in workerd, through Miniflare, by `scripts/edge-server.mjs` —
//! the same way `understudy dev` runs it (see cmd/dev.rs): `node` on 127.0.0.1, a free port,
//! the origin URL var, seeded KV, development secrets. The process stops when this handle
//! is dropped (its stdin closes, and it is killed if it lingers).

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{bail, Context, Result};

/// workerd's first start compiles the module.
const START: Duration = Duration::from_secs(60);
const READY: &str = "edge listening on ";

pub use understudy_compiler::simulate::request::dev_secret;

/// A `node` script serving Workers: started, awaited until it prints its ready line, and
/// stopped when dropped (its stdin closes; it is killed if it lingers past 3 s).
pub struct NodeServer {
    child: Child,
    stdin: Option<ChildStdin>,
}

impl NodeServer {
    /// The `node` process's id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The workerd processes this server runs (Miniflare's children named `workerd`): what
    /// answers requests, for the witness to watch and `--inject-stall` to stop. Empty where
    /// there is no `/proc`.
    pub fn runtimes(&self) -> Vec<crate::witness::Watched> {
        children_named(self.pid() as i32, "workerd")
            .into_iter()
            .map(|pid| crate::witness::Watched {
                label: "workerd".into(),
                pid,
            })
            .collect()
    }

    /// Spawns `cmd` (stdin and stdout piped here, stderr inherited) and waits up to
    /// `within` for a stdout line starting with `ready`; returns the rest of that line.
    pub fn start(
        mut cmd: Command,
        ready: &'static str,
        within: Duration,
        what: &str,
    ) -> Result<(NodeServer, String)> {
        let mut child = cmd
            .env("WRANGLER_SEND_METRICS", "false")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .context("cannot run `node`; install Node.js 20 or newer (see scripts/setup.sh)")?;
        let stdin = child.stdin.take();
        let Some(stdout) = child.stdout.take() else {
            let _ = child.kill();
            let _ = child.wait();
            bail!("no stdout from {what}")
        };
        let server = NodeServer { child, stdin };
        let (tx, rx) = mpsc::channel::<String>();
        std::thread::spawn(move || {
            // Keep draining so the child never blocks on a full pipe.
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(rest) = line.strip_prefix(ready) {
                    let _ = tx.send(rest.trim().to_string());
                }
            }
        });
        match rx.recv_timeout(within) {
            Ok(rest) => Ok((server, rest)),
            // Dropping `server` stops the process.
            Err(e) => bail!("{what} did not start: {e}; its errors are above"),
        }
    }
}

impl Drop for NodeServer {
    fn drop(&mut self) {
        drop(self.stdin.take());
        for _ in 0..30 {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(target_os = "linux")]
fn children_named(parent: i32, name: &str) -> Vec<i32> {
    let Ok(all) = procfs::process::all_processes() else {
        return Vec::new();
    };
    all.filter_map(Result::ok)
        .filter_map(|p| p.stat().ok())
        .filter(|s| s.ppid == parent && s.comm == name)
        .map(|s| s.pid)
        .collect()
}

#[cfg(not(target_os = "linux"))]
fn children_named(_parent: i32, _name: &str) -> Vec<i32> {
    Vec::new()
}

pub struct EdgeProcess {
    pub url: String,
    pub addr: SocketAddr,
    /// Every isolate's address (`--isolates`), the first being `addr`.
    pub addrs: Vec<SocketAddr>,
    pub server: NodeServer,
}

impl EdgeProcess {
    /// Starts the Worker in `dist` against `origin`, with KV seeded from `seed` (a JSON file
    /// in edge-server.mjs's format).
    pub fn start(
        root: &Path,
        dist: &Path,
        origin: &str,
        seed: Option<&PathBuf>,
    ) -> Result<EdgeProcess> {
        Self::start_fleet(root, dist, origin, seed, 1, None)
    }

    /// [`Self::start`] with `isolates` copies of the Worker, each its own isolate on a port
    /// of its own, sharing KV and the Durable Objects (the breaker's coordinator); with
    /// `log_file`, the Workers' log lines are appended to it.
    pub fn start_fleet(
        root: &Path,
        dist: &Path,
        origin: &str,
        seed: Option<&PathBuf>,
        isolates: usize,
        log_file: Option<&Path>,
    ) -> Result<EdgeProcess> {
        let server_js = root.join("scripts/edge-server.mjs");
        if !root.join("node_modules/miniflare").is_dir() {
            bail!("{} has no node_modules/miniflare; run `scripts/setup.sh` there first (it runs `npm ci`)", root.display());
        }
        let mut cmd = Command::new("node");
        cmd.arg(&server_js)
            .arg("--dist")
            .arg(dist)
            .args(["--port", "0", "--origin", origin])
            .current_dir(root);
        if let Some(seed) = seed {
            cmd.arg("--seed").arg(seed);
        }
        if isolates > 1 {
            cmd.arg("--isolates").arg(isolates.to_string());
        }
        if let Some(f) = log_file {
            cmd.arg("--log-file").arg(f);
        }
        let what = format!("the edge ({})", server_js.display());
        let (server, line) = NodeServer::start(cmd, READY, START, &what)?;
        let mut addrs = Vec::new();
        for url in line.split_whitespace() {
            let addr: SocketAddr = url
                .strip_prefix("http://")
                .and_then(|a| a.parse().ok())
                .with_context(|| {
                    format!("the edge server printed an unexpected address {url:?}")
                })?;
            if !addr.ip().is_loopback() {
                bail!("the edge listens on {addr}, not loopback");
            }
            addrs.push(addr);
        }
        if addrs.len() != isolates.max(1) {
            bail!(
                "the edge server listed {} addresses for {isolates} isolates: {line:?}",
                addrs.len()
            );
        }
        Ok(EdgeProcess {
            url: format!("http://{}", addrs[0]),
            addr: addrs[0],
            addrs,
            server,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dev_secrets_match_the_edge_server() {
        assert_eq!(dev_secret("TOKEN_HMAC_KEY"), "dev-token-hmac-key");
        assert_eq!(dev_secret("ADMIN_TOKEN"), "dev-admin-token");
    }
}
