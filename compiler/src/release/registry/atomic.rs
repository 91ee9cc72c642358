//! Durable, all-or-nothing writes: what a reader (or the next run after a crash) finds is
//! either the old content or the new, never a mix or a torn file.
//!
//! Why each step: `rename` replaces a name atomically, but without `fsync` the new file's
//! *data* may not be on disk when the rename is, so a power cut can leave the new name on
//! an empty file; and the rename itself lives in the directory, which needs its own
//! `fsync` to survive. So: write a temporary sibling, `fsync` it, rename it over the
//! target, `fsync` the directory. Temporary names carry [`TMP_MARK`], so a run that finds
//! one under the registry's lock knows it is an orphan of a killed writer.

use std::io::Write as _;
use std::path::Path;

use anyhow::{Context, Result};

/// Every temporary name in a registry contains this.
pub const TMP_MARK: &str = ".tmp-";

/// Whether `name` (a file or directory name) is one of our temporary names.
pub fn is_temporary(name: &str) -> bool {
    name.starts_with('.') && name.contains(TMP_MARK)
}

/// `fsync` of a directory, so the names created, renamed or removed in it are durable.
pub fn sync_dir(dir: &Path) -> Result<()> {
    #[cfg(unix)]
    {
        let f = std::fs::File::open(dir)
            .with_context(|| format!("cannot open the directory {}", dir.display()))?;
        f.sync_all()
            .with_context(|| format!("cannot sync the directory {}", dir.display()))?;
    }
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}

/// Writes `bytes` to `path` and `fsync`s it (a new file in a directory being staged).
pub fn write_synced(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut f =
        std::fs::File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    f.write_all(bytes)
        .and_then(|()| f.sync_all())
        .with_context(|| format!("cannot write {}", path.display()))
}

/// Replaces `path` with `bytes`: temporary sibling, `fsync`, rename, directory `fsync`.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}{TMP_MARK}{}", std::process::id()));
    let result = write_synced(&tmp, bytes)
        .and_then(|()| {
            crate::release::registry::step("temporary file written");
            std::fs::rename(&tmp, path)
                .with_context(|| format!("cannot move {} to {}", tmp.display(), path.display()))
        })
        .and_then(|()| sync_dir(dir));
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_the_file_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("ACTIVE");
        write_atomic(&p, b"one\n").unwrap();
        write_atomic(&p, b"two\n").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two\n");
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, vec!["ACTIVE"]);
    }

    #[test]
    fn temporary_names_are_recognised() {
        assert!(is_temporary(".ACTIVE.tmp-123"));
        assert!(is_temporary(".tmp-r-0123456789ab-77"));
        assert!(!is_temporary("ACTIVE"));
        assert!(!is_temporary("history.jsonl"));
        assert!(!is_temporary("r-0123456789ab"));
    }
}
