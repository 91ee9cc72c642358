//! A drill's preparation: the scenario read (with `--rate` applied), the policy copied with
//! a fresh inventory stamp and validated, the scenario and the breaker's clocks scaled, the
//! status endpoint added for instrumentation, and the edge baked into a directory.

use std::path::PathBuf;

use anyhow::{bail, Context as _, Result};
use understudy_core::policy::{Admin, Breaker, Policy};
use understudy_core::Millis;

use understudy_compiler::dist::{self, edge::workspace_root};
use understudy_compiler::load::{load_policy, Loaded};
use understudy_compiler::render::{self, Sources};
use understudy_compiler::simulate::scenario::{self, RawScenario, Scenario};

use super::limits::Limits;
use super::prepare::{epoch_ms, stamp_policy};
use super::{script, Options, DRILL_ADMIN_SECRET, DRILL_STATUS_PATH, TIE_STRETCH};

/// Everything a drill needs before anything starts.
pub struct Prepared {
    pub root: PathBuf,
    /// Removed when the drill is done (dropped).
    pub work: tempfile::TempDir,
    pub loaded: Loaded,
    /// The scaled policy the edge was baked with.
    pub policy: Policy,
    /// The scaled, stretched scenario.
    pub sc: Scenario,
    pub limits: Limits,
    pub dist_dir: PathBuf,
    pub release_id: String,
}

/// The drills' scratch directories live in the checkout (`.understudy/drill`), removed when
/// dropped.
fn tempdir(root: &std::path::Path) -> Result<tempfile::TempDir> {
    let parent = root.join(".understudy/drill");
    std::fs::create_dir_all(&parent)
        .with_context(|| format!("cannot create {}", parent.display()))?;
    tempfile::Builder::new()
        .prefix("run-")
        .tempdir_in(&parent)
        .with_context(|| format!("cannot create a directory in {}", parent.display()))
}

/// Prepares a drill; `None` when the policy is invalid (its diagnostics are printed).
pub fn prepare(opts: &Options) -> Result<Option<Prepared>> {
    if !(opts.time_scale > 0.0 && opts.time_scale <= 1.0) {
        bail!(
            "--time-scale {} must be more than 0 and at most 1",
            opts.time_scale
        );
    }
    let root = workspace_root().context("`understudy drill` runs inside an Understudy checkout (it needs scripts/edge-server.mjs and the npm packages)")?;
    let text = std::fs::read_to_string(&opts.scenario)
        .with_context(|| format!("{}: cannot read", opts.scenario.display()))?;
    let mut raw: RawScenario =
        toml::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {e}", opts.scenario.display()))?;
    let limits = Limits::parse(raw.drill.as_ref())
        .map_err(|e| anyhow::anyhow!("{}: {e}", opts.scenario.display()))?;
    if let Some(rate) = opts.rate {
        let secs = match (&raw.interval, raw.rate) {
            (Some(i), _) => {
                understudy_core::time::parse_duration(i)
                    .map_err(|e| anyhow::anyhow!("interval: {e}"))? as f64
                    / 1000.0
                    * raw.requests as f64
            }
            (None, Some(r)) => raw.requests as f64 / r,
            _ => 0.0,
        };
        raw.interval = None;
        raw.rate = Some(rate);
        raw.requests = ((secs * rate).round() as u64).max(1);
    }
    let limits = limits.scaled(opts.time_scale);

    let work = tempdir(&root)?;
    let work_dir = work.path().to_path_buf();
    let now = Millis(epoch_ms());
    let stamped = stamp_policy(&opts.policy, &work_dir, now)?;
    let loaded = load_policy(&stamped, now);
    if loaded.has_errors() || loaded.policy.is_none() {
        let mut sources = Sources::default();
        for (p, t) in &loaded.sources {
            sources.add(p, t);
        }
        for d in &loaded.diagnostics {
            eprintln!("{}", render::human(&sources, d));
        }
        eprintln!(
            "error: {} is invalid; nothing was drilled",
            opts.policy.display()
        );
        return Ok(None);
    }
    let Some(base_policy) = loaded.policy.as_ref() else {
        return Ok(None);
    };
    let full = scenario::build(raw, base_policy)
        .map_err(|e| anyhow::anyhow!("{}: {e}", opts.scenario.display()))?;
    let sc = script::stretch(&script::scale_scenario(&full, opts.time_scale), TIE_STRETCH);
    let mut policy = script::scale_policy(base_policy, opts.time_scale);
    // Instrumentation: a policy without a status endpoint gets one for the drill, so the
    // breaker's own log (every transition, half-open trials included) can be read.
    if policy.admin.is_none() && !matches!(policy.breaker, Breaker::Off) {
        policy.admin = Some(Admin {
            path: DRILL_STATUS_PATH.into(),
            secret: DRILL_ADMIN_SECRET.into(),
        });
    }

    // Bake.
    let edge_dir = dist::edge::locate(opts.edge.as_deref())?;
    let policy_file = dist::file_name(&opts.policy);
    let inputs = dist::Inputs::new(&loaded, &policy, &policy_file, now);
    let built = dist::assemble(&inputs, &edge_dir)?;
    let dist_dir = work_dir.join("dist");
    dist::write_dir(&dist_dir, &built)?;

    Ok(Some(Prepared {
        root,
        work,
        loaded,
        policy,
        sc,
        limits,
        dist_dir,
        release_id: built.release_id,
    }))
}
