//! A drill's preparation: the scenario read (with `--rate` applied), the policy copied with
//! a fresh inventory stamp and validated, the scenario and the breaker's clocks scaled, the
//! status endpoint added for instrumentation, and the edge baked into a directory.

use std::path::PathBuf;

use anyhow::{bail, Context as _, Result};
use understudy_core::policy::{Admin, Breaker, Policy};
use understudy_core::request::Validator;
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

/// `--rate` above the scenario's own keeps each identity's request rate: the lists of the
/// policy's identity parameters (`identity = true`, e.g. `user_id`) grow by the same factor
/// (`u-007` → `u-007`, `u-007-1`, `u-007-2`, …). A busier edge is more users, not the same
/// users retrying harder — the retry-storm limit is meant for the latter, and would answer
/// 429 to a drill that only sped up. Added values must pass the parameter's own rules.
pub fn widen_identities(raw: &mut RawScenario, policy: &Policy, busier: f64) -> Result<()> {
    let copies = busier.ceil() as usize;
    if copies <= 1 {
        return Ok(());
    }
    let validator = Validator::new(policy).map_err(anyhow::Error::msg)?;
    for p in policy.params.iter().filter(|p| p.identity) {
        let Some(values) = raw.params.get_mut(&p.name) else {
            continue;
        };
        let base = values.clone();
        for k in 1..copies {
            for v in &base {
                let w = format!("{v}-{k}");
                if let Err(why) = validator.check(&p.name, &w) {
                    bail!(
                        "--rate is {busier:.1}× the scenario's: its `{}` values are widened with suffixes, and `{w}` is refused ({why}); give the scenario more values instead",
                        p.name
                    );
                }
                values.push(w);
            }
        }
    }
    Ok(())
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
    // How many times busier than the scenario `--rate` makes it (1 when it does not).
    let mut busier = 1.0;
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
        if secs > 0.0 && raw.requests > 0 {
            busier = rate / (raw.requests as f64 / secs);
        }
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
    widen_identities(&mut raw, base_policy, busier)?;
    let full = scenario::build(raw, base_policy)
        .map_err(|e| anyhow::anyhow!("{}: {e}", opts.scenario.display()))?;
    if let Some(n) = full.phases.iter().position(|p| !p.regions.is_empty()) {
        anyhow::bail!(
            "{}: model.phase[{n}] strikes only some regions, and the drill's origin plays one model for every isolate; run the scenario with `understudy simulate --isolates N`",
            opts.scenario.display()
        );
    }
    let sc = script::stretch(&script::scale_scenario(&full, opts.time_scale), TIE_STRETCH);
    // `--scope`: the breaker's scope for this run, before its clocks are scaled (the fleet's
    // report interval is one of them).
    let scoped = match opts.fleet_scope {
        Some(fleet) => understudy_compiler::simulate::fleet::scoped(
            base_policy,
            fleet,
            &understudy_compiler::simulate::fleet::FleetSpec::uniform(opts.isolates as u64),
        )
        .map_err(|e| anyhow::anyhow!("--scope: {e}"))?,
        None => base_policy.clone(),
    };
    let mut policy = script::scale_policy(&scoped, opts.time_scale);
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn recommendations() -> Policy {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../policies/recommendations.toml");
        let tmp = tempfile::tempdir().expect("temp dir");
        let now = Millis(1_800_000_000_000);
        let copy = stamp_policy(&path, tmp.path(), now).expect("stamped");
        let loaded = load_policy(&copy, now);
        assert!(!loaded.has_errors(), "{:?}", loaded.diagnostics);
        loaded.policy.expect("the shipped policy reads")
    }

    fn raw(users: &[&str]) -> RawScenario {
        let text = format!(
            "name = \"x\"\nstart = \"2026-11-30T12:00:00Z\"\nrequests = 10\nrate = 10\n[params]\nuser_id = {users:?}\ncategory_id = [\"audio\"]\n[model]\nlatency = \"5ms\"\n"
        );
        toml::from_str(&text).expect("scenario")
    }

    #[test]
    fn a_busier_drill_has_more_users_not_the_same_users_retrying() {
        let policy = recommendations();
        let mut r = raw(&["u-000", "u-001"]);
        widen_identities(&mut r, &policy, 2.5).expect("widened");
        assert_eq!(
            r.params["user_id"],
            ["u-000", "u-001", "u-000-1", "u-001-1", "u-000-2", "u-001-2"]
        );
        // Not an identity: left alone.
        assert_eq!(r.params["category_id"], ["audio"]);
        // Not busier: nothing changes.
        let mut same = raw(&["u-000"]);
        widen_identities(&mut same, &policy, 1.0).expect("unchanged");
        assert_eq!(same.params["user_id"], ["u-000"]);
    }

    #[test]
    fn a_widened_value_the_policy_refuses_is_an_error_naming_it() {
        let policy = recommendations();
        let long = "u".repeat(63);
        let mut r = raw(&[long.as_str()]);
        let e = widen_identities(&mut r, &policy, 2.0)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("user_id") && e.contains(&format!("{long}-1")),
            "{e}"
        );
    }
}
