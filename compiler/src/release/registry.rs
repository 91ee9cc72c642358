//! The registry directory: immutable release directories, the `ACTIVE` pointer and the
//! activation history (layout in docs/releases.md).
//!
//! Every write is atomic: a release is written into a temporary sibling directory and
//! renamed into place; `ACTIVE` and `history.jsonl` are replaced through a temporary file
//! and a rename. Nothing is ever rewritten in a release directory, and every read checks
//! the files against `release.json` first, so a tampered release is refused by name.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Component, Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use serde::{Deserialize, Serialize};
use understudy_core::bake::{self, Bake, SECTION_NAME};

use super::record::{self, is_release_id, Record};
use crate::dist::{self, edge::Edge, wasm};

pub const RELEASES: &str = "releases";
pub const ACTIVE: &str = "ACTIVE";
pub const HISTORY: &str = "history.jsonl";
pub const LOCK: &str = ".lock";
/// wrangler's working directory inside a deployed directory: not part of the release.
pub const WRANGLER_STATE: &str = ".wrangler";

pub struct Registry {
    pub root: PathBuf,
}

/// One verified release.
pub struct Release {
    pub dir: PathBuf,
    pub record: Record,
}

/// One line of `history.jsonl`: a change of the active release.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Activation {
    pub action: String,
    pub at: String,
    pub at_ms: u64,
    /// The release that was active before (none for the first).
    pub from: Option<String>,
    pub note: String,
    pub release: String,
}

/// Held while a command changes the registry; removed on drop.
pub struct Lock {
    path: PathBuf,
}

impl Drop for Lock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// A release to write: its files (relative path → bytes, `release.json` excluded) and its
/// record (whose `files` is filled in here).
pub struct Staged {
    pub record: Record,
    pub files: BTreeMap<String, Vec<u8>>,
}

/// Whether `rel` is a plain relative path inside a directory (no `..`, not absolute).
pub fn is_inner_path(rel: &str) -> bool {
    let p = Path::new(rel);
    !rel.is_empty() && p.components().all(|c| matches!(c, Component::Normal(_)))
}

/// Writes `bytes` to `path` through a temporary file in the same directory and a rename.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let result = (|| -> Result<()> {
        let mut f = std::fs::File::create(&tmp)
            .with_context(|| format!("cannot create {}", tmp.display()))?;
        f.write_all(bytes)
            .and_then(|()| f.sync_all())
            .with_context(|| format!("cannot write {}", tmp.display()))?;
        std::fs::rename(&tmp, path)
            .with_context(|| format!("cannot move {} to {}", tmp.display(), path.display()))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

impl Registry {
    /// An existing registry.
    pub fn open(root: &Path) -> Result<Registry> {
        if !root.join(RELEASES).is_dir() {
            bail!(
                "{} is not a release registry (no {RELEASES}/ directory in it); create one with \
                 `understudy releases add POLICY --registry {}`",
                root.display(),
                root.display()
            );
        }
        Ok(Registry {
            root: root.to_path_buf(),
        })
    }

    /// The registry at `root`, created when absent.
    pub fn open_or_create(root: &Path) -> Result<Registry> {
        let releases = root.join(RELEASES);
        std::fs::create_dir_all(&releases)
            .with_context(|| format!("cannot create the registry {}", releases.display()))?;
        Registry::open(root)
    }

