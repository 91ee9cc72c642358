//! The simulated model origin ([B-ORIGIN]): a real HTTP/1.1 server on loopback that answers
//! like a model and misbehaves on request — slow, hanging, failing, throttled, reset, dripping,
//! garbled — following a [`Script`] or a live override.
//!
//! Why a real server and not a mock: the edge's deadline, abort and retry logic is about
//! sockets and time (a dropped fetch must close the connection; a reset must surface as a
//! connection error), and only a real peer shows that. End-to-end tests in Node and Rust,
//! `understudy dev` and the drills all use it.
//!
//! From Rust (synchronous code and tests):
//!
//! ```no_run
//! use understudy_lab::origin::{Fault, OriginServer};
//! let origin = OriginServer::spawn("127.0.0.1:0".parse()?, None)?;
//! println!("{}", origin.url());
//! origin.set_fault(Fault::Status { code: 503 })?;
//! assert_eq!(origin.stats().requests, 0);
//! origin.shutdown();
//! # anyhow::Ok(())
//! ```

mod answer;
mod consumer;
mod control;
mod fault;
mod http;
mod script;
mod server;
mod state;

use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{bail, Context as _};
use tokio::sync::watch;

pub use answer::MODEL;
pub use consumer::{ConsumerConfig, ConsumerFault, ConsumerRule, Effect, Ledger};
pub use fault::{
    Behavior, Fault, DEFAULT_HUGE_BYTES, DEFAULT_SLOW_CHUNKS, MAX_DELAY_MS, MAX_HUGE_BYTES,
};
pub use script::{RequestRange, Rule, Script, ScriptError, TimeRange};
pub use state::{Outcome, RequestRecord, Stats, DEFAULT_RECENT};

use state::Shared;

/// How to start an origin. `OriginConfig::new(addr)` gives a healthy origin with no script.
#[derive(Debug, Clone)]
pub struct OriginConfig {
    /// Where to listen; must be a loopback address. Port 0 picks a free port.
    pub listen: SocketAddr,
    /// The fault script; `None` answers every request with its default behaviour.
    pub script: Option<Script>,
    /// Latency added before every model answer, whatever the fault (a network's floor).
    pub base_latency: Duration,
    /// How many recent requests [`Stats::recent`] keeps.
    pub recent: usize,
}

impl OriginConfig {
    pub fn new(listen: SocketAddr) -> Self {
        OriginConfig {
            listen,
            script: None,
            base_latency: Duration::ZERO,
            recent: DEFAULT_RECENT,
        }
    }
}

/// Starts origins. See [`OriginServer::spawn`].
pub struct OriginServer;

impl OriginServer {
    /// Starts an origin on `listen` (loopback only; port 0 picks a free port) following
    /// `script`, on its own thread with its own tokio runtime. It stops when the returned
    /// handle is shut down or dropped.
    pub fn spawn(listen: SocketAddr, script: Option<Script>) -> anyhow::Result<OriginHandle> {
        let mut config = OriginConfig::new(listen);
        config.script = script;
        Self::spawn_with(config)
    }

    /// Starts an origin with every setting of [`OriginConfig`].
    pub fn spawn_with(config: OriginConfig) -> anyhow::Result<OriginHandle> {
        if !config.listen.ip().is_loopback() {
            bail!(
                "refusing to listen on {}: the simulated origin listens on loopback only (e.g. 127.0.0.1:8788)",
                config.listen
            );
        }
        if config.base_latency > Duration::from_millis(MAX_DELAY_MS) {
            bail!(
                "base latency {:?} is more than the 10-minute limit",
                config.base_latency
            );
        }
        let listener = TcpListener::bind(config.listen)
            .with_context(|| format!("cannot listen on {}", config.listen))?;
        listener
            .set_nonblocking(true)
            .context("cannot make the listener non-blocking")?;
        let addr = listener
            .local_addr()
            .context("cannot read the listening address")?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .context("cannot start the origin's runtime")?;
        let listener = {
            let _entered = runtime.enter();
            tokio::net::TcpListener::from_std(listener).context("cannot register the listener")?
        };
        let script = config
            .script
            .unwrap_or_else(|| Script::constant(Behavior::healthy()));
        let shared = Shared::new(script, config.base_latency, config.recent);
        let (stop, stopped) = watch::channel(false);
        let serving = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name(format!("understudy-origin-{}", addr.port()))
            .spawn(move || {
                runtime.block_on(server::serve(listener, serving, stopped));
                // Dropping the runtime cancels every connection still open (hangs included).
                drop(runtime);
            })
            .context("cannot start the origin's thread")?;
        Ok(OriginHandle {
            addr,
            shared,
            stop,
            thread: Some(thread),
        })
    }
}

