//! Writing a release: its directory staged beside the others, every file and directory
//! `fsync`ed, then renamed into place (a release, once written, is never rewritten).

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{bail, Context, Result};

use super::atomic::{sync_dir, write_synced, TMP_MARK};
use super::{is_inner_path, step, Registry, Release, RELEASES};
use crate::dist;
use crate::release::record::{self, Record};

/// A release to write: its files (relative path → bytes, `release.json` excluded) and its
/// record (whose `files` is filled in here).
pub struct Staged {
    pub record: Record,
    pub files: BTreeMap<String, Vec<u8>>,
}

impl Registry {
    /// Writes `staged` as a new release directory. When a release with its ID is already
    /// there (same policy, catalog and edge), that one is kept as it is — releases are
    /// immutable — after checking it is intact; returns whether it existed.
    pub fn publish(&self, mut staged: Staged) -> Result<(Release, bool)> {
        let id = staged.record.id.clone();
        let dir = self.release_dir(&id);
        if dir.exists() {
            let existing = self.load(&id).with_context(|| {
                format!("release {id} is already in the registry but is not intact")
            })?;
            return Ok((existing, true));
        }
        staged.record.files = staged
            .files
            .iter()
            .map(|(name, bytes)| (name.clone(), dist::sha256_hex(bytes)))
            .collect();
        let releases = self.root.join(RELEASES);
        let tmp = releases.join(format!("{TMP_MARK}{id}-{}", std::process::id()));
        if tmp.exists() {
            std::fs::remove_dir_all(&tmp)
                .with_context(|| format!("cannot remove {}", tmp.display()))?;
        }
        let result = (|| -> Result<()> {
            let mut dirs = vec![tmp.clone()];
            std::fs::create_dir_all(&tmp)
                .with_context(|| format!("cannot create {}", tmp.display()))?;
            for (name, bytes) in &staged.files {
                if !is_inner_path(name) {
                    bail!("release file name `{name}` is not a plain relative path");
                }
                let path = tmp.join(name);
                if let Some(parent) = path.parent() {
                    if !parent.is_dir() {
                        std::fs::create_dir_all(parent)
                            .with_context(|| format!("cannot create {}", parent.display()))?;
                        dirs.push(parent.to_path_buf());
                    }
                }
                write_synced(&path, bytes)?;
                if name == crate::release::DEPLOY_SCRIPT {
                    make_executable(&path)?;
                }
                step("release file written");
            }
            write_synced(&tmp.join(record::FILE), staged.record.to_json().as_bytes())?;
            // Deepest first, so each directory's entry is durable in its parent.
            dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
            for d in &dirs {
                sync_dir(d)?;
            }
            step("release directory staged");
            std::fs::rename(&tmp, &dir)
                .with_context(|| format!("cannot move {} to {}", tmp.display(), dir.display()))?;
            sync_dir(&releases)?;
            step("release directory in place");
            Ok(())
        })();
        if let Err(e) = result {
            let _ = std::fs::remove_dir_all(&tmp);
            return Err(e);
        }
        Ok((
            Release {
                dir,
                record: staged.record,
            },
            false,
        ))
    }
}

#[cfg(unix)]
fn make_executable(path: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
        .with_context(|| format!("cannot make {} executable", path.display()))
}

#[cfg(not(unix))]
fn make_executable(_: &Path) -> Result<()> {
    Ok(())
}