    /// Takes the registry's write lock.
    pub fn lock(&self) -> Result<Lock> {
        let path = self.root.join(LOCK);
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(mut f) => {
                let _ = writeln!(f, "{}", std::process::id());
                Ok(Lock { path })
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                let holder = std::fs::read_to_string(&path).unwrap_or_default();
                bail!(
                    "the registry {} is locked by another understudy (process {}, lock file {}); \
                     wait for it, or remove the lock file if no such process runs",
                    self.root.display(),
                    holder.trim(),
                    path.display()
                )
            }
            Err(e) => Err(e).with_context(|| format!("cannot create {}", path.display())),
        }
    }

    pub fn release_dir(&self, id: &str) -> PathBuf {
        self.root.join(RELEASES).join(id)
    }

    /// The IDs of every release directory, sorted.
    pub fn ids(&self) -> Result<Vec<String>> {
        let dir = self.root.join(RELEASES);
        let mut ids = Vec::new();
        for entry in
            std::fs::read_dir(&dir).with_context(|| format!("cannot list {}", dir.display()))?
        {
            let entry = entry.with_context(|| format!("cannot list {}", dir.display()))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if is_release_id(&name) && entry.path().is_dir() {
                ids.push(name);
            }
        }
        ids.sort();
        Ok(ids)
    }

    /// The release `id` names: an exact ID or a unique prefix of one (`r-3f2a`).
    pub fn resolve(&self, id: &str) -> Result<String> {
        let ids = self.ids()?;
        if ids.iter().any(|i| i == id) {
            return Ok(id.to_string());
        }
        let matching: Vec<&String> = if id.len() >= 4 && id.starts_with("r-") {
            ids.iter().filter(|i| i.starts_with(id)).collect()
        } else {
            Vec::new()
        };
        match matching.as_slice() {
            [one] => Ok((*one).clone()),
            [] => {
                let known = if ids.is_empty() {
                    "it holds no release yet".to_string()
                } else {
                    format!("it holds {}", ids.join(", "))
                };
                bail!(
                    "no release `{id}` in the registry {} ({known}); see `understudy releases list`",
                    self.root.display()
                )
            }
            many => bail!(
                "`{id}` matches several releases in {} ({}); give more of the ID",
                self.root.display(),
                many.iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }

    /// Reads and verifies release `id` (exact ID).
    pub fn load(&self, id: &str) -> Result<Release> {
        let dir = self.release_dir(id);
        let rec_path = dir.join(record::FILE);
        let text = std::fs::read_to_string(&rec_path)
            .with_context(|| format!("release {id}: cannot read {}", rec_path.display()))?;
        let rec: Record = serde_json::from_str(&text).map_err(|e| {
            anyhow!(
                "release {id}: {} is not a valid release record ({e}); the registry was \
                 damaged or edited by hand",
                rec_path.display()
            )
        })?;
        if rec.id != id {
            bail!(
                "release {id}: {} says it is release `{}`; the directory was renamed or the \
                 record edited (tampered)",
                rec_path.display(),
                rec.id
            );
        }
        verify_files(&dir, &rec)?;
        Ok(Release { dir, record: rec })
    }

    /// The active release's ID, if any.
    pub fn active(&self) -> Result<Option<String>> {
        let path = self.root.join(ACTIVE);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
        };
        let id = text.trim();
        if !is_release_id(id) {
            bail!(
                "{} holds `{}`, not a release ID; the registry was edited by hand — \
                 `understudy releases promote ID` sets it",
                path.display(),
                id.chars().take(40).collect::<String>()
            );
        }
        if !self.release_dir(id).is_dir() {
            bail!(
                "{} names release {id}, which is not in {}; promote an existing release",
                path.display(),
                self.root.join(RELEASES).display()
            );
        }
        Ok(Some(id.to_string()))
    }

    /// The activation history, oldest first.
    pub fn history(&self) -> Result<Vec<Activation>> {
        let path = self.root.join(HISTORY);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
        };
        text.lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .map(|(i, l)| {
                serde_json::from_str(l).map_err(|e| {
                    anyhow!(
                        "{} line {}: not an activation record ({e})",
                        path.display(),
                        i + 1
                    )
                })
            })
            .collect()
    }

    /// Makes `id` the active release: the history first, then `ACTIVE`, each replaced
    /// atomically. The caller holds the lock and has verified the release.
    pub fn set_active(&self, id: &str, action: &str, note: &str, at_ms: u64) -> Result<()> {
        let from = self.active()?;
        let mut history = self.history()?;
        history.push(Activation {
            action: action.to_string(),
            at: record::rfc3339(at_ms),
            at_ms,
            from,
            note: note.to_string(),
            release: id.to_string(),
        });
        let mut text = String::new();
        for a in &history {
            text.push_str(&serde_json::to_string(a)?);
            text.push('\n');
        }
        write_atomic(&self.root.join(HISTORY), text.as_bytes())?;
        write_atomic(&self.root.join(ACTIVE), format!("{id}\n").as_bytes())
    }

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
        let tmp = self
            .root
            .join(RELEASES)
            .join(format!(".tmp-{id}-{}", std::process::id()));
        if tmp.exists() {
            std::fs::remove_dir_all(&tmp)
                .with_context(|| format!("cannot remove {}", tmp.display()))?;
        }
        let result = (|| -> Result<()> {
            for (name, bytes) in &staged.files {
                if !is_inner_path(name) {
                    bail!("release file name `{name}` is not a plain relative path");
                }
                let path = tmp.join(name);
                if let Some(parent) = path.parent() {
                    std::fs::create_dir_all(parent)
                        .with_context(|| format!("cannot create {}", parent.display()))?;
                }
                std::fs::write(&path, bytes)
                    .with_context(|| format!("cannot write {}", path.display()))?;
                if name == super::DEPLOY_SCRIPT {
                    make_executable(&path)?;
                }
            }
            let rec = tmp.join(record::FILE);
            std::fs::write(&rec, staged.record.to_json())
                .with_context(|| format!("cannot write {}", rec.display()))?;
            std::fs::rename(&tmp, &dir)
                .with_context(|| format!("cannot move {} to {}", tmp.display(), dir.display()))
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

/// Checks every file of the release directory against `release.json`: same set of files,
/// same SHA-256 each.
fn verify_files(dir: &Path, rec: &Record) -> Result<()> {
    let id = &rec.id;
    for (name, want) in &rec.files {
        if !is_inner_path(name) {
            bail!(
                "release {id}: {} lists `{name}`, which is not a file inside the release \
                 (tampered record)",
                dir.join(record::FILE).display()
            );
        }
        let path = dir.join(name);
        let bytes = std::fs::read(&path).with_context(|| {
            format!(
                "release {id}: {} is missing or unreadable (tampered or damaged)",
                path.display()
            )
        })?;
        let got = dist::sha256_hex(&bytes);
        if &got != want {
            bail!(
                "release {id}: {} has SHA-256 {got}, but {} records {want}: the file was \
                 changed after the release was made (tampered or damaged); the release \
                 cannot be used",
                path.display(),
                record::FILE
            );
        }
    }
    let mut present = Vec::new();
    list_files(dir, dir, &mut present)?;
    for name in present {
        if name != record::FILE && !rec.files.contains_key(&name) {
            bail!(
                "release {id}: {} is not part of the release ({} does not list it); a file \
                 was added after the release was made (tampered)",
                dir.join(&name).display(),
                record::FILE
            );
        }
    }
    Ok(())
}

fn list_files(root: &Path, dir: &Path, out: &mut Vec<String>) -> Result<()> {
    for entry in std::fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))? {
        let entry = entry.with_context(|| format!("cannot list {}", dir.display()))?;
        let path = entry.path();
        // wrangler keeps its working files in `.wrangler/` of the directory it deploys.
        if dir == root && entry.file_name() == WRANGLER_STATE {
            continue;
        }
        if path.is_dir() {
            list_files(root, &path, out)?;
        } else if let Ok(rel) = path.strip_prefix(root) {
            let rel: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            out.push(rel.join("/"));
        }
    }
    Ok(())
}

