//! [R-GRADUAL] `understudy drill --rollout OLD NEW --registry R --scenario FILE`: a release's
//! rollout against two real Workers. Both releases run as versions of one Worker in one
//! workerd behind the local front (scripts/rollout-front.mjs), the scenario's model behind
//! them (the simulated origin) and its traffic through the front; `understudy releases
//! rollout NEW --front URL` — the real command, as a child process — drives the steps. With
//! `kill_controller` the child is SIGKILLed once it has recorded its advance past the first
//! step and is started again with `--resume`.
//!
//! What it checks (each a [`Check`]): the verdict expected, the steps deployed in order with
//! none lost or repeated, no verdict on fewer answers than the SLO asks, a bad release's
//! exposure within the bound ([`Slo::exposure_ms`]), and every answer after the rollout from
//! the version it ended on.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _, Result};
use understudy_compiler::load::load_policy;
use understudy_compiler::release::registry::Registry;
use understudy_compiler::release::rollout::record::{self, RolloutRecord};
use understudy_compiler::release::rollout::Slo;
use understudy_compiler::simulate::scenario::{self, RawScenario};
use understudy_core::Millis;

use super::assess::{assess, Host};
pub use super::assess::{Check, Expect, Exposure, Outcome};
use super::front::Front;
use super::judged::Slack;
use crate::drill::edge::NodeServer;
use crate::drill::prepare::{epoch_ms, kv_seed, plan_request};
use crate::drill::script;
use crate::origin::OriginServer;

/// After the rollout ends, traffic goes on this long: what the end looks like to clients.
const TAIL: Duration = Duration::from_millis(1_500);

pub struct Options {
    pub registry: PathBuf,
    /// Default: the active release.
    pub old: Option<String>,
    pub new: String,
    pub scenario: PathBuf,
    pub rate: Option<f64>,
    pub concurrency: usize,
    pub timeout: Duration,
    pub slo: Slo,
    pub expect: Option<Expect>,
    pub kill_controller: bool,
    /// The `understudy` binary that runs the controller.
    pub exe: PathBuf,
    /// Read the releases' policies as of this instant (`--now`) instead of the clock's.
    pub now: Option<Millis>,
}

fn controller(
    opts: &Options,
    registry: &Path,
    old: &str,
    front: &str,
    resume: bool,
) -> Result<Child> {
    let s = &opts.slo;
    let mut cmd = Command::new(&opts.exe);
    cmd.args(["releases", "rollout", &opts.new, "--registry"])
        .arg(registry)
        .args(["--front", front]);
    if resume {
        cmd.arg("--resume");
    } else {
        let steps: Vec<String> = s.steps.iter().map(u8::to_string).collect();
        cmd.args(["--from", old, "--steps", &steps.join(",")])
            .args(["--dwell", &format!("{}ms", s.dwell_ms)])
            .args(["--min-answers", &s.min_answers.to_string()])
            .args(["--degraded-margin", &s.degraded_margin.to_string()])
            .args(["--unavailable-margin", &s.unavailable_margin.to_string()])
            .args(["--p95-margin", &s.p95_margin.to_string()])
            .args(["--max-holds", &s.max_holds.to_string()]);
    }
    // Its lines go to stderr: stdout is the drill's (JSON with --format json).
    cmd.stdout(std::io::stderr())
        .spawn()
        .with_context(|| format!("cannot run {}", opts.exe.display()))
}

