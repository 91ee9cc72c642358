//! The registry's write lock: one writer at a time, and a writer that died (SIGKILL, power
//! cut) never blocks the next one.
//!
//! Why an OS lock and not only a PID file: a PID file outlives a killed writer and names a
//! process that may be gone — or whose number was reused — so every later write would be
//! refused until someone deleted it by hand. `flock(2)` on `REGISTRY/.lock` is released by
//! the kernel when its holder dies, however it dies, so whether a holder is alive is never
//! guessed. The file also holds the holder's record (pid, host, command, since), for the
//! messages: a record found under a free lock is the trace of a writer that died, and is
//! taken over with a message naming it.
//!
//! Two cases still need a bound ([`STALE_AFTER_MS`]): a record from another host (on a
//! network file system `flock` may not reach across hosts, so a young one is respected
//! and one older than the bound taken over), and a live local holder older than the bound,
//! which looks hung: it is named with the advice to stop it, never taken over — two
//! writers at once is the one thing the lock exists to prevent.
//!
//! A clean release unlinks the file while still holding the lock; a waiter that then gets
//! the lock on the unlinked file notices (its inode is no longer the path's) and retries,
//! so two writers can never hold two different files.

use std::fs::{File, OpenOptions};
use std::io::{Read as _, Seek as _, Write as _};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use super::super::freshness::age;
use super::super::record::rfc3339;

/// A registry change takes seconds; a lock held ten minutes is a hung or remote writer.
pub const STALE_AFTER_MS: u64 = 10 * 60 * 1000;
/// How often a waiting writer tries again.
const POLL: Duration = Duration::from_millis(25);

/// Who holds (or held) the lock.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Holder {
    pub command: String,
    /// Held for a long operation by design (a rollout, for hours): never called hung.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub long: bool,
    pub host: String,
    pub pid: u32,
    pub since: String,
    pub since_ms: u64,
}

impl Holder {
    fn describe(&self, now_ms: u64) -> String {
        format!(
            "process {} on {} (`understudy {}`, since {}, {} ago)",
            self.pid,
            self.host,
            self.command,
            self.since,
            age(now_ms.saturating_sub(self.since_ms))
        )
    }
}

/// How to take the lock.
#[derive(Debug, Clone, Default)]
pub struct LockOptions {
    /// Wait this long for a live holder instead of failing at once.
    pub wait: Option<Duration>,
    /// What the holder is doing, for the messages of others (`releases promote`).
    pub command: String,
    /// The lock is held for a long operation (a rollout): others are told it is running,
    /// not that it looks hung.
    pub long: bool,
}

/// The held lock; released (file unlinked, then unlocked) on drop.
pub struct Lock {
    path: PathBuf,
    file: Option<File>,
    /// What taking the lock found and did (a dead writer's lock taken over), for stderr.
    pub notices: Vec<String>,
}

