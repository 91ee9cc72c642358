//! [R-GRADUAL] [R-STATE] [R-GUARD] `understudy releases rollout`: the controller driven
//! against a [`Driver`] (the local front of `drill --rollout`, or Cloudflare), with its record
//! written to the registry after every command and before the next. The deployment lock
//! ([`guard`], ADR 008's `flock`) is held for the whole run: one rollout at a time. A killed
//! controller's lock is released by the kernel, but its rollout is left *stranded* (its record
//! not ended), and until its own `--resume` or `--abort` resolves it nothing else moves the
//! deployment ([`guard::settled`]; a new rollout over it only with `--force`, [`preflight`]).
//! `--resume` and `--abort` first read the deployment serving now and refuse to deploy over
//! one that is not the rollout's. The registry's own lock ([`Registry::lock`]) is taken only
//! around each write (the record, `ACTIVE` at the end), so `releases add`, `upload` or
//! `verify` run while a rollout does.
//!
//! When the rollout is done the new release becomes `ACTIVE` (the history's action is
//! `rollout`) before the record says so; a rolled-back rollout leaves `ACTIVE` on the old
//! release, which never stopped being it.

use std::collections::VecDeque;
use std::io::Write;

use anyhow::{bail, Context as _, Result};
use understudy_core::Millis;

use super::preflight::{self, Ask};
use super::record::{self, RolloutRecord};
use super::{guard, progress, Command, Controller, Evidence, Figures, Phase, Slo};
use crate::release::registry::Registry;

/// What deploys the versions and measures them.
pub trait Driver {
    /// How the record names it (`local http://…`, `cloudflare`).
    fn name(&self) -> String;
    /// Checks the driver serves these two releases as the old and the new version.
    fn check(&mut self, old: &str, new: &str) -> Result<()>;
    /// Deploys the new version at `new_percent`, the old at the rest.
    fn deploy(&mut self, new_percent: u8) -> Result<()>;
    /// Both versions' figures over `[from, to)` (ms since the epoch): (old, new).
    fn figures(&mut self, from: u64, to: u64) -> Result<(Figures, Figures)>;
    /// The deployment serving now: each version as its release ID (its version ID when it
    /// is neither of the rollout's) with its percentage.
    fn current(&mut self) -> Result<Vec<(String, u8)>>;
}

/// Time, so the tests can run a rollout in no time.
pub trait Clock {
    fn now_ms(&mut self) -> u64;
    fn sleep_ms(&mut self, ms: u64);
}

/// The wall clock.
pub struct Wall;

impl Clock for Wall {
    fn now_ms(&mut self) -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0)
    }
    fn sleep_ms(&mut self, ms: u64) {
        std::thread::sleep(std::time::Duration::from_millis(ms));
    }
}

pub enum Start {
    /// A new rollout of the release from `old` (`None`: the active release); `force` starts
    /// it over a stranded or damaged record (kept aside).
    New {
        old: Option<String>,
        slo: Slo,
        force: bool,
        /// The replay pre-flight's evidence, recorded with the rollout (`--replay`).
        replay: Option<super::replay::ReplayCheck>,
    },
    /// `--resume`: on from the record.
    Resume,
    /// `--abort`: the old version back at 100%. With `force`, a damaged record is replaced
    /// by one rebuilt from the active release and `slo`; and when the deployment serving now
    /// is not the rollout's, the rollout is recorded as aborted without deploying anything.
    Abort { force: bool, slo: Slo },
}

