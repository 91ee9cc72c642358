//! Publish, promote, roll back: the rules that keep `ACTIVE` pointing at a release that is
//! intact and whose stubs are validated. Each operation checks everything first and moves
//! `ACTIVE` last, so a refusal leaves the active release as it was.

use std::path::Path;

use anyhow::{bail, Context, Result};
use understudy_core::Millis;

use super::freshness::Freshness;
use super::pipeline::{self, PolicySource, Request};
use super::record::{self, Kind};
use super::registry::{Registry, Release};
use super::rollout::guard;
use super::{invalid, Invalid};
use crate::validate::CatalogFiles;

pub struct Published {
    pub release: Release,
    /// The registry already held this release (same policy, catalog and edge): kept as is.
    pub existed: bool,
    pub promoted: bool,
}

/// Writes `baked` into the registry (under its lock) and, with `promote`, makes it active.
pub fn publish(
    reg: &Registry,
    baked: &pipeline::Baked,
    kind: Kind,
    parent: Option<&str>,
    note: &str,
    now: Millis,
    promote: bool,
) -> Result<Published> {
    // Moving ACTIVE: the deployment lock first (a rollout's controller holds it), then the
    // registry's, in the order every command takes them.
    let _deployment = match promote {
        true => Some(moving_active(reg)?),
        false => None,
    };
    let _lock = reg.lock()?;
    let staged = pipeline::stage(baked, kind, parent, note, now.0)?;
    let (release, existed) = reg.publish(staged)?;
    if promote {
        check_fresh(&release, now, false)?;
        if reg.active()?.as_deref() != Some(release.id()) {
            reg.set_active(release.id(), kind.as_str(), note, now.0)?;
        }
    }
    Ok(Published {
        release,
        existed,
        promoted: promote,
    })
}

/// The deployment lock for a command that moves `ACTIVE` (waiting as `--wait` says), and
/// no rollout left unended: ACTIVE belongs to a rollout until it ends (`rollout::guard`).
fn moving_active(reg: &Registry) -> Result<super::registry::lock::Lock> {
    let command = reg.lock_options.command.clone();
    let lock = guard::take(reg, &command, reg.lock_options.wait, false)?;
    guard::settled(reg, &command)?;
    Ok(lock)
}

/// Refuses (as [`Invalid`]) a release whose catalog snapshot is past its policy's ceiling,
/// unless forced.
fn check_fresh(release: &Release, now: Millis, force: bool) -> Result<()> {
    let Some(f) = Freshness::of(&release.record, now) else {
        return Ok(());
    };
    if f.stale() && !force {
        let c = release.record.catalog.as_ref();
        return Err(invalid(format!(
            "release {}: its catalog (inventory snapshot {}) is {}: its stubs no longer count \
             as validated. Re-bake a fresh snapshot into it (`understudy bake --from {} \
             --catalog FILE --inventory FILE --registry REGISTRY`), or pass --force to activate \
             it anyway (the edge then applies the policy's on_expired = {})",
            release.id(),
            c.map_or("?", |c| c.snapshot_at.as_str()),
            f.describe(),
            release.id(),
            c.map_or("?", |c| c.on_expired.as_str()),
        )));
    }
    Ok(())
}

/// Checks that the module's bake belongs to this release.
fn check_bake(release: &Release) -> Result<()> {
    let bake = release.bake()?;
    if bake.release_id != release.id() {
        bail!(
            "release {}: its module carries the bake of release {} (tampered)",
            release.id(),
            bake.release_id
        );
    }
    Ok(())
}

/// `releases promote ID`.
pub fn promote(reg: &Registry, id: &str, now: Millis, force: bool) -> Result<Release> {
    let _deployment = moving_active(reg)?;
    let _lock = reg.lock()?;
    let id = reg.resolve(id)?;
    let release = reg.load(&id)?;
    check_bake(&release)?;
    check_fresh(&release, now, force)?;
    reg.set_active(&id, "promote", &release.record.note, now.0)?;
    Ok(release)
}

pub struct RollbackArgs<'a> {
    pub to: Option<&'a str>,
    /// Roll back to the target exactly as it was, its own (older) catalog included.
    pub with_its_catalog: bool,
    pub force: bool,
    pub now: Millis,
    pub budget: super::size::Budget,
}

