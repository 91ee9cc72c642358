//! [R-STATE] A rollout's record in the registry: `REGISTRY/rollouts/<new release>.json`,
//! replaced atomically (ADR 008's way) after every command the controller gives and before
//! the driver does the next, so a rollout killed at any moment resumes (`--resume`) at the
//! recorded step with nothing lost or repeated. A record whose phase is not finished is the
//! service's running rollout: there is at most one (`start` refuses a second).

use std::path::PathBuf;

use anyhow::{bail, Context as _, Result};
use serde::{Deserialize, Serialize};

use super::{Phase, Slo, State};
use crate::release::record::is_release_id;
use crate::release::registry::{write_atomic, Registry};

/// The registry's directory of rollout records.
pub const DIR: &str = "rollouts";
/// Bumped when the record's shape changes incompatibly.
pub const FORMAT: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RolloutRecord {
    pub format: u32,
    pub service: String,
    /// The release serving before the rollout (and after a rollback).
    pub old: String,
    /// The release rolled out.
    pub new: String,
    /// How the versions are deployed and measured: `local <front URL>` or `cloudflare`.
    pub driver: String,
    pub slo: Slo,
    pub state: State,
    pub started_at_ms: u64,
    pub updated_at_ms: u64,
    /// The replay pre-flight's evidence (`--replay`), when it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay: Option<super::replay::ReplayCheck>,
}

impl RolloutRecord {
    pub fn finished(&self) -> bool {
        self.state.phase.ended()
    }

    /// What the phase means to an operator, with the step it is at.
    pub fn summary(&self) -> String {
        let n = self.slo.steps.len();
        let at = self.slo.steps.get(self.state.step).copied().unwrap_or(100);
        let k = self.state.step + 1;
        match self.state.phase {
            Phase::Deploying => format!("deploying step {k} of {n} ({at}%)"),
            Phase::Watching if self.state.holds > 0 => format!(
                "holding at step {k} of {n} ({at}%), {} of {} holds",
                self.state.holds, self.slo.max_holds
            ),
            Phase::Watching => format!("watching step {k} of {n} ({at}%)"),
            Phase::Done => "advanced to 100%".into(),
            Phase::RollingBack => "rolling back: the old version at 100% asked for".into(),
            Phase::RolledBack => format!("rolled back at step {k} of {n} ({at}%)"),
            Phase::Aborting => "aborting: the old version at 100% asked for".into(),
            Phase::Aborted => format!("aborted at step {k} of {n} ({at}%)"),
            Phase::Refused => "refused by the replay pre-flight: nothing deployed".into(),
        }
    }
}

impl RolloutRecord {
    /// [`summary`](RolloutRecord::summary) in at most 27 characters, for a table:
    /// `rolled back 1/3 (10%)`, `holding 2/4 (50%), 3 holds`.
    pub fn brief(&self) -> String {
        let n = self.slo.steps.len();
        let at = self.slo.steps.get(self.state.step).copied().unwrap_or(100);
        let k = self.state.step + 1;
        match self.state.phase {
            Phase::Deploying => format!("deploying {k}/{n} ({at}%)"),
            Phase::Watching if self.state.holds > 0 => {
                format!("holding {k}/{n} ({at}%), {} holds", self.state.holds)
            }
            Phase::Watching => format!("watching {k}/{n} ({at}%)"),
            Phase::Done => "advanced to 100%".into(),
            Phase::RollingBack => "rolling back".into(),
            Phase::RolledBack => format!("rolled back {k}/{n} ({at}%)"),
            Phase::Aborting => "aborting".into(),
            Phase::Aborted => format!("aborted {k}/{n} ({at}%)"),
            Phase::Refused => "refused by the replay".into(),
        }
    }
}

/// A record that cannot be read: whether its rollout runs or has ended is unknown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damaged {
    pub id: String,
    pub error: String,
}

impl Damaged {
    /// What is wrong, and the command that resolves it.
    pub fn way_out(&self, reg: &Registry) -> String {
        format!(
            "{}; whether that rollout is still running cannot be read, so nothing moves the \
             deployment until it is resolved: `understudy releases rollout {} --abort --force \
             --registry {}` reads the current deployment and, when it is this rollout's split, \
             deploys the active release at 100% and records the rollout as aborted",
            self.error,
            self.id,
            reg.root.display()
        )
    }
}

/// Every record, readable or not.
#[derive(Debug, Default)]
pub struct Listing {
    /// Oldest start first.
    pub records: Vec<RolloutRecord>,
    pub damaged: Vec<Damaged>,
}

pub fn path(reg: &Registry, new: &str) -> PathBuf {
    reg.root.join(DIR).join(format!("{new}.json"))
}