/// Runs the rollout of release `new` to its end; returns its final record. The deployment
/// lock is waited for as the registry's lock options say (`--wait`).
pub fn run(
    reg: &Registry,
    new: &str,
    start: Start,
    driver: &mut dyn Driver,
    clock: &mut dyn Clock,
    out: &mut dyn Write,
) -> Result<RolloutRecord> {
    let _deployment = guard::take(reg, "releases rollout", reg.lock_options.wait, true)?;
    let now = clock.now_ms();
    let (mut rec, mut ctrl, cmds) = match start {
        Start::New {
            old,
            slo,
            force,
            replay,
        } => {
            let plan = preflight::new_rollout(
                reg,
                &Ask {
                    new,
                    old: old.as_deref(),
                    slo: &slo,
                    force,
                    named: &preflight::policy_key,
                },
            )?;
            for kept in preflight::keep_aside(reg, &plan.superseded, now)? {
                let _ = writeln!(
                    out,
                    "kept the record of a rollout that never ended as {kept}"
                );
            }
            record::keep_earlier(reg, &plan.new)?;
            let (ctrl, cmds) = Controller::start(slo.clone());
            let rec = RolloutRecord {
                format: record::FORMAT,
                service: plan.service,
                old: plan.old,
                new: plan.new,
                driver: driver.name(),
                slo,
                state: ctrl.state().clone(),
                started_at_ms: now,
                updated_at_ms: now,
                replay,
            };
            (rec, ctrl, cmds)
        }
        Start::Resume => {
            let new = reg.resolve(new)?;
            let rec = recorded(reg, &new)?;
            same_driver(&rec, driver)?;
            ours(&rec, driver, false)?;
            let (ctrl, cmds) = Controller::resume(rec.slo.clone(), rec.state.clone());
            (rec, ctrl, cmds)
        }
        Start::Abort { force, slo } => {
            let new = reg.resolve(new)?;
            let rec = match record::read(reg, &new) {
                Ok(_) => recorded(reg, &new)?,
                Err(e) if force => rebuilt(reg, &new, &slo, driver, now, &e, out)?,
                Err(e) => bail!(
                    "{}",
                    record::Damaged {
                        id: new.clone(),
                        error: format!("{e:#}")
                    }
                    .way_out(reg)
                ),
            };
            same_driver(&rec, driver)?;
            let active = reg.active()?;
            if active.as_deref() != Some(rec.old.as_str()) && !force {
                bail!(
                    "ACTIVE names {}, not {} which this rollout started from: the registry moved \
                     on since, and --abort would deploy {} at 100% while ACTIVE names another \
                     release. Nothing was deployed. To record this rollout as aborted and leave \
                     the deployment as it is, run `understudy releases rollout {} --abort --force`",
                    active.as_deref().unwrap_or("nothing"),
                    rec.old,
                    rec.old,
                    rec.new
                );
            }
            let (mut ctrl, _) = Controller::resume(rec.slo.clone(), rec.state.clone());
            let cmds = if ours(&rec, driver, force)? {
                ctrl.abort()
            } else {
                let _ = writeln!(
                    out,
                    "the deployment serving now is not this rollout's: nothing is deployed, the \
                     rollout is recorded as aborted"
                );
                ctrl.close_aborted()
            };
            (rec, ctrl, cmds)
        }
    };
    driver.check(&rec.old, &rec.new)?;
    let _ = writeln!(
        out,
        "{}  rollout of {} from {} ({}), steps {:?}%, dwell {}, at least {} answers each, at \
         most {} holds: {}",
        crate::release::record::rfc3339(now),
        rec.new,
        rec.old,
        driver.name(),
        rec.slo.steps,
        progress::span(rec.slo.dwell_ms),
        rec.slo.min_answers,
        rec.slo.max_holds,
        rec.summary()
    );
    let mut pending: VecDeque<Command> = cmds.into();
    let mut failures = 0u32;
    let mut spoke = now;
    loop {
        while let Some(cmd) = pending.pop_front() {
            let now = clock.now_ms();
            match cmd {
                Command::Record(state) => {
                    let _lock = reg.lock()?;
                    if state.phase == Phase::Done && reg.active()?.as_deref() != Some(&rec.new) {
                        let note = format!("rolled out from {}", rec.old);
                        reg.set_active(&rec.new, "rollout", &note, now)?;
                    }
                    rec.state = state;
                    rec.updated_at_ms = now;
                    record::write(reg, &rec)?;
                }
                Command::Deploy { new_percent } => {
                    driver.deploy(new_percent).with_context(|| {
                        format!(
                            "deploying {}@{}% {}@{new_percent}% failed; the rollout is recorded \
                             — continue it with `understudy releases rollout {} --resume`",
                            rec.old,
                            100 - u32::from(new_percent),
                            rec.new,
                            rec.new
                        )
                    })?;
                    let _ = writeln!(
                        out,
                        "{}  {}: deployed {}@{}% {}@{new_percent}%",
                        progress::clock(now),
                        match rec.state.phase {
                            Phase::RollingBack => "rolling back".to_string(),
                            Phase::Aborting => "aborting".to_string(),
                            _ => progress::step(&rec),
                        },
                        rec.old,
                        100 - u32::from(new_percent),
                        rec.new
                    );
                    spoke = now;
                    pending.extend(ctrl.deployed(Millis(now)));
                }
                Command::Query { from, to } => match driver.figures(from, to) {
                    Ok((old, new)) => {
                        failures = 0;
                        let ev = Evidence { from, to, old, new };
                        pending.extend(ctrl.evidence(Millis(now), ev));
                        if let Some(l) = ctrl.state().log.last() {
                            let _ =
                                writeln!(out, "{}", progress::judgement(l, rec.slo.min_answers));
                            for r in progress::verdict(&l.judgement).1 {
                                let _ = writeln!(out, "    {r}");
                            }
                            spoke = now;
                        }
                    }
                    Err(e) => {
                        // No evidence, no judgement: ask again at the next tick — a few
                        // times; then stop, the record kept, rather than stay half-deployed
                        // on evidence that never comes.
                        failures += 1;
                        if failures >= MAX_QUERY_FAILURES {
                            bail!(
                                "the figures could not be read {failures} times in a row (last: \
                                 {e:#}); the rollout is recorded ({}) — fix it and continue with \
                                 `understudy releases rollout {} --resume`, or revert with --abort",
                                rec.summary(),
                                rec.new
                            );
                        }
                        let _ = writeln!(
                            out,
                            "{}  figures unavailable ({e:#}); asking again",
                            progress::clock(now)
                        );
                    }
                },
            }
        }
        if ctrl.finished() {
            break;
        }
        // Sleep a tick, or less when the heartbeat or the judgement falls due sooner: a
        // tick that does not divide the heartbeat's period would let the rollout stay silent
        // past it, and one shortened for the heartbeat would judge up to a tick late. A
        // judgement already due (its figures not read yet) is asked again a tick later.
        let now = clock.now_ms();
        let until_beat = progress::HEARTBEAT_MS
            .saturating_sub(now.saturating_sub(spoke))
            .max(1);
        let until_due = match (ctrl.state().phase, ctrl.state().due) {
            (Phase::Watching, Some(due)) if due > now => due - now,
            _ => u64::MAX,
        };
        clock.sleep_ms(tick_ms(&rec.slo).min(until_beat).min(until_due));
        let now = clock.now_ms();
        if now.saturating_sub(spoke) >= progress::HEARTBEAT_MS {
            let figures = match (rec.state.phase, rec.state.since) {
                (Phase::Watching, Some(since)) => driver.figures(since, now).ok(),
                _ => None,
            };
            let answers = figures
                .as_ref()
                .map_or(progress::Answers::Unavailable, progress::Answers::Read);
            let _ = writeln!(out, "{}", progress::heartbeat(&rec, now, answers));
            spoke = now;
        }
        pending.extend(ctrl.tick(Millis(now)));
    }
    for line in progress::summary(&rec, clock.now_ms()) {
        let _ = writeln!(out, "{line}");
    }
    Ok(rec)
}