/// Waits for the controller until `deadline`; with `kill_when`, SIGKILLs it the first time
/// its record satisfies the predicate and returns the record then.
fn watch(
    child: &mut Child,
    reg: &Registry,
    new: &str,
    deadline: Instant,
    kill_when: Option<&dyn Fn(&RolloutRecord) -> bool>,
) -> Result<(Option<i32>, Option<RolloutRecord>)> {
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok((status.code(), None));
        }
        if let Some(pred) = kill_when {
            if let Ok(Some(rec)) = record::read(reg, new) {
                if pred(&rec) {
                    child.kill()?; // SIGKILL
                    child.wait()?;
                    return Ok((None, Some(rec)));
                }
            }
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            bail!("the rollout did not end before the scenario's traffic did; give the scenario more requests");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

pub fn run(opts: &Options) -> Result<Outcome> {
    let root = understudy_compiler::dist::edge::workspace_root().context(
        "`understudy drill --rollout` runs inside an Understudy checkout (it needs scripts/rollout-front.mjs and the npm packages)",
    )?;
    if !root.join("node_modules/miniflare").is_dir() {
        bail!("{} has no node_modules/miniflare; run `scripts/setup.sh` there first (it runs `npm ci`)", root.display());
    }
    understudy_compiler::release::rollout::preflight::settings(
        &opts.slo,
        &understudy_compiler::release::rollout::preflight::policy_key,
    )?;
    let reg = Registry::open(&opts.registry)?;
    let new = reg.resolve(&opts.new)?;
    let old = match &opts.old {
        Some(o) => reg.resolve(o)?,
        None => reg.active()?.with_context(|| {
            format!(
                "{} has no active release; name the old one",
                reg.root.display()
            )
        })?,
    };
    let (old_rel, new_rel) = (reg.load(&old)?, reg.load(&new)?);

    // The traffic: the scenario's requests as the old release's policy reads them.
    let now = opts.now.unwrap_or(Millis(epoch_ms()));
    let loaded = load_policy(&old_rel.source_path(&old_rel.record.sources.policy), now);
    let Some(policy) = loaded.policy.as_ref().filter(|_| !loaded.has_errors()) else {
        // The diagnostic that stopped it, as `check` renders it (a stale snapshot says so,
        // with its date: `--now` reads the release as of another instant).
        let mut sources = understudy_compiler::render::Sources::default();
        for (p, t) in &loaded.sources {
            sources.add(p, t);
        }
        let shown: String = loaded
            .diagnostics
            .iter()
            .filter(|d| d.is_error())
            .map(|d| understudy_compiler::render::human(&sources, d))
            .collect();
        bail!(
            "release {old}: its policy does not read as of {}{}:\n{shown}",
            understudy_compiler::release::record::rfc3339(now.0),
            if opts.now.is_some() {
                " (--now)"
            } else {
                " (pass --now to read it as of another instant)"
            }
        );
    };
    let policy = policy.clone();
    // The new release's deadline: how much slack a healthy model leaves it.
    let new_deadline_ms = {
        let loaded = load_policy(&new_rel.source_path(&new_rel.record.sources.policy), now);
        let ok = !loaded.has_errors();
        loaded.policy.filter(|_| ok).map(|p| p.budget.deadline_ms)
    };
    let text = std::fs::read_to_string(&opts.scenario)
        .with_context(|| format!("{}: cannot read", opts.scenario.display()))?;
    let mut raw: RawScenario =
        toml::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {e}", opts.scenario.display()))?;
    if let Some(rate) = opts.rate {
        let before = raw.rate.unwrap_or(rate);
        crate::drill::setup::widen_identities(&mut raw, &policy, rate / before)?;
        raw.interval = None;
        raw.rate = Some(rate);
    }
    let sc = scenario::build(raw, &policy)
        .map_err(|e| anyhow::anyhow!("{}: {e}", opts.scenario.display()))?;
    let rate_rps = 1e6 / sc.interval_us.max(1) as f64;

    let work = tempfile::Builder::new()
        .prefix("understudy-rollout-")
        .tempdir()?;
    // The controller works on a scratch registry holding copies of the two releases: a
    // drill deploys nothing on Cloudflare, so it must not move the real registry's ACTIVE,
    // write its history or leave a rollout record there.
    let scratch = work.path().join("registry");
    Registry::open_or_create(&scratch)?;
    for rel in [&old_rel, &new_rel] {
        copy_dir(&rel.dir, &scratch.join("releases").join(rel.id()))?;
    }
    let reg = Registry::open(&scratch)?;
    let seed = work.path().join("kv-seed.json");
    std::fs::write(&seed, serde_json::to_vec_pretty(&kv_seed(&sc, now))?)?;
    let origin = OriginServer::spawn(([127, 0, 0, 1], 0).into(), Some(script::origin_script(&sc)))?;
    let mut cmd = Command::new("node");
    cmd.arg(root.join("scripts/rollout-front.mjs"))
        .arg("--old")
        .arg(&old_rel.dir)
        .arg("--new")
        .arg(&new_rel.dir)
        .args(["--origin", &origin.url()])
        .arg("--seed")
        .arg(&seed)
        .current_dir(&root);
    let (server, url) = NodeServer::start(
        cmd,
        "edge listening on ",
        Duration::from_secs(60),
        "the rollout's front",
    )?;
    let front = Front::new(&url)?;
    // [T-WITNESS] The host beside the rollout: its workerd (every version and the front).
    let witness = crate::witness::Witness::start(server.runtimes());
    eprintln!(
        "drill --rollout: {old} → {new} at {rate_rps:.0} req/s through {url}, steps {:?}%",
        opts.slo.steps
    );

    let mut tokens = std::collections::BTreeMap::new();
    let plan: Vec<_> = (0..sc.requests)
        .map(|i| plan_request(&policy, &sc, i, &mut tokens))
        .collect();
    let limit = Duration::from_micros(sc.requests * sc.interval_us);
    let stop = Arc::new(AtomicBool::new(false));
    let start_epoch = epoch_ms();
    let started = Instant::now();
    let load = {
        let (stop, addr) = (Arc::clone(&stop), front_addr(&url)?);
        let (concurrency, timeout) = (opts.concurrency, opts.timeout);
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            anyhow::Ok(rt.block_on(super::load::run(
                addr,
                plan,
                concurrency,
                timeout,
                limit,
                stop,
                start_epoch,
            )))
        })
    };
    let deadline = Instant::now() + limit;
    let driven = (|| -> Result<(Option<i32>, Option<RolloutRecord>)> {
        let mut child = controller(opts, &scratch, &old, &url, false)?;
        let past_first = |r: &RolloutRecord| r.state.step >= 1;
        let (code, killed) = watch(
            &mut child,
            &reg,
            &new,
            deadline,
            opts.kill_controller
                .then_some(&past_first as &dyn Fn(&RolloutRecord) -> bool),
        )?;
        if killed.is_none() {
            return Ok((code, None));
        }
        eprintln!(
            "drill --rollout: the controller was killed (SIGKILL); resuming from the registry"
        );
        let mut child = controller(opts, &scratch, &old, &url, true)?;
        let (code, _) = watch(&mut child, &reg, &new, deadline, None)?;
        Ok((code, killed))
    })();
    if driven.is_ok() {
        std::thread::sleep(TAIL);
    }
    stop.store(true, Ordering::Relaxed);
    let seen = load
        .join()
        .map_err(|_| anyhow::anyhow!("the load thread panicked"))??;
    let deployments = front.deployments();
    let witness = witness.stop(started);
    let stalls = witness.stalls();
    drop(server);
    origin.shutdown();
    let (code, killed) = driven?;
    let deployments = deployments?;
    if !matches!(code, Some(0 | 1)) {
        bail!("the controller (`understudy releases rollout`) failed (exit {code:?}); its error is above");
    }
    let rec = record::read(&reg, &new)?.context("the controller left no record")?;
    let active_after = reg.active()?;
    let mut outcome = assess(
        opts.expect,
        &old,
        &new,
        rate_rps,
        start_epoch,
        &seen,
        &deployments,
        rec,
        killed,
        Host {
            stalls: &stalls,
            slack: slack(&sc, policy.budget.deadline_ms, new_deadline_ms),
        },
    );
    outcome.active_after = active_after;
    outcome.witness = witness.report();
    outcome.stalls = stalls.list().to_vec();
    Ok(outcome)
}

