//! [R-GRADUAL] [R-STATE] `understudy releases rollout`: the controller driven against a
//! [`Driver`] (the local front of `drill --rollout`, or Cloudflare), with its record written
//! to the registry after every command and before the next, under the registry's lock for the
//! whole rollout (one rollout at a time per service; a killed controller's lock is taken over
//! by the next writer, ADR 008).
//!
//! When the rollout is done the new release becomes `ACTIVE` (the history's action is
//! `rollout`) before the record says so; a rolled-back rollout leaves `ACTIVE` on the old
//! release, which never stopped being it.

use std::collections::VecDeque;
use std::io::Write;

use anyhow::{bail, Context as _, Result};
use understudy_core::Millis;

use super::record::{self, RolloutRecord};
use super::{Command, Controller, Evidence, Figures, Judgement, Phase, Slo};
use crate::release::registry::lock::{self, LockOptions};
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
    /// A new rollout of the release from `old` (`None`: the active release).
    New { old: Option<String>, slo: Slo },
    /// `--resume`: on from the record.
    Resume,
    /// `--abort`: the old version back at 100%.
    Abort,
}

/// Runs the rollout of release `new` to its end; returns its final record.
pub fn run(
    reg: &Registry,
    new: &str,
    start: Start,
    driver: &mut dyn Driver,
    clock: &mut dyn Clock,
    out: &mut dyn Write,
) -> Result<RolloutRecord> {
    // One controller at a time: the rollouts' own lock, held to the end (a killed
    // controller's is taken over by the next). The registry's lock is taken only around each
    // change, so the registry stays usable while a rollout runs for hours.
    let dir = reg.root.join(record::DIR);
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let _rollout_lock = lock::acquire(
        &dir,
        &LockOptions {
            wait: None,
            command: "releases rollout".into(),
            long: true,
        },
    )
    .context("another `understudy releases rollout` is running on this registry")?;
    let setup = reg.lock()?;
    let mut keep_earlier: Option<u64> = None;
    let new = reg.resolve(new)?;
    let new_release = reg.load(&new)?;
    let now = clock.now_ms();
    let (mut rec, mut ctrl, cmds) = match start {
        Start::New { old, slo } => {
            let problems = slo.problems();
            if !problems.is_empty() {
                return Err(crate::release::invalid(format!(
                    "the rollout's settings: {}",
                    problems.join("; ")
                )));
            }
            if let Some(r) = record::running(reg)? {
                bail!(
                    "a rollout of {} (from {}) is running: {}; continue it with `understudy \
                     releases rollout {} --resume` or revert it with `--abort`",
                    r.new,
                    r.old,
                    r.summary(),
                    r.new
                );
            }
            let old = match old {
                Some(o) => reg.resolve(&o)?,
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
                    "{old} is service {} and {new} is service {}: a rollout moves traffic \
                     between versions of one Worker",
                    old_release.record.service,
                    new_release.record.service
                );
            }
            // An earlier rollout of the same release is kept beside when this one is first
            // recorded, not overwritten.
            keep_earlier = record::read(reg, &new)?.map(|e| e.started_at_ms);
            let (ctrl, cmds) = Controller::start(slo.clone());
            let rec = RolloutRecord {
                format: record::FORMAT,
                service: new_release.record.service.clone(),
                old,
                new: new.clone(),
                driver: driver.name(),
                slo,
                state: ctrl.state().clone(),
                started_at_ms: now,
                updated_at_ms: now,
            };
            (rec, ctrl, cmds)
        }
        Start::Resume | Start::Abort => {
            let rec = record::read(reg, &new)?.with_context(|| {
                format!(
                    "{new} has no rollout to continue or abort (see `understudy releases status`)"
                )
            })?;
            if rec.finished() {
                bail!("the rollout of {new} has ended: {}", rec.summary());
            }
            let kind = |d: &str| d.split_whitespace().next().unwrap_or("").to_string();
            if kind(&rec.driver) != kind(&driver.name()) {
                bail!(
                    "the rollout of {new} was started with the {} driver ({}); continue it with \
                     the same one (the local front's --front URL, or Cloudflare's without it)",
                    kind(&rec.driver),
                    rec.driver
                );
            }
            let (mut ctrl, mut cmds) = Controller::resume(rec.slo.clone(), rec.state.clone());
            if matches!(start, Start::Abort) {
                cmds = ctrl.abort();
            }
            (rec, ctrl, cmds)
        }
    };
    drop(setup);
    driver.check(&rec.old, &rec.new)?;
    let _ = writeln!(
        out,
        "rollout of {} from {} ({}), steps {:?}%: {}",
        rec.new,
        rec.old,
        driver.name(),
        rec.slo.steps,
        rec.summary()
    );
    let mut pending: VecDeque<Command> = cmds.into();
    let mut failures = 0u32;
    loop {
        while let Some(cmd) = pending.pop_front() {
            let now = clock.now_ms();
            match cmd {
                Command::Record(state) => {
                    let _lock = reg.lock()?;
                    if let Some(at) = keep_earlier.take() {
                        let kept = reg
                            .root
                            .join(record::DIR)
                            .join(format!("{}.{at}.json", rec.new));
                        std::fs::rename(record::path(reg, &rec.new), &kept)
                            .with_context(|| format!("cannot keep {}", kept.display()))?;
                    }
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
                        "{}: deployed {}@{}% {}@{new_percent}%",
                        since(rec.started_at_ms, now),
                        rec.old,
                        100 - u32::from(new_percent),
                        rec.new
                    );
                    pending.extend(ctrl.deployed(Millis(now)));
                }
                Command::Query { from, to } => match driver.figures(from, to) {
                    Ok((old, new)) => {
                        failures = 0;
                        let ev = Evidence { from, to, old, new };
                        pending.extend(ctrl.evidence(Millis(now), ev));
                        if let Some(l) = ctrl.state().log.last() {
                            show(out, rec.started_at_ms, l);
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
                            "{}: figures unavailable ({e:#}); asking again",
                            since(rec.started_at_ms, now)
                        );
                    }
                },
            }
        }
        if ctrl.finished() {
            break;
        }
        clock.sleep_ms(tick_ms(&rec.slo));
        pending.extend(ctrl.tick(Millis(clock.now_ms())));
    }
    let _ = writeln!(out, "rollout of {}: {}", rec.new, rec.summary());
    Ok(rec)
}

/// Failed figure queries in a row before the rollout stops (exit 2, resumable).
const MAX_QUERY_FAILURES: u32 = 5;

/// How often the controller looks at the clock: a tenth of the dwell, 50 ms to 5 s.
fn tick_ms(slo: &Slo) -> u64 {
    (slo.dwell_ms / 10).clamp(50, 5_000)
}

fn since(start: u64, now: u64) -> String {
    format!("+{:.1}s", now.saturating_sub(start) as f64 / 1000.0)
}

fn show(out: &mut dyn Write, start: u64, l: &super::Logged) {
    let (word, reasons) = match &l.judgement {
        Judgement::Advance { reasons } => ("advance", reasons),
        Judgement::Hold { reasons } => ("hold", reasons),
        Judgement::RollBack { reasons } => ("roll back", reasons),
    };
    let _ = writeln!(
        out,
        "{}: at {}%: {word} (window {:.1} s: old {} answers, new {})",
        since(start, l.at),
        l.step,
        l.evidence.to.saturating_sub(l.evidence.from) as f64 / 1000.0,
        l.evidence.old.answers,
        l.evidence.new.answers
    );
    for r in reasons {
        let _ = writeln!(out, "    {r}");
    }
}
