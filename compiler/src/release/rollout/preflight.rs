//! [R-GUARD] What is checked before a rollout's first step, on every path that starts one
//! (`releases rollout`, its `--dry-run`, `drill --rollout`): the settings against the ranges
//! every path shares ([`Slo::problems`]), the two releases, and that no other rollout is
//! running or stranded. A check that must pass before anything is deployed goes here, as one
//! more step of [`new_rollout`]; each refusal names what to do and leaves the registry and
//! the deployment as they were.
//!
//! The replay pre-flight (`--replay FILE…`, [`replay`]) runs after them, once, before the
//! controller: production's logs replayed through both releases' policies and judged as a
//! step is. A release that replays worse is refused with its evidence kept ([`refuse`]: the
//! one refusal that writes a record, phase `refused`), unless `--force`.

use std::path::PathBuf;

use anyhow::{anyhow, bail, Context as _, Result};

use super::record::{self, Listing, RolloutRecord};
use super::replay::{self as judged, ReplayCheck};
use super::{guard, Controller, Phase, Slo};
use crate::release::registry::Registry;
use crate::replay;

/// How the command names a setting in its messages (`--dwell`, `rollout.dwell`), from the
/// policy key's name.
pub type Named<'a> = &'a dyn Fn(&str) -> String;

/// Settings named as the policy's `[rollout]` keys.
pub fn policy_key(key: &str) -> String {
    format!("rollout.{key}")
}

/// Refuses settings outside the shared ranges, naming each setting and its value.
pub fn settings(slo: &Slo, named: Named<'_>) -> Result<()> {
    let problems = slo.problems();
    if problems.is_empty() {
        return Ok(());
    }
    let lines: Vec<String> = problems.iter().map(|p| p.render(named)).collect();
    bail!(
        "the rollout's settings are refused; nothing was deployed:\n{}",
        lines.join("\n")
    )
}

/// A new rollout, as asked for.
pub struct Ask<'a> {
    pub new: &'a str,
    /// `None`: from the active release.
    pub old: Option<&'a str>,
    pub slo: &'a Slo,
    /// Start even over a stranded or damaged rollout record (`--force`): that record is
    /// kept aside, and its split replaced by this rollout's first step.
    pub force: bool,
    pub named: Named<'a>,
}

/// What passed: the rollout to start.
#[derive(Debug, Clone)]
pub struct Plan {
    pub old: String,
    pub new: String,
    pub service: String,
    /// Records of rollouts that never ended, to keep aside before the first step
    /// (`--force` only).
    pub superseded: Vec<String>,
}

/// Every check a new rollout passes before its first step.
pub fn new_rollout(reg: &Registry, ask: &Ask<'_>) -> Result<Plan> {
    settings(ask.slo, ask.named)?;
    let new = reg.resolve(ask.new)?;
    let new_release = reg.load(&new)?;
    let superseded = unsettled(reg, &record::list(reg)?, ask.force)?;
    let old = match ask.old {
        Some(o) => reg.resolve(o)?,
        None => reg.active()?.with_context(|| {
            format!(
                "{} has no active release to roll out from; name one with --from ID",
                reg.root.display()
            )
        })?,
    };
    if old == new {
        bail!("{new} is already the release to roll out from: nothing to roll out");
    }
    let old_release = reg.load(&old)?;
    if old_release.record.service != new_release.record.service {
        bail!(
            "{old} is service {} and {new} is service {}: a rollout moves traffic between \
             versions of one Worker",
            old_release.record.service,
            new_release.record.service
        );
    }
    Ok(Plan {
        old,
        new,
        service: new_release.record.service.clone(),
        superseded,
    })
}

