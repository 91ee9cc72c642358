//! `releases repair`: carries out what [`check`](super::check) planned, under the lock,
//! each step atomic, and reports what it did and what it could not. Nothing is deleted
//! that held information: a damaged history is kept beside the new one, a file a release
//! does not list is moved to `lost+found/`, and a release that cannot be restored stays
//! where it is, named.

use std::path::Path;

use anyhow::{Context, Result};

use super::atomic::{sync_dir, write_atomic};
use super::check::{self, Action, Report};
use super::{history, Registry, ACTIVE, HISTORY};

/// Where `repair` moves files that no release lists.
pub const LOST_AND_FOUND: &str = "lost+found";

pub struct Repaired {
    /// What was wrong and what was planned, before.
    pub before: Report,
    /// One line per action taken.
    pub done: Vec<String>,
    /// What is still wrong after (a fresh check): what repair could not fix.
    pub after: Report,
}

/// Repairs the registry; the caller holds the lock.
pub fn repair(reg: &Registry, now_ms: u64) -> Result<Repaired> {
    let before = check::check(reg, now_ms)?;
    let mut done = Vec::new();
    for action in &before.actions {
        done.push(apply(reg, action, now_ms)?);
    }
    let after = check::check(reg, now_ms)?;
    Ok(Repaired {
        before,
        done,
        after,
    })
}

fn apply(reg: &Registry, action: &Action, now_ms: u64) -> Result<String> {
    match action {
        Action::RemoveOrphan(rel) => {
            let path = reg.root.join(rel);
            if path.is_dir() {
                std::fs::remove_dir_all(&path)
            } else {
                std::fs::remove_file(&path)
            }
            .or_else(|e| {
                if e.kind() == std::io::ErrorKind::NotFound {
                    Ok(())
                } else {
                    Err(e)
                }
            })
            .with_context(|| format!("cannot remove {}", path.display()))?;
            sync_dir(path.parent().unwrap_or(&reg.root))?;
            Ok(format!("removed the orphan {rel}"))
        }
        Action::RestoreFile {
            release,
            name,
            from,
        } => {
            let bytes =
                std::fs::read(from).with_context(|| format!("cannot read {}", from.display()))?;
            let path = reg.release_dir(release).join(name);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)
                    .with_context(|| format!("cannot create {}", parent.display()))?;
            }
            write_atomic(&path, &bytes)?;
            Ok(format!(
                "restored {} of release {release} from {} (same SHA-256)",
                name,
                relative(&reg.root, from)
            ))
        }
        Action::MoveAside { release, name } => {
            let src = reg.release_dir(release).join(name);
            let dst = reg.root.join(LOST_AND_FOUND).join(release).join(name);
            if let Some(parent) = dst.parent() {
                std::fs::create_dir_all(parent)
                    .with_context(|| format!("cannot create {}", parent.display()))?;
            }
            std::fs::rename(&src, &dst)
                .with_context(|| format!("cannot move {} to {}", src.display(), dst.display()))?;
            if let Some(parent) = src.parent() {
                sync_dir(parent)?;
            }
            Ok(format!(
                "moved {name}, which release {release} does not list, to {}",
                relative(&reg.root, &dst)
            ))
        }
        Action::RewriteHistory {
            entries,
            keep_damaged,
        } => {
            let path = reg.root.join(HISTORY);
            let mut kept = String::new();
            if *keep_damaged {
                let old = std::fs::read(&path).unwrap_or_default();
                let copy = reg.root.join(format!("{HISTORY}.damaged-{now_ms}"));
                write_atomic(&copy, &old)?;
                kept = format!(
                    "; the damaged file is kept as {}",
                    relative(&reg.root, &copy)
                );
            }
            write_atomic(&path, history::render(entries).as_bytes())?;
            Ok(format!(
                "rewrote {HISTORY} with {} whole, linked entr(ies){kept}",
                entries.len()
            ))
        }
        Action::SetActive(id) => {
            write_atomic(&reg.root.join(ACTIVE), format!("{id}\n").as_bytes())?;
            Ok(format!("wrote {id} into {ACTIVE}"))
        }
    }
}

fn relative(root: &Path, p: &Path) -> String {
    p.strip_prefix(root).unwrap_or(p).display().to_string()
}