/// Writes the record atomically (the caller holds the registry's lock).
pub fn write(reg: &Registry, rec: &RolloutRecord) -> Result<()> {
    let dir = reg.root.join(DIR);
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut text = serde_json::to_string_pretty(rec).context("rollout record")?;
    text.push('\n');
    write_atomic(&path(reg, &rec.new), text.as_bytes())
}

/// The record of `new`'s rollout, if it ever had one.
pub fn read(reg: &Registry, new: &str) -> Result<Option<RolloutRecord>> {
    let p = path(reg, new);
    let text = match std::fs::read_to_string(&p) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", p.display())),
    };
    let rec: RolloutRecord = serde_json::from_str(&text)
        .with_context(|| format!("{}: not a rollout record", p.display()))?;
    if rec.format != FORMAT {
        bail!(
            "{}: rollout record format {}, this understudy reads {FORMAT}",
            p.display(),
            rec.format
        );
    }
    if rec.new != new {
        bail!("{}: the record is of release {}", p.display(), rec.new);
    }
    Ok(Some(rec))
}

/// Every rollout record, oldest start first, and the damaged ones.
pub fn list(reg: &Registry) -> Result<Listing> {
    let dir = reg.root.join(DIR);
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Listing::default()),
        Err(e) => return Err(e).with_context(|| format!("cannot list {}", dir.display())),
    };
    let mut out = Listing::default();
    for entry in entries {
        let entry = entry.with_context(|| format!("cannot list {}", dir.display()))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(id) = name.strip_suffix(".json").filter(|id| is_release_id(id)) else {
            continue; // a temporary file of a killed writer, removed under the lock
        };
        match read(reg, id) {
            Ok(Some(rec)) => out.records.push(rec),
            Ok(None) => {}
            // One damaged record does not hide the others: listed apart.
            Err(e) => out.damaged.push(Damaged {
                id: id.to_string(),
                error: format!("{e:#}"),
            }),
        }
    }
    out.records.sort_by_key(|r| r.started_at_ms);
    out.damaged.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(out)
}

/// Every readable rollout record, oldest start first.
pub fn all(reg: &Registry) -> Result<Vec<RolloutRecord>> {
    Ok(list(reg)?.records)
}

/// The rollout that has not ended, if any. A damaged record is an error naming the way out:
/// it may be a running (or stranded) rollout, and nothing may move the deployment over it.
pub fn running(reg: &Registry) -> Result<Option<RolloutRecord>> {
    let l = list(reg)?;
    if let Some(d) = l.damaged.first() {
        bail!("{}", d.way_out(reg));
    }
    Ok(l.records.into_iter().find(|r| !r.finished()))
}

/// An earlier, ended rollout of the same release is kept beside (`ID.STARTED.json`) when
/// this one is first recorded, not overwritten.
pub fn keep_earlier(reg: &Registry, new: &str) -> Result<()> {
    let Some(e) = read(reg, new)? else {
        return Ok(());
    };
    let _lock = reg.lock()?;
    let kept = reg
        .root
        .join(DIR)
        .join(format!("{new}.{}.json", e.started_at_ms));
    std::fs::rename(path(reg, new), &kept)
        .with_context(|| format!("cannot keep {}", kept.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_round_trips_and_the_running_one_is_found() {
        let tmp = tempfile::tempdir().expect("temp dir");
        let reg = Registry::open_or_create(tmp.path()).expect("registry");
        let (c, _) = super::super::Controller::start(Slo::default());
        let mut rec = RolloutRecord {
            format: FORMAT,
            service: "svc".into(),
            old: "r-000000000001".into(),
            new: "r-000000000002".into(),
            driver: "local http://127.0.0.1:1".into(),
            slo: Slo::default(),
            state: c.state().clone(),
            started_at_ms: 1,
            updated_at_ms: 1,
            replay: None,
        };
        write(&reg, &rec).expect("written");
        assert_eq!(read(&reg, &rec.new).expect("read"), Some(rec.clone()));
        assert_eq!(running(&reg).expect("running"), Some(rec.clone()));
        rec.state.phase = Phase::Done;
        write(&reg, &rec).expect("rewritten");
        assert_eq!(running(&reg).expect("none running"), None);
        std::fs::write(path(&reg, &rec.new), "{").expect("damaged");
        let e = format!("{:#}", read(&reg, &rec.new).unwrap_err());
        assert!(e.contains("not a rollout record"), "{e}");
        assert_eq!(all(&reg).expect("the others still listed"), Vec::new());
        let l = list(&reg).expect("listed");
        assert_eq!(l.damaged.len(), 1, "the damaged record is listed apart");
        let e = format!("{:#}", running(&reg).unwrap_err());
        assert!(e.contains("--abort --force"), "{e}");
    }
}