/// The slack a healthy model leaves each version's deadline, when the scenario's model is
/// healthy throughout (no fault phase): only then is the old version held to answering live
/// and a deadline missed a matter of time.
fn slack(
    sc: &scenario::Scenario,
    old_deadline_ms: u64,
    new_deadline_ms: Option<u64>,
) -> Option<Slack> {
    let model = sc.model_latency_ms as f64;
    (sc.phases.is_empty()).then(|| Slack {
        old_ms: old_deadline_ms as f64 - model,
        new_ms: new_deadline_ms.map_or(0.0, |d| d as f64 - model),
    })
}

/// Copies the directory `from` to `to` (files and subdirectories).
fn copy_dir(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to).with_context(|| format!("cannot create {}", to.display()))?;
    for entry in
        std::fs::read_dir(from).with_context(|| format!("cannot list {}", from.display()))?
    {
        let entry = entry?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        if entry.file_type()?.is_dir() {
            copy_dir(&src, &dst)?;
        } else {
            std::fs::copy(&src, &dst)
                .with_context(|| format!("cannot copy {} to {}", src.display(), dst.display()))?;
        }
    }
    Ok(())
}

fn front_addr(url: &str) -> Result<std::net::SocketAddr> {
    url.strip_prefix("http://")
        .and_then(|a| a.parse().ok())
        .with_context(|| format!("the front printed an unexpected address {url:?}"))
}
