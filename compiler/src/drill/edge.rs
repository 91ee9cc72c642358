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

/// The development value of a secret binding, as scripts/edge-server.mjs sets it
/// (`devSecret`): `dev-` and the name in lower kebab case.
pub fn dev_secret(name: &str) -> String {
    format!("dev-{}", name.to_ascii_lowercase().replace('_', "-"))
}

pub struct EdgeProcess {
    pub url: String,
    pub addr: SocketAddr,
    child: Child,
    stdin: Option<ChildStdin>,
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
        let server_js = root.join("scripts/edge-server.mjs");
        if !root.join("node_modules/miniflare").is_dir() {
            bail!("{} has no node_modules/miniflare; run `scripts/setup.sh` there first (it runs `npm ci`)", root.display());
        }
        let mut cmd = Command::new("node");
        cmd.arg(&server_js)
            .arg("--dist")
            .arg(dist)
            .args(["--port", "0", "--origin", origin])
            .current_dir(root)
            .env("WRANGLER_SEND_METRICS", "false")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        if let Some(seed) = seed {
            cmd.arg("--seed").arg(seed);
        }
        let mut child = cmd
            .spawn()
            .context("cannot run `node`; install Node.js 20 or newer (see scripts/setup.sh)")?;
        let stdin = child.stdin.take();
        let Some(stdout) = child.stdout.take() else {
            bail!("no stdout from the edge server")
        };
        let (tx, rx) = mpsc::channel::<String>();
        std::thread::spawn(move || {
            // Keep draining so the child never blocks on a full pipe.
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(url) = line.strip_prefix(READY) {
                    let _ = tx.send(url.trim().to_string());
                }
            }
        });
        let url = match rx.recv_timeout(START) {
            Ok(url) => url,
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                bail!(
                    "the edge ({}) did not start: {e}; its errors are above",
                    server_js.display()
                );
            }
        };
        let addr: SocketAddr = url
            .strip_prefix("http://")
            .and_then(|a| a.parse().ok())
            .with_context(|| format!("the edge server printed an unexpected address {url:?}"))?;
        if !addr.ip().is_loopback() {
            bail!("the edge listens on {addr}, not loopback");
        }
        Ok(EdgeProcess {
            url,
            addr,
            child,
            stdin,
        })
    }
}

impl Drop for EdgeProcess {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dev_secrets_match_the_edge_server() {
        assert_eq!(dev_secret("TOKEN_HMAC_KEY"), "dev-token-hmac-key");
        assert_eq!(dev_secret("ADMIN_TOKEN"), "dev-admin-token");
    }
}
