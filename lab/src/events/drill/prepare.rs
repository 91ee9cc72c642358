//! Before the run: the scenario and the policy read and checked, the retry clock scaled, the
//! bake into the scratch directory, the origin and the edge launched.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{bail, Context as _, Result};
use serde_json::json;
use understudy_core::policy::events::Events;
use understudy_core::policy::Policy;
use understudy_core::time::format_duration as fmt;
use understudy_core::Millis;

use super::Options;
use crate::drill::{epoch_ms, stamp_policy};
use crate::events::client::Edge as Client;
use crate::events::edge::{Edge, Launch};
use crate::events::produce::Address;
use crate::events::scenario::EventsScenario;
use crate::origin::{Ledger, OriginHandle, OriginServer};
use understudy_compiler::dist::{self, edge::workspace_root};
use understudy_compiler::load::load_policy;
use understudy_compiler::simulate::request::dev_secret;

/// Everything the later phases need. Fields drop in order: the edge and the origin stop
/// before the scratch directory they write to is removed.
pub(super) struct Prepared {
    pub setup: Setup,
    pub stack: Stack,
    /// The bake, the outbox storage and the runtime log; removed when dropped.
    pub scratch: tempfile::TempDir,
}

/// What this run is: the scenario, its scale, the policy as baked, where things are.
pub(super) struct Setup {
    pub sc: EventsScenario,
    pub scale: f64,
    /// The scaled timings against the policy's, as printed.
    pub scale_line: String,
    /// Events of the faulty phase.
    pub count: u64,
    pub run_id: String,
    /// The policy as baked (its events timings scaled).
    pub policy: Policy,
    pub events: Events,
    pub release_id: String,
    /// How the edge is started (again, after the kill), with its storage and its log.
    pub launch: Launch,
    /// A producer token per tenant.
    pub tokens: BTreeMap<String, String>,
    /// How long quiescence is waited for.
    pub settle_limit: Duration,
}

/// What runs: the edge (replaced when it is killed and restarted) and the origin.
pub(super) struct Stack {
    pub edge: Arc<Mutex<Option<Edge>>>,
    /// Where the edge is now.
    pub addr: Address,
    /// A client with the admin token (its address is the first edge's).
    pub admin: Client,
    pub origin: OriginHandle,
}

impl Stack {
    /// The consumer's ledger, then the edge and the origin stopped.
    pub fn stop(self) -> Ledger {
        let ledger = self.origin.ledger();
        drop(self.edge.lock().ok().and_then(|mut e| e.take()));
        self.origin.shutdown();
        ledger
    }
}

/// The policy's events timings scaled by `f`; replay switched on (this drill is the test
/// seed 004 asks for before replay is enabled).
pub fn scale_events(ev: &Events, f: f64) -> Events {
    let s = |ms: u64| ((ms as f64 * f).round() as u64).max(1);
    let mut e = ev.clone();
    e.retry.backoff_base_ms = s(ev.retry.backoff_base_ms);
    e.retry.backoff_max_ms = s(ev.retry.backoff_max_ms);
    e.retry.window_ms = s(ev.retry.window_ms);
    e.delivery.attempt_timeout_ms = s(ev.delivery.attempt_timeout_ms);
    e.alerts.oldest_pending_ms = s(ev.alerts.oldest_pending_ms);
    e.alerts.gap_ms = s(ev.alerts.gap_ms);
    e.replay = true;
    e
}