/// The record of a rollout that has not ended.
fn recorded(reg: &Registry, new: &str) -> Result<RolloutRecord> {
    let rec = record::read(reg, new)
        .map_err(|e| {
            anyhow::anyhow!(
                "{}",
                record::Damaged {
                    id: new.to_string(),
                    error: format!("{e:#}")
                }
                .way_out(reg)
            )
        })?
        .with_context(|| {
            format!("{new} has no rollout to continue or abort (see `understudy releases status`)")
        })?;
    if rec.finished() {
        bail!("the rollout of {new} has ended: {}", rec.summary());
    }
    Ok(rec)
}

fn same_driver(rec: &RolloutRecord, driver: &dyn Driver) -> Result<()> {
    let kind = |d: &str| d.split_whitespace().next().unwrap_or("").to_string();
    if kind(&rec.driver) != kind(&driver.name()) {
        bail!(
            "the rollout of {} was started with the {} driver ({}); continue it with the same one \
             (the local front's --front URL, or Cloudflare's without it)",
            rec.new,
            kind(&rec.driver),
            rec.driver
        );
    }
    Ok(())
}

/// Whether the deployment serving now is the rollout's (only its two versions). When it is
/// not, a deployment newer than the record replaced it: refused unless `force`.
fn ours(rec: &RolloutRecord, driver: &mut dyn Driver, force: bool) -> Result<bool> {
    let now = driver.current().context(
        "the deployment serving now could not be read; nothing is deployed over a deployment \
         that was not seen",
    )?;
    if now.iter().all(|(r, _)| *r == rec.old || *r == rec.new) {
        return Ok(true);
    }
    if force {
        return Ok(false);
    }
    let shown: Vec<String> = now.iter().map(|(r, p)| format!("{r}@{p}%")).collect();
    bail!(
        "the deployment serving now is {}, not this rollout's split of {} and {}: a newer \
         deployment replaced it, and deploying {} over it would undo that. Nothing was \
         deployed. To record this rollout as aborted and leave the deployment as it is, run \
         `understudy releases rollout {} --abort --force`",
        shown.join(" "),
        rec.old,
        rec.new,
        rec.old,
        rec.new
    );
}

