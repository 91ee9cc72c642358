//! The registry directory: immutable release directories, the `ACTIVE` pointer and the
//! activation history (layout in docs/releases.md), kept like a small database.
//!
//! - Every write is atomic and durable ([`atomic`]): a release is written into a temporary
//!   sibling directory, every file and directory `fsync`ed, and renamed into place;
//!   `ACTIVE` and `history.jsonl` are replaced through a temporary file, `fsync` and a
//!   rename, then the directory is `fsync`ed.
//! - A change of the active release writes the history first (the intent, [`history`]),
//!   then `ACTIVE` (the commit). A writer killed between the two leaves a last history line
//!   that never took effect; `verify` names it and `repair` drops it.
//! - One writer at a time ([`lock`]); a dead writer's lock is taken over with a message,
//!   and the temporary files it left are removed by the next writer.
//! - Nothing is ever rewritten in a release directory (except by `repair`, restoring a
//!   file's recorded bytes), and every read checks the files against `release.json` first,
//!   so a tampered release is refused by name. [`check`] finds what is wrong with a
//!   registry, [`repair`] fixes what the content-addressed store allows.

pub mod atomic;
pub mod check;
pub mod history;
pub mod integrity;
pub mod lock;
mod publish;
pub mod repair;

use std::path::{Component, Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use understudy_core::bake::{self, Bake, SECTION_NAME};

pub use self::atomic::write_atomic;
use self::atomic::{is_temporary, sync_dir};
pub use self::history::Activation;
use self::integrity::verify_files;
pub use self::integrity::{content_problem, file_problems, FileProblem};
pub use self::lock::{Lock, LockOptions};
pub use self::publish::Staged;
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
    /// How writers take the lock (`--wait`, the command named in the lock record).
    pub lock_options: LockOptions,
}

/// One verified release.
pub struct Release {
    pub dir: PathBuf,
    pub record: Record,
}

/// Whether `rel` is a plain relative path inside a directory (no `..`, not absolute).
pub fn is_inner_path(rel: &str) -> bool {
    let p = Path::new(rel);
    !rel.is_empty() && p.components().all(|c| matches!(c, Component::Normal(_)))
}