impl Drop for Lock {
    fn drop(&mut self) {
        // Unlink while still locked (see the module docs), then close (unlocks).
        let _ = std::fs::remove_file(&self.path);
        drop(self.file.take());
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

pub fn hostname() -> String {
    #[cfg(unix)]
    {
        rustix::system::uname()
            .nodename()
            .to_string_lossy()
            .into_owned()
    }
    #[cfg(not(unix))]
    {
        std::env::var("COMPUTERNAME").unwrap_or_else(|_| "localhost".into())
    }
}

enum Try {
    Got,
    Busy,
}

#[cfg(unix)]
fn try_lock(f: &File) -> Result<Try> {
    use rustix::fs::{flock, FlockOperation};
    match flock(f, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(Try::Got),
        Err(e) if e == rustix::io::Errno::WOULDBLOCK || e == rustix::io::Errno::INTR => {
            Ok(Try::Busy)
        }
        Err(e) => Err(std::io::Error::from(e)).context("cannot lock the registry (flock)"),
    }
}

#[cfg(not(unix))]
fn try_lock(_: &File) -> Result<Try> {
    Ok(Try::Got)
}

/// Whether `f` is still the file at `path` (not unlinked or replaced since it was opened).
#[cfg(unix)]
fn is_current(f: &File, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    match (f.metadata(), std::fs::metadata(path)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

#[cfg(not(unix))]
fn is_current(_: &File, path: &Path) -> bool {
    path.exists()
}

fn read_holder(f: &mut File) -> Option<Result<Holder, String>> {
    let mut text = String::new();
    f.rewind().ok()?;
    f.read_to_string(&mut text).ok()?;
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    Some(serde_json::from_str(text).map_err(|_| text.chars().take(80).collect()))
}

/// Who holds the lock at `root` now, if a live process does — without taking it (a free
/// lock is only tried, never written, and not created when absent).
pub fn probe(root: &Path) -> Option<Holder> {
    let path = root.join(super::LOCK);
    let mut f = OpenOptions::new().read(true).write(true).open(&path).ok()?;
    match try_lock(&f).ok()? {
        Try::Got => None, // closing the file unlocks it
        Try::Busy => read_holder(&mut f)?.ok(),
    }
}

/// Takes the lock of the registry at `root` (the file `root/.lock`).
pub fn acquire(root: &Path, opts: &LockOptions) -> Result<Lock> {
    let path = root.join(super::LOCK);
    let started = Instant::now();
    let host = hostname();
    let mut waited_notice = false;
    let mut notices = Vec::new();
    loop {
        let mut f = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .with_context(|| format!("cannot open the lock file {}", path.display()))?;
        let now = now_ms();
        let busy_with = match try_lock(&f)? {
            Try::Got if !is_current(&f, &path) => continue, // released and unlinked meanwhile
            Try::Got => match read_holder(&mut f) {
                None => None,
                Some(Err(junk)) => {
                    notices.push(format!(
                        "took over the lock {}: it held `{junk}`, not a lock record, and no \
                         process holds it",
                        path.display()
                    ));
                    None
                }
                Some(Ok(h))
                    if h.host != host && now.saturating_sub(h.since_ms) < STALE_AFTER_MS =>
                {
                    // Another host's writer: flock may not reach it; respect a young record.
                    Some(h)
                }
                Some(Ok(h)) => {
                    let why = if h.host == host {
                        "which is no longer running (killed or crashed mid-command)".to_string()
                    } else {
                        format!(
                            "a lock from another host older than the {} bound",
                            age(STALE_AFTER_MS)
                        )
                    };
                    notices.push(format!(
                        "took over the lock of the registry {} left by {}, {why}",
                        root.display(),
                        h.describe(now)
                    ));
                    None
                }
            },
            Try::Busy => Some(match read_holder(&mut f) {
                Some(Ok(h)) => h,
                // Taken a moment ago and its record not written yet.
                _ => Holder {
                    command: "?".into(),
                    long: false,
                    host: host.clone(),
                    pid: 0,
                    since: rfc3339(now),
                    since_ms: now,
                },
            }),
        };
        let Some(holder) = busy_with else {
            let me = Holder {
                command: opts.command.clone(),
                long: opts.long,
                host,
                pid: std::process::id(),
                since: rfc3339(now),
                since_ms: now,
            };
            let mut line = serde_json::to_string(&me)?;
            line.push('\n');
            f.set_len(0)
                .and_then(|()| f.rewind())
                .and_then(|()| f.write_all(line.as_bytes()))
                .and_then(|()| f.sync_all())
                .with_context(|| format!("cannot write the lock file {}", path.display()))?;
            return Ok(Lock {
                path,
                file: Some(f),
                notices,
            });
        };
        drop(f);
        let held_ms = now.saturating_sub(holder.since_ms);
        if holder.host == host && held_ms > STALE_AFTER_MS && !holder.long {
            bail!(
                "the registry {} is locked by {}: longer than any registry change takes (the \
                 bound is {}), so it looks hung. It is alive, so its lock is not taken over: \
                 stop it (`kill {}`) and run the command again",
                root.display(),
                holder.describe(now),
                age(STALE_AFTER_MS),
                holder.pid
            );
        }
        let Some(wait) = opts.wait else {
            bail!(
                "the registry {} is locked by {}; pass --wait DURATION (e.g. --wait 30s) to wait \
                 for it",
                root.display(),
                holder.describe(now)
            );
        };
        if started.elapsed() >= wait {
            bail!(
                "the registry {} is still locked by {} after waiting {}",
                root.display(),
                holder.describe(now),
                understudy_core::time::format_duration(wait.as_millis() as u64)
            );
        }
        if !waited_notice {
            eprintln!(
                "waiting (at most {}) for the lock of {} held by {}",
                understudy_core::time::format_duration(wait.as_millis() as u64),
                root.display(),
                holder.describe(now)
            );
            waited_notice = true;
        }
        std::thread::sleep(POLL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(wait: Option<u64>) -> LockOptions {
        LockOptions {
            wait: wait.map(Duration::from_millis),
            command: "test".into(),
            long: false,
        }
    }

    #[test]
    fn a_second_writer_is_refused_then_gets_it_after_release() {
        let dir = tempfile::tempdir().unwrap();
        let first = acquire(dir.path(), &opts(None)).unwrap();
        let err = acquire(dir.path(), &opts(None)).err().unwrap().to_string();
        assert!(err.contains("is locked by process"), "{err}");
        assert!(err.contains("--wait"), "{err}");
        drop(first);
        assert!(!dir.path().join(".lock").exists());
        let again = acquire(dir.path(), &opts(None)).unwrap();
        assert!(again.notices.is_empty());
    }

    #[test]
    fn a_waiting_writer_gets_the_lock_when_it_is_released() {
        let dir = tempfile::tempdir().unwrap();
        let first = acquire(dir.path(), &opts(None)).unwrap();
        let root = dir.path().to_path_buf();
        let waiter = std::thread::spawn(move || acquire(&root, &opts(Some(5_000))).map(|_| ()));
        std::thread::sleep(Duration::from_millis(150));
        drop(first);
        waiter.join().unwrap().unwrap();
    }

    #[test]
    fn waiting_gives_up_at_its_bound() {
        let dir = tempfile::tempdir().unwrap();
        let _first = acquire(dir.path(), &opts(None)).unwrap();
        let t = Instant::now();
        let err = acquire(dir.path(), &opts(Some(200)))
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("still locked"), "{err}");
        assert!(t.elapsed() >= Duration::from_millis(200));
    }

    #[test]
    fn the_record_of_a_dead_writer_is_taken_over_with_a_message() {
        let dir = tempfile::tempdir().unwrap();
        let dead = Holder {
            command: "releases promote".into(),
            long: false,
            host: hostname(),
            pid: 4_000_000,
            since: "2026-11-30T01:00:00Z".into(),
            since_ms: now_ms() - 5_000,
        };
        std::fs::write(
            dir.path().join(".lock"),
            serde_json::to_string(&dead).unwrap(),
        )
        .unwrap();
        let lock = acquire(dir.path(), &opts(None)).unwrap();
        assert_eq!(lock.notices.len(), 1);
        assert!(
            lock.notices[0].contains("process 4000000")
                && lock.notices[0].contains("no longer running"),
            "{:?}",
            lock.notices
        );
    }

    #[test]
    fn another_hosts_lock_is_respected_until_it_is_older_than_the_bound() {
        let dir = tempfile::tempdir().unwrap();
        let mut remote = Holder {
            command: "releases promote".into(),
            long: false,
            host: "elsewhere.example".into(),
            pid: 12,
            since: String::new(),
            since_ms: now_ms() - 1_000,
        };
        let write = |h: &Holder| {
            std::fs::write(dir.path().join(".lock"), serde_json::to_string(h).unwrap()).unwrap()
        };
        write(&remote);
        let err = acquire(dir.path(), &opts(None)).err().unwrap().to_string();
        assert!(err.contains("elsewhere.example"), "{err}");
        remote.since_ms = now_ms() - STALE_AFTER_MS - 1_000;
        write(&remote);
        let lock = acquire(dir.path(), &opts(None)).unwrap();
        assert!(lock.notices[0].contains("older than"), "{:?}", lock.notices);
    }
}
