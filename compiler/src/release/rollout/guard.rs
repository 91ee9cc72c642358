//! [R-GUARD] One lock over everything that moves `ACTIVE` or the deployment: `releases
//! promote`, `rollback`, `rollout` (new, `--resume`, `--abort`), and `add`/`bake` with
//! `--promote`. It is the rollouts' own lock (`REGISTRY/rollouts/.lock`, ADR 008's lock):
//! a rollout's controller holds it for its whole run, so a promote or a rollback during a
//! rollout waits for it (`--wait`) or is refused with the holder named — instead of moving
//! `ACTIVE` under a split the controller will overwrite at 100%. The registry's own lock
//! stays short (one record at a time), so `releases add`, `upload` or `verify` still work
//! while a rollout runs.
//!
//! The lock says whether a controller is running; a record says whether a rollout has
//! ended. A rollout whose record has not ended while no controller holds the lock is
//! *stranded* (its controller killed): nothing but its own `--resume` or `--abort` moves the
//! deployment until it is resolved, and a damaged record counts as stranded.

use std::time::Duration;

use anyhow::{bail, Context as _, Result};

use super::record;
use crate::release::registry::lock::{self, Lock, LockOptions};
use crate::release::registry::Registry;

/// Takes the deployment lock for `command`, waiting at most `wait` for a holder; `long`
/// for a controller (held for hours by design, never called hung).
pub fn take(reg: &Registry, command: &str, wait: Option<Duration>, long: bool) -> Result<Lock> {
    let dir = reg.root.join(record::DIR);
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let lock = lock::acquire(
        &dir,
        &LockOptions {
            wait,
            command: command.into(),
            long,
        },
    )
    .with_context(|| {
        format!(
            "`understudy {command}` moves ACTIVE or the deployment, which another understudy \
             is doing (a rollout's controller holds this lock for its whole run)"
        )
    })?;
    for n in &lock.notices {
        eprintln!("note: {n}");
    }
    Ok(lock)
}

/// Who holds the deployment lock right now, if anyone (a running controller), without
/// taking it.
pub fn holder(reg: &Registry) -> Option<lock::Holder> {
    lock::probe(&reg.root.join(record::DIR))
}

/// Refuses `command` while a rollout has not ended (its record says so, or cannot be read):
/// `ACTIVE` and the deployment belong to that rollout until its `--resume` or `--abort`.
pub fn settled(reg: &Registry, command: &str) -> Result<()> {
    if let Some(r) =
        record::running(reg).with_context(|| format!("`understudy {command}` is refused"))?
    {
        bail!(
            "a rollout of {} (from {}) has not ended: {}; `understudy {command}` would move \
             what it is moving. Continue it with `understudy releases rollout {} --resume \
             --registry {}` or revert it with `--abort`, then run this again",
            r.new,
            r.old,
            r.summary(),
            r.new,
            reg.root.display()
        );
    }
    Ok(())
}