/// Crash tests (cli/tests/registry.rs) stretch the moments between the durable steps
/// of a write, so that a SIGKILL at a random time lands in each of them: with
/// `UNDERSTUDY_REGISTRY_STEP_DELAY_MS=N` every write pauses N ms after each step. Unset (as
/// everywhere but in those tests), this does nothing.
pub fn step(_what: &str) {
    static DELAY: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    let ms = *DELAY.get_or_init(|| {
        std::env::var("UNDERSTUDY_REGISTRY_STEP_DELAY_MS")
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    });
    if ms > 0 {
        std::thread::sleep(std::time::Duration::from_millis(ms));
    }
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
            lock_options: LockOptions::default(),
        })
    }

    /// The registry at `root`, created when absent.
    pub fn open_or_create(root: &Path) -> Result<Registry> {
        let releases = root.join(RELEASES);
        if !releases.is_dir() {
            std::fs::create_dir_all(&releases)
                .with_context(|| format!("cannot create the registry {}", releases.display()))?;
            sync_dir(root)?;
        }
        Registry::open(root)
    }

    /// The same registry, with writers taking the lock this way.
    pub fn with_lock_options(mut self, options: LockOptions) -> Registry {
        self.lock_options = options;
        self
    }

    /// Takes the registry's write lock (waiting as the options say), then removes what a
    /// killed writer left behind: under the lock, every temporary name is an orphan. What
    /// it found and did goes to stderr.
    pub fn lock(&self) -> Result<Lock> {
        let lock = lock::acquire(&self.root, &self.lock_options)?;
        for n in &lock.notices {
            eprintln!("note: {n}");
        }
        let removed = self.remove_orphans()?;
        if !removed.is_empty() {
            eprintln!(
                "note: removed {} temporary file(s) a killed writer left in {}: {}",
                removed.len(),
                self.root.display(),
                removed.join(", ")
            );
        }
        Ok(lock)
    }

    /// Takes the lock to look at the registry without changing it (`verify`): a writer
    /// mid-change would otherwise look like damage. Leaves orphans for `verify` to report.
    pub fn lock_to_read(&self) -> Result<Lock> {
        let lock = lock::acquire(&self.root, &self.lock_options)?;
        for n in &lock.notices {
            eprintln!("note: {n}");
        }
        Ok(lock)
    }

    /// The temporary files and directories in the registry (relative paths): orphans when
    /// nobody holds the lock, or when we do.
    pub fn orphans(&self) -> Result<Vec<String>> {
        let mut found = Vec::new();
        for (dir, prefix) in [
            (self.root.clone(), ""),
            (self.root.join(RELEASES), "releases/"),
            // The rollouts' and the uploads' records (release::rollout::record, versions).
            (self.root.join("rollouts"), "rollouts/"),
            (self.root.join("versions"), "versions/"),
        ] {
            let entries = match std::fs::read_dir(&dir) {
                Ok(e) => e,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e).with_context(|| format!("cannot list {}", dir.display())),
            };
            for entry in entries {
                let entry = entry.with_context(|| format!("cannot list {}", dir.display()))?;
                let name = entry.file_name().to_string_lossy().into_owned();
                if is_temporary(&name) {
                    found.push(format!("{prefix}{name}"));
                }
            }
        }
        found.sort();
        Ok(found)
    }

    /// Removes the orphans (the caller holds the lock); returns what it removed.
    fn remove_orphans(&self) -> Result<Vec<String>> {
        let orphans = self.orphans()?;
        for rel in &orphans {
            let path = self.root.join(rel);
            let r = if path.is_dir() {
                std::fs::remove_dir_all(&path)
            } else {
                std::fs::remove_file(&path)
            };
            r.with_context(|| format!("cannot remove the orphan {}", path.display()))?;
        }
        if !orphans.is_empty() {
            for dir in [
                self.root.clone(),
                self.root.join(RELEASES),
                self.root.join("rollouts"),
                self.root.join("versions"),
            ] {
                if dir.is_dir() {
                    sync_dir(&dir)?;
                }
            }
        }
        Ok(orphans)
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
        let read = |name: &str| std::fs::read(dir.join(name)).ok();
        if let Some(p) = content_problem(&rec, &read) {
            bail!("release {id}: {p}; the release cannot be used");
        }
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

    /// The text of `history.jsonl` ("" when absent).
    pub fn history_text(&self) -> Result<String> {
        let path = self.root.join(HISTORY);
        match std::fs::read(&path) {
            Ok(bytes) => Ok(String::from_utf8_lossy(&bytes).into_owned()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
            Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
        }
    }

    /// The activation history, oldest first; an error naming `releases repair` when it is
    /// damaged (a change must not be appended to a log that is not whole).
    pub fn history(&self) -> Result<Vec<Activation>> {
        let parsed = history::parse(&self.history_text()?);
        if let Some(b) = parsed.bad.first() {
            bail!(
                "{} is damaged: line {}: {}{}; run `understudy releases verify --registry {}` \
                 to see everything, and `understudy releases repair --registry {}` to fix it",
                self.root.join(HISTORY).display(),
                b.line,
                b.reason,
                if parsed.bad.len() > 1 {
                    format!(" (and {} more line(s))", parsed.bad.len() - 1)
                } else {
                    String::new()
                },
                self.root.display(),
                self.root.display()
            );
        }
        Ok(parsed.entries)
    }

    /// Makes `id` the active release: the history first (the intent), then `ACTIVE` (the
    /// commit), each replaced atomically. The caller holds the lock and has verified the
    /// release. Refuses when the history and `ACTIVE` disagree (an earlier writer was
    /// killed between the two): `releases repair` first.
    pub fn set_active(&self, id: &str, action: &str, note: &str, at_ms: u64) -> Result<()> {
        let from = self.active()?;
        let mut history = self.history()?;
        if let Some(last) = history.last() {
            if from.as_deref() != Some(last.release.as_str()) {
                bail!(
                    "{} says {} is active, but {}'s last entry made {} active (a change was \
                     interrupted, or ACTIVE edited by hand); run `understudy releases repair \
                     --registry {}` first",
                    self.root.join(ACTIVE).display(),
                    from.as_deref().unwrap_or("nothing"),
                    HISTORY,
                    last.release,
                    self.root.display()
                );
            }
        }
        history.push(Activation {
            action: action.to_string(),
            at: record::rfc3339(at_ms),
            at_ms,
            from,
            note: note.to_string(),
            release: id.to_string(),
            seq: 0,
            sum: String::new(),
        });
        write_atomic(
            &self.root.join(HISTORY),
            history::render(&history).as_bytes(),
        )?;
        step("history written");
        write_atomic(&self.root.join(ACTIVE), format!("{id}\n").as_bytes())?;
        step("ACTIVE written");
        Ok(())
    }
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
