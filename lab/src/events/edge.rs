//! The edge for the events drill: `scripts/edge-server.mjs` in its own process group, with a
//! persistence directory, so that it can be killed as a whole (node and its workerd child)
//! with SIGKILL — the crash the outbox must survive — and started again on the same storage.

use std::io::{BufRead, BufReader, Write as _};
use std::net::SocketAddr;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{bail, Context as _, Result};

const READY: &str = "edge listening on ";

pub struct Edge {
    pub addr: SocketAddr,
    child: Child,
    _stdin: Option<ChildStdin>,
}

#[derive(Debug, Clone)]
pub struct Launch {
    pub root: PathBuf,
    pub dist: PathBuf,
    pub origin: String,
    pub events_url: String,
    pub persist: PathBuf,
    /// Every line the runtime prints (the Worker's log lines) is appended here.
    pub log: PathBuf,
}

impl Edge {
    pub fn start(l: &Launch) -> Result<Edge> {
        let mut cmd = Command::new("node");
        cmd.arg(l.root.join("scripts/edge-server.mjs"))
            .arg("--dist")
            .arg(&l.dist)
            .args([
                "--port",
                "0",
                "--verbose",
                "--origin",
                &l.origin,
                "--events-url",
                &l.events_url,
            ])
            .arg("--persist")
            .arg(&l.persist)
            .current_dir(&l.root)
            .env("WRANGLER_SEND_METRICS", "false")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            // Its own process group: the kill takes node and workerd together.
            .process_group(0);
        let mut child = cmd
            .spawn()
            .context("cannot run `node`; install Node.js 20 or newer (see scripts/setup.sh)")?;
        let stdin = child.stdin.take();
        let Some(stdout) = child.stdout.take() else {
            bail!("no stdout from the edge server");
        };
        let mut log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&l.log)
            .with_context(|| format!("cannot open {}", l.log.display()))?;
        let (tx, rx) = mpsc::channel::<String>();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(rest) = line.strip_prefix(READY) {
                    let _ = tx.send(rest.trim().to_string());
                }
                let _ = writeln!(log, "{line}");
            }
        });
        let mut edge = Edge {
            addr: ([127, 0, 0, 1], 0).into(),
            child,
            _stdin: stdin,
        };
        let url = match rx.recv_timeout(Duration::from_secs(90)) {
            Ok(u) => u,
            Err(e) => {
                edge.kill();
                bail!("the edge did not start: {e}");
            }
        };
        edge.addr = url
            .strip_prefix("http://")
            .and_then(|a| a.parse().ok())
            .with_context(|| format!("the edge printed an unexpected address {url:?}"))?;
        Ok(edge)
    }

    /// SIGKILL to the whole process group, then reaps node.
    pub fn kill(&mut self) {
        let pgid = self.child.id();
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{pgid}")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Edge {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Every file under `dir` whose bytes contain `needle`.
pub fn files_containing(dir: &Path, needle: &[u8]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if let Ok(bytes) = std::fs::read(&p) {
                if bytes.windows(needle.len()).any(|w| w == needle) {
                    out.push(p);
                }
            }
        }
    }
    out
}