/// `--abort --force` of a damaged record: a record rebuilt from the active release (the one
/// a rollout starts from, which it does not move until done), the damaged file kept aside.
fn rebuilt(
    reg: &Registry,
    new: &str,
    slo: &Slo,
    driver: &dyn Driver,
    now: u64,
    e: &anyhow::Error,
    out: &mut dyn Write,
) -> Result<RolloutRecord> {
    let old = reg
        .active()?
        .with_context(|| format!("{} has no active release to abort to", reg.root.display()))?;
    let service = reg.load(new)?.record.service.clone();
    let (ctrl, _) = Controller::start(slo.clone());
    let damaged = record::path(reg, new);
    let kept = reg
        .root
        .join(record::DIR)
        .join(format!("{new}.damaged-{now}.json"));
    {
        let _lock = reg.lock()?;
        std::fs::rename(&damaged, &kept)
            .with_context(|| format!("cannot keep {} aside", damaged.display()))?;
    }
    let _ = writeln!(
        out,
        "{} was damaged ({e:#}); kept as {}, and the rollout rebuilt from {old}, the active release",
        damaged.display(),
        kept.display()
    );
    Ok(RolloutRecord {
        format: record::FORMAT,
        service,
        old,
        new: new.to_string(),
        driver: driver.name(),
        slo: slo.clone(),
        state: ctrl.state().clone(),
        started_at_ms: now,
        updated_at_ms: now,
        replay: None,
    })
}

/// Failed figure queries in a row before the rollout stops (exit 2, resumable).
const MAX_QUERY_FAILURES: u32 = 5;

/// How often the controller looks at the clock: a tenth of the dwell, 50 ms to 5 s.
fn tick_ms(slo: &Slo) -> u64 {
    (slo.dwell_ms / 10).clamp(50, 5_000)
}