/// A running origin. Dropping it stops the origin, like [`OriginHandle::shutdown`].
pub struct OriginHandle {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: watch::Sender<bool>,
    thread: Option<JoinHandle<()>>,
}

impl OriginHandle {
    /// The address it listens on (with the real port when started on port 0).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Overrides the script for every request from now on, until [`OriginHandle::clear_fault`].
    /// Fails when a value is out of bounds (e.g. a latency over 10 minutes).
    pub fn set_fault(&self, fault: impl Into<Behavior>) -> anyhow::Result<()> {
        let behavior = fault.into();
        behavior
            .validate()
            .map_err(|e| anyhow::anyhow!("bad fault: {e}"))?;
        self.shared.set_override(Some(behavior));
        Ok(())
    }

    /// Changes the latency added before every answer from the next request on (requests
    /// already waiting keep theirs). Fails over the 10-minute limit.
    pub fn set_base_latency(&self, latency: Duration) -> anyhow::Result<()> {
        if latency > Duration::from_millis(MAX_DELAY_MS) {
            bail!("base latency {latency:?} is more than the 10-minute limit");
        }
        self.shared.set_base_latency(latency);
        Ok(())
    }

    /// How long the answers sent in full took, as the origin itself measured them (from the
    /// request's arrival to the last byte handed to the connection, its own scheduling
    /// delays included): `v[i]` answers of `i` ms, the last bin everything slower. Counts
    /// since start; the difference of two snapshots is what happened between them.
    pub fn served_histogram(&self) -> Vec<u64> {
        self.shared.served_histogram()
    }

    /// Drops the override: the script (or the healthy default) applies again.
    pub fn clear_fault(&self) {
        self.shared.set_override(None);
    }

    /// Sets the event consumer's rules (`/__events/…`).
    pub fn set_consumer(&self, config: ConsumerConfig) -> anyhow::Result<()> {
        config
            .validate()
            .map_err(|e| anyhow::anyhow!("bad consumer config: {e}"))?;
        self.shared.consumer.configure(config);
        Ok(())
    }

    /// The event consumer's side-effect ledger.
    pub fn ledger(&self) -> Ledger {
        self.shared.consumer.ledger()
    }

    /// `http://127.0.0.1:PORT/__events/deliver`: where deliveries to this consumer go.
    pub fn events_url(&self) -> String {
        format!("{}/__events/deliver", self.url())
    }

    /// Zeroes the counters and restarts request numbering and the script's clock.
    pub fn reset_stats(&self) {
        self.shared.reset_counters();
    }

    /// What the origin has seen so far.
    pub fn stats(&self) -> Stats {
        self.shared.stats()
    }

    /// Stops accepting, closes every connection and waits for the server thread.
    pub fn shutdown(mut self) {
        self.stop_and_join();
    }

    /// Blocks until the origin stops (it stops only through [`OriginHandle::shutdown`] or
    /// drop, so this is "serve until the process is killed").
    pub fn wait(mut self) {
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }

    fn stop_and_join(&mut self) {
        let _ = self.stop.send(true);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for OriginHandle {
    fn drop(&mut self) {
        self.stop_and_join();
    }
}

impl std::fmt::Debug for OriginHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OriginHandle")
            .field("addr", &self.addr)
            .finish()
    }
}