pub(super) fn prepare(opts: &Options) -> Result<Prepared> {
    let root = workspace_root().context("`understudy drill` runs inside an Understudy checkout (it needs scripts/edge-server.mjs and the npm packages)")?;
    let text = std::fs::read_to_string(&opts.scenario)
        .with_context(|| format!("{}: cannot read", opts.scenario.display()))?;
    let sc = EventsScenario::parse(&text)
        .map_err(|e| anyhow::anyhow!("{}: {e}", opts.scenario.display()))?;
    let scale = opts.time_scale.unwrap_or(sc.events.time_scale);
    if !(scale > 0.0 && scale <= 1.0) {
        bail!("--time-scale {scale} must be more than 0 and at most 1");
    }
    let count = opts.events.unwrap_or(if opts.full {
        sc.events.full_count
    } else {
        sc.events.count
    });

    let run_id = format!("d{}", epoch_ms() % 1_000_000_000);
    // The scratch directory (bake, outbox storage, runtime log) lives in the checkout like
    // the other drills' and is removed when dropped, whatever happens.
    let parent = root.join(".understudy/drill");
    std::fs::create_dir_all(&parent)
        .with_context(|| format!("cannot create {}", parent.display()))?;
    let scratch = tempfile::Builder::new()
        .prefix("events-")
        .tempdir_in(&parent)
        .with_context(|| format!("cannot create a directory in {}", parent.display()))?;
    let work = scratch.path().to_path_buf();
    let now = Millis(epoch_ms());
    let stamped = stamp_policy(&opts.policy, &work, now)?;
    let loaded = load_policy(&stamped, now);
    let Some(base) = loaded.policy.as_ref().filter(|_| !loaded.has_errors()) else {
        bail!(
            "{} is invalid (run `understudy check` on it); nothing was drilled",
            opts.policy.display()
        );
    };
    let Some(base_events) = &base.events else {
        bail!(
            "{} has no [events] section: an events scenario needs one (see docs/policy.md)",
            opts.policy.display()
        );
    };
    let mut policy = base.clone();
    let events = scale_events(base_events, scale);
    policy.events = Some(events.clone());
    let scale_line = format!(
        "time scale {scale}: backoff {}..{}, window {}, attempt timeout {}, {} attempts (policy: {}..{}, {}, {})",
        fmt(events.retry.backoff_base_ms),
        fmt(events.retry.backoff_max_ms),
        fmt(events.retry.window_ms),
        fmt(events.delivery.attempt_timeout_ms),
        events.retry.attempts,
        fmt(base_events.retry.backoff_base_ms),
        fmt(base_events.retry.backoff_max_ms),
        fmt(base_events.retry.window_ms),
        fmt(base_events.delivery.attempt_timeout_ms),
    );
    eprintln!(
        "events drill: {} — {count} events (+{} healthy) over {} aggregates, {scale_line}",
        sc.name, sc.events.healthy, sc.events.aggregates
    );

    // Bake.
    let edge_dir = dist::edge::locate(opts.edge.as_deref())?;
    let file = dist::file_name(&opts.policy);
    let inputs = dist::Inputs::new(&loaded, &policy, &file, now);
    let built = dist::assemble(&inputs, &edge_dir)?;
    let dist_dir = work.join("dist");
    dist::write_dir(&dist_dir, &built)?;

    // Launch.
    let origin = OriginServer::spawn(([127, 0, 0, 1], 0).into(), None)?;
    let launch = Launch {
        root: root.clone(),
        dist: dist_dir,
        origin: origin.url(),
        events_url: origin.events_url(),
        persist: work.join("persist"),
        log: work.join("edge.log"),
    };
    let edge = Arc::new(Mutex::new(Some(Edge::start(&launch)?)));
    let first_addr = edge
        .lock()
        .map_err(|_| anyhow::anyhow!("lock"))?
        .as_ref()
        .map(|e| e.addr)
        .context("no edge")?;
    let addr: Address = Arc::new(Mutex::new(first_addr));
    let admin_token = policy.admin.as_ref().map(|a| dev_secret(&a.secret));
    let admin = Client::from_addr(first_addr, admin_token);
    let tokens = tokens(&policy, &events, sc.events.tenants.max(1))?;
    let settle_limit =
        Duration::from_millis(events.retry.window_ms.saturating_mul(3)) + Duration::from_secs(90);
    Ok(Prepared {
        setup: Setup {
            sc,
            scale,
            scale_line,
            count,
            run_id,
            release_id: built.release_id,
            policy,
            events,
            launch,
            tokens,
            settle_limit,
        },
        stack: Stack {
            edge,
            addr,
            admin,
            origin,
        },
        scratch,
    })
}

/// A signed producer token for each of `tenants` tenants, by tenant.
fn tokens(policy: &Policy, ev: &Events, tenants: u64) -> Result<BTreeMap<String, String>> {
    let id = policy
        .identity
        .as_ref()
        .context("the policy has [events] but no [identity]")?;
    let key = dev_secret(&id.secret);
    let exp = epoch_ms() / 1000 + 6 * 3600;
    Ok((0..tenants)
        .map(|t| {
            let tenant = format!("tenant-{t}");
            let claims = json!({"iss": id.issuer, "aud": id.audience, "sub": "drill-producer", "exp": exp, ev.tenant_claim.clone(): tenant});
            (tenant, understudy_core::token::sign(&claims, key.as_bytes()))
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_retry_clock_scales_and_replay_is_switched_on() {
        let text =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../policies/api.toml"))
                .unwrap();
        let loaded = understudy_compiler::validate::load_text(
            std::path::Path::new("api.toml"),
            text,
            Millis(0),
        );
        let ev = loaded.policy.unwrap().events.unwrap();
        let s = scale_events(&ev, 0.05);
        assert_eq!(
            (
                s.retry.backoff_base_ms,
                s.retry.backoff_max_ms,
                s.retry.window_ms
            ),
            (350, 15_000, 45_000)
        );
        assert_eq!(s.delivery.attempt_timeout_ms, 500);
        assert!(s.replay && !ev.replay);
        let (worst, _) = s.retry.worst_case(s.delivery.attempt_timeout_ms);
        assert!(
            worst <= s.retry.window_ms,
            "the scaled schedule still fits its window"
        );
    }
}