pub struct RolledBack {
    pub from: String,
    pub target: String,
    pub release: Release,
    pub existed: bool,
    /// Whether the target's policy was re-paired with the current catalog.
    pub repaired: bool,
    pub warnings: String,
    /// The deployment lock, still held: the caller's deployment of the release rolled back
    /// to (`--deploy`) happens under it.
    pub deployment: super::registry::lock::Lock,
}

/// The release to roll back to when none is named: the most recently active release whose
/// policy differs from the current one's (so the nightly re-bakes of the current policy are
/// skipped).
fn previous_policy(reg: &Registry, current: &Release) -> Result<String> {
    let history = reg.history()?;
    for a in history.iter().rev() {
        for id in [Some(&a.release), a.from.as_ref()].into_iter().flatten() {
            if id == current.id() || !reg.release_dir(id).is_dir() {
                continue;
            }
            let r = reg.load(id).with_context(|| {
                format!(
                    "while looking for the release to roll back to ({})",
                    reg.root.join(super::registry::HISTORY).display()
                )
            })?;
            if r.record.policy.sha256 != current.record.policy.sha256 {
                return Ok(id.clone());
            }
        }
    }
    bail!(
        "nothing to roll back to: no earlier active release in {} has a policy other than the \
         current one ({}); name one with --to ID (see `understudy releases list`)",
        reg.root.display(),
        current.record.policy.version
    )
}

/// `releases rollback [--to ID] [--with-its-catalog] [--force]`.
pub fn rollback(reg: &Registry, args: &RollbackArgs<'_>) -> Result<RolledBack> {
    let deployment = moving_active(reg)?;
    let lock = reg.lock()?;
    let current_id = reg.active()?.with_context(|| {
        format!(
            "the registry {} has no active release to roll back from; use `releases promote ID`",
            reg.root.display()
        )
    })?;
    let current = reg
        .load(&current_id)
        .with_context(|| format!("the active release {current_id} is not intact"))?;
    let target_id = match args.to {
        Some(to) => reg.resolve(to)?,
        None => previous_policy(reg, &current)?,
    };
    if target_id == current_id {
        bail!("release {target_id} is already the active release; nothing to roll back");
    }
    let target = reg.load(&target_id)?;
    check_bake(&target)?;
    let target_bake = target.bake()?;
    let now = args.now;

    let current_catalog = current
        .record
        .catalog
        .as_ref()
        .zip(current.record.sources.catalog.as_ref())
        .zip(current.record.sources.inventory.as_ref());
    let repair = !args.with_its_catalog && target_bake.policy.catalog.is_some();
    let Some(((cur_cat, cat_rel), inv_rel)) = current_catalog.filter(|_| repair) else {
        // As it was: the target with its own catalog (or a policy without one).
        check_fresh(&target, now, args.force)?;
        let note = format!("rolled back from {current_id} to {target_id} as it was");
        reg.set_active(&target_id, "rollback", &note, now.0)?;
        drop(lock);
        return Ok(RolledBack {
            from: current_id,
            target: target_id.clone(),
            release: target,
            existed: true,
            repaired: false,
            warnings: String::new(),
            deployment,
        });
    };

    // Re-pair: the target's policy and edge, the current catalog, validated now.
    let max_age = target_bake
        .policy
        .catalog
        .as_ref()
        .map_or(u64::MAX, |c| c.max_age_ms);
    let age = now.since(Millis(cur_cat.snapshot_at_ms));
    let mut validate_at = now;
    if age > max_age {
        if !args.force {
            return Err(invalid(format!(
                "refusing to roll back to {target_id}: the current catalog (release {current_id}, \
                 inventory snapshot {}) is {}, past the {} ceiling of {target_id}'s policy, so the \
                 rolled-back release would serve stubs that are no longer validated. Re-bake a \
                 fresh snapshot first (`understudy bake`), or pass --force (the edge then applies \
                 on_expired)",
                cur_cat.snapshot_at,
                super::freshness::age(age) + " old",
                understudy_core::time::format_duration(max_age)
            )));
        }
        // Forced: validate as of the snapshot, so the bake records its true age and the
        // edge applies the policy's on_expired.
        validate_at = Millis(cur_cat.snapshot_at_ms);
    }
    let policy_path = target.source_path(&target.record.sources.policy);
    let text = std::fs::read_to_string(&policy_path)
        .with_context(|| format!("cannot read {}", policy_path.display()))?;
    let stubs = current.source_path(cat_rel);
    let inventory = current.source_path(inv_rel);
    let edge = target.edge()?;
    let baked = pipeline::bake(&Request {
        policy: PolicySource::Text {
            path: policy_path.clone(),
            text,
        },
        catalog: Some(CatalogFiles {
            stubs: &stubs,
            inventory: &inventory,
        }),
        edge: &edge,
        now: validate_at,
        budget: args.budget,
        publish: &[],
    })
    .map_err(|e| match e.downcast::<Invalid>() {
        Ok(inv) => anyhow::Error::new(Invalid {
            message: format!(
                "refusing to roll back to {target_id}: its policy does not accept the current \
                 catalog of {current_id} ({})",
                inv.message
            ),
            rendered: inv.rendered,
        }),
        Err(e) => e,
    })?;
    let note = format!(
        "rollback: policy of {target_id} ({}) with the catalog of {current_id}",
        target.record.policy.version
    );
    let staged = pipeline::stage(&baked, Kind::Rollback, Some(&current_id), &note, now.0)?;
    let (release, existed) = reg.publish(staged)?;
    if release.id() == current_id {
        bail!("rolling back to {target_id} gives the active release {current_id} again");
    }
    reg.set_active(release.id(), "rollback", &note, now.0)?;
    drop(lock);
    Ok(RolledBack {
        from: current_id,
        target: target_id,
        release,
        existed,
        repaired: true,
        warnings: baked.warnings,
        deployment,
    })
}