impl Release {
    pub fn id(&self) -> &str {
        &self.record.id
    }

    /// The baked module (already verified against its recorded hash).
    pub fn module(&self) -> Result<Vec<u8>> {
        let path = self.dir.join(dist::edge::MODULE);
        std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))
    }

    /// The bake inside the module: the policy and catalog the release serves.
    pub fn bake(&self) -> Result<Bake> {
        let module = self.module()?;
        decode_module_bake(&module, &self.dir.join(dist::edge::MODULE))
    }

    /// The release's edge (glue and module) to bake into again.
    pub fn edge(&self) -> Result<Edge> {
        let glue = self.dir.join(dist::edge::GLUE_JS);
        Ok(Edge {
            glue_js: std::fs::read(&glue)
                .with_context(|| format!("cannot read {}", glue.display()))?,
            module: self.module()?,
            dir: self.dir.clone(),
        })
    }

    /// The text of one of the release's sources (a path from `record.sources`).
    pub fn source_path(&self, rel: &str) -> PathBuf {
        self.dir.join(rel)
    }
}

/// Decodes the `understudy.bake` section of `module` read from `path`.
pub fn decode_module_bake(module: &[u8], path: &Path) -> Result<Bake> {
    let section = wasm::custom_section(module, SECTION_NAME)
        .map_err(|e| anyhow!("{}: {e}", path.display()))?
        .ok_or_else(|| {
            anyhow!(
                "{}: the module carries no `{SECTION_NAME}` section; it was not built by `understudy build`",
                path.display()
            )
        })?;
    bake::decode(section).map_err(|e| anyhow!("{}: {e}", path.display()))
}