/// Rollouts that never ended: refused, each with its way out, unless `force`.
fn unsettled(reg: &Registry, l: &Listing, force: bool) -> Result<Vec<String>> {
    let mut ids: Vec<String> = l.damaged.iter().map(|d| d.id.clone()).collect();
    let stranded: Vec<_> = l.records.iter().filter(|r| !r.finished()).collect();
    ids.extend(stranded.iter().map(|r| r.new.clone()));
    if force || ids.is_empty() {
        return Ok(ids);
    }
    if let Some(d) = l.damaged.first() {
        bail!(
            "no rollout starts over a rollout that may not have ended: {}; or pass --force to \
             start anyway (that record is kept aside, and its split replaced by this rollout's \
             first step)",
            d.way_out(reg)
        );
    }
    let r = stranded[0];
    bail!(
        "a rollout of {} (from {}) has not ended ({}) and no controller is running it: its \
         split is still deployed. Continue it with `understudy releases rollout {} --resume \
         --registry {reg}` or revert it with `--abort`; or pass --force to start this one \
         anyway (that record is kept aside, and its split replaced by this rollout's first \
         step)",
        r.new,
        r.old,
        r.summary(),
        r.new,
        reg = reg.root.display()
    );
}

/// Keeps the records `plan.superseded` aside (`ID.superseded-MS.json`, out of the listing),
/// under the registry's lock.
pub fn keep_aside(reg: &Registry, ids: &[String], now_ms: u64) -> Result<Vec<String>> {
    let _lock = reg.lock()?;
    let mut kept = Vec::new();
    for id in ids {
        let from = record::path(reg, id);
        let to = reg
            .root
            .join(record::DIR)
            .join(format!("{id}.superseded-{now_ms}.json"));
        std::fs::rename(&from, &to)
            .with_context(|| format!("cannot keep {} aside", from.display()))?;
        kept.push(to.display().to_string());
    }
    Ok(kept)
}

/// The replay pre-flight of `new` against `old` (`--replay FILE…`): `logs` replayed through
/// both releases' policies and judged with `slo` ([`judged::check`]). The logs' lines of
/// `old` when they hold any, else of the one release they hold; lines of other services are
/// left out.
pub fn replay(
    reg: &Registry,
    old: &str,
    new: &str,
    logs: &[PathBuf],
    slo: &Slo,
) -> Result<ReplayCheck> {
    let (o, n) = (reg.load(old)?, reg.load(new)?);
    let service = Some(o.record.service.clone());
    let of_old = replay::Select {
        service: service.clone(),
        release: Some(o.id().to_string()),
    };
    let read = replay::logs(logs, &of_old)
        .or_else(|first| {
            replay::logs(
                logs,
                &replay::Select {
                    service,
                    release: None,
                },
            )
            .map_err(|_| first)
        })
        .map_err(|e| anyhow!("--replay: {e}"))?;
    judged::check(&read, &o.bake()?, &n.bake()?, slo).map_err(|e| anyhow!("--replay: {e}"))
}

/// Records the rollout of `plan` as refused by the replay pre-flight, with its evidence:
/// phase `refused`, nothing deployed. An earlier record of the same release is kept aside as
/// a new rollout keeps it.
pub fn refuse(
    reg: &Registry,
    plan: &Plan,
    slo: &Slo,
    check: ReplayCheck,
    now_ms: u64,
) -> Result<RolloutRecord> {
    let _deployment = guard::take(reg, "releases rollout", reg.lock_options.wait, false)?;
    record::keep_earlier(reg, &plan.new)?;
    let (ctrl, _) = Controller::start(slo.clone());
    let mut state = ctrl.state().clone();
    state.phase = Phase::Refused;
    let rec = RolloutRecord {
        format: record::FORMAT,
        service: plan.service.clone(),
        old: plan.old.clone(),
        new: plan.new.clone(),
        driver: "none: refused before any deployment".into(),
        slo: slo.clone(),
        state,
        started_at_ms: now_ms,
        updated_at_ms: now_ms,
        replay: Some(check),
    };
    record::write(reg, &rec)?;
    Ok(rec)
}