/// A release as a plain dist directory (or a release directory) given by path: its bake
/// and, when it is a release, its policy source.
pub struct FromDir {
    pub policy: PolicySource,
    pub edge: crate::dist::edge::Edge,
    /// The release ID when `dir` is a release directory of a registry.
    pub release: Option<String>,
}

/// Reads a built directory (`understudy build` output, or a release directory).
pub fn from_dir(dir: &Path) -> Result<FromDir> {
    use crate::dist::edge::{GLUE_JS, MODULE};
    let module_path = dir.join(MODULE);
    let glue_path = dir.join(GLUE_JS);
    if !module_path.is_file() || !glue_path.is_file() {
        bail!(
            "--from {}: not a built directory (expected {MODULE} and {GLUE_JS}, as `understudy \
             build` writes them)",
            dir.display()
        );
    }
    let module = std::fs::read(&module_path)
        .with_context(|| format!("cannot read {}", module_path.display()))?;
    let glue_js = std::fs::read(&glue_path)
        .with_context(|| format!("cannot read {}", glue_path.display()))?;
    let bake = super::registry::decode_module_bake(&module, &module_path)?;
    let rec_path = dir.join(record::FILE);
    let (policy, release) = if rec_path.is_file() {
        // A release directory: verify it and use its policy source.
        let id = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let root = dir
            .parent()
            .and_then(Path::parent)
            .context("a release directory lies in REGISTRY/releases/")?;
        let reg = Registry::open(root)?;
        let rel = reg.load(&id)?;
        let path = rel.source_path(&rel.record.sources.policy);
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        (PolicySource::Text { path, text }, Some(id))
    } else {
        let file = serde_json::from_slice::<serde_json::Value>(
            &std::fs::read(dir.join(crate::dist::MANIFEST)).unwrap_or_default(),
        )
        .ok()
        .and_then(|m| m["policy"]["file"].as_str().map(str::to_string))
        .unwrap_or_else(|| "policy.toml".to_string());
        (
            PolicySource::Baked {
                policy: Box::new(bake.policy),
                policy_hash: bake.policy_hash,
                file,
            },
            None,
        )
    };
    Ok(FromDir {
        policy,
        edge: crate::dist::edge::Edge {
            dir: dir.to_path_buf(),
            glue_js,
            module,
        },
        release,
    })
}
