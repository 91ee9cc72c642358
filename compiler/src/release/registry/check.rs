//! What is wrong with a registry, and what `repair` can do about each problem — one pass
//! that `releases verify` prints and `releases repair` carries out, so the two never
//! disagree. The caller holds the lock: a writer mid-change would otherwise look like a
//! damaged registry.
//!
//! What the content-addressed store allows: a release's files are named by their SHA-256
//! in its `release.json`, so a damaged or missing file is restored from any other release
//! holding a file with that hash (the glue, a shared policy or catalog); the history is
//! cut back to its whole lines and re-chained, and `ACTIVE` rebuilt from it. What it does
//! not allow: a release whose record is unreadable, or whose content — even once restored
//! — no longer hashes to its ID; those are named, never deleted.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::Result;

use super::history::{self, Activation};
use super::{file_problems, FileProblem, Registry, ACTIVE, HISTORY, RELEASES};
use crate::release::record::{self, is_release_id, Record};

/// One thing `repair` does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Remove a killed writer's temporary file or directory (relative to the registry).
    RemoveOrphan(String),
    /// Put back `name` of `release` from `from`, a file with the recorded SHA-256.
    RestoreFile {
        release: String,
        name: String,
        from: PathBuf,
    },
    /// Move a file the release does not list out of it, into `lost+found/RELEASE/`.
    MoveAside { release: String, name: String },
    /// Replace `history.jsonl` with these entries; keep the old one beside it when it
    /// held damaged lines.
    RewriteHistory {
        entries: Vec<Activation>,
        keep_damaged: bool,
    },
    /// Write `ACTIVE`.
    SetActive(String),
}

/// A problem, and whether `repair` fixes it (`fix`) or a person must (`manual`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub problem: String,
    pub fix: Result<String, String>,
}

#[derive(Debug, Clone)]
pub struct ReleaseCheck {
    pub id: String,
    /// Empty when intact.
    pub problems: Vec<String>,
}

#[derive(Debug, Clone)]
pub struct Report {
    pub releases: Vec<ReleaseCheck>,
    /// `ACTIVE` as found (a release ID), if it names one.
    pub active: Option<String>,
    pub history_entries: usize,
    pub findings: Vec<Finding>,
    /// What `repair` does, in order.
    pub actions: Vec<Action>,
}

impl Report {
    pub fn is_clean(&self) -> bool {
        self.findings.is_empty()
    }

    pub fn damaged(&self) -> usize {
        self.releases
            .iter()
            .filter(|r| !r.problems.is_empty())
            .count()
    }

    /// Whether every finding is one `repair` fixes.
    pub fn repairable(&self) -> bool {
        self.findings.iter().all(|f| f.fix.is_ok())
    }
}

/// What `ACTIVE` holds.
enum ActiveFile {
    Absent,
    Id(String),
    Junk(String),
}

fn read_active(reg: &Registry) -> Result<ActiveFile> {
    let path = reg.root.join(ACTIVE);
    match std::fs::read(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(ActiveFile::Absent),
        Err(e) => Err(anyhow::Error::new(e).context(format!("cannot read {}", path.display()))),
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            let t = text.trim();
            Ok(if is_release_id(t) {
                ActiveFile::Id(t.to_string())
            } else {
                ActiveFile::Junk(t.chars().take(40).collect())
            })
        }
    }
}

/// One release: its problems and the actions that would fix the fixable ones.
struct Examined {
    check: ReleaseCheck,
    /// Every problem has an action (the release is intact once they are done).
    fixable: bool,
    actions: Vec<Action>,
}

/// Files of intact releases by SHA-256: what the store can restore from.
fn store_index(reg: &Registry, ids: &[String]) -> BTreeMap<String, PathBuf> {
    let mut index = BTreeMap::new();
    for id in ids {
        let dir = reg.release_dir(id);
        let Ok(text) = std::fs::read_to_string(dir.join(record::FILE)) else {
            continue;
        };
        let Ok(rec) = serde_json::from_str::<Record>(&text) else {
            continue;
        };
        let bad: Vec<String> = file_problems(&dir, &rec)
            .unwrap_or_default()
            .into_iter()
            .filter_map(|p| match p {
                FileProblem::Missing { name, .. } | FileProblem::Changed { name, .. } => Some(name),
                _ => None,
            })
            .collect();
        for (name, sha) in &rec.files {
            if !bad.contains(name) && super::is_inner_path(name) {
                index.entry(sha.clone()).or_insert_with(|| dir.join(name));
            }
        }
    }
    index
}

fn examine(reg: &Registry, id: &str, index: &BTreeMap<String, PathBuf>) -> Examined {
    let dir = reg.release_dir(id);
    let rec_path = dir.join(record::FILE);
    let unfixable = |problem: String| Examined {
        check: ReleaseCheck {
            id: id.to_string(),
            problems: vec![problem],
        },
        fixable: false,
        actions: Vec::new(),
    };
    let rec: Record = match std::fs::read_to_string(&rec_path)
        .map_err(|e| e.to_string())
        .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
    {
        Ok(r) => r,
        Err(e) => {
            return unfixable(format!(
                "release {id}: {} is unreadable or not a release record ({e})",
                rec_path.display()
            ))
        }
    };
    if rec.id != id {
        return unfixable(format!(
            "release {id}: {} says it is release `{}` (renamed or edited)",
            rec_path.display(),
            rec.id
        ));
    }
    let problems = match file_problems(&dir, &rec) {
        Ok(p) => p,
        Err(e) => return unfixable(format!("release {id}: {e:#}")),
    };
    let mut out = Examined {
        check: ReleaseCheck {
            id: id.to_string(),
            problems: Vec::new(),
        },
        fixable: true,
        actions: Vec::new(),
    };
    let mut restored: BTreeMap<String, PathBuf> = BTreeMap::new();
    for p in &problems {
        out.check.problems.push(p.describe(&dir, id));
        match p {
            FileProblem::Missing { name, want } | FileProblem::Changed { name, want, .. } => {
                match index.get(want) {
                    Some(from) => {
                        restored.insert(name.clone(), from.clone());
                        out.actions.push(Action::RestoreFile {
                            release: id.to_string(),
                            name: name.clone(),
                            from: from.clone(),
                        });
                    }
                    None => out.fixable = false,
                }
            }
            FileProblem::Unlisted(name) => out.actions.push(Action::MoveAside {
                release: id.to_string(),
                name: name.clone(),
            }),
            FileProblem::BadName(_) => out.fixable = false,
        }
    }
    let read = |name: &str| -> Option<Vec<u8>> {
        std::fs::read(
            restored
                .get(name)
                .cloned()
                .unwrap_or_else(|| dir.join(name)),
        )
        .ok()
    };
    if out.fixable {
        if let Some(p) = super::content_problem(&rec, &read) {
            out.check.problems.push(format!("release {id}: {p}"));
            out.fixable = false;
        }
    }
    out
}

/// Examines the whole registry.
pub fn check(reg: &Registry, now_ms: u64) -> Result<Report> {
    let mut findings = Vec::new();
    let mut actions = Vec::new();

    for o in reg.orphans()? {
        findings.push(Finding {
            problem: format!("{o}: a temporary file a killed writer left"),
            fix: Ok(format!("remove {o}")),
        });
        actions.push(Action::RemoveOrphan(o));
    }

    let ids = reg.ids()?;
    let index = store_index(reg, &ids);
    let mut releases = Vec::new();
    let mut usable: Vec<String> = Vec::new();
    for id in &ids {
        let ex = examine(reg, id, &index);
        if ex.check.problems.is_empty() || ex.fixable {
            usable.push(id.clone());
        }
        if !ex.check.problems.is_empty() {
            let fix = if ex.fixable {
                Ok(format!(
                    "restore release {id} from the store ({} file(s))",
                    ex.actions.len()
                ))
            } else {
                Err(format!(
                    "release {id} cannot be restored from the store: it cannot be promoted, \
                     diffed or rolled to; promote another release if it is the active one, \
                     and rebuild it from its sources if it is needed"
                ))
            };
            for p in &ex.check.problems {
                findings.push(Finding {
                    problem: p.clone(),
                    fix: fix.clone(),
                });
            }
            if ex.fixable {
                actions.extend(ex.actions);
            }
        }
        releases.push(ex.check);
    }

    // The history and ACTIVE.
    let text = reg.history_text()?;
    let parsed = history::parse(&text);
    let history_path = reg.root.join(HISTORY);
    let mut entries: Vec<Activation> = Vec::new();
    let mut rewrite = !parsed.bad.is_empty();
    for b in &parsed.bad {
        findings.push(Finding {
            problem: format!("{} line {}: {}", history_path.display(), b.line, b.reason),
            fix: Ok(format!(
                "keep the whole lines and link them again (the damaged file is kept as \
                 {HISTORY}.damaged-…)"
            )),
        });
    }
    for e in parsed.entries {
        if let Some(prev) = entries.last() {
            if e.from.as_deref() != Some(prev.release.as_str()) {
                let to = e.from.clone().unwrap_or_else(|| prev.release.clone());
                let prev_release = prev.release.clone();
                entries.push(repair_entry(
                    &prev_release,
                    &to,
                    now_ms,
                    "entries were lost here; this one links the history again",
                ));
            }
        }
        let mut e = e;
        if e.from.is_none() {
            e.from = entries.last().map(|p| p.release.clone());
        }
        entries.push(e);
    }

    let active_file = read_active(reg)?;
    let exists = |id: &str| usable.iter().any(|u| u == id);
    let mut active = None;
    let active_path = reg.root.join(ACTIVE);
    match (&active_file, entries.last().cloned()) {
        (ActiveFile::Absent, None) => {}
        (ActiveFile::Absent, Some(last)) if last.from.is_none() => {
            findings.push(Finding {
                problem: format!(
                    "the history's last entry ({} {}) never took effect: there is no {ACTIVE} \
                     (the first change was interrupted)",
                    last.action, last.release
                ),
                fix: Ok("drop that entry: nothing was active before it, nothing is".into()),
            });
            entries.pop();
            rewrite = true;
        }
        (ActiveFile::Absent, Some(last)) | (ActiveFile::Junk(_), Some(last)) => {
            let what = match &active_file {
                ActiveFile::Junk(j) if j.is_empty() => {
                    format!("{} is empty", active_path.display())
                }
                ActiveFile::Junk(j) => {
                    format!("{} holds `{j}`, not a release ID", active_path.display())
                }
                _ => format!("{} is missing", active_path.display()),
            };
            let pick = [Some(last.release.clone()), last.from.clone()]
                .into_iter()
                .flatten()
                .find(|id| exists(id));
            match pick {
                Some(id) => {
                    findings.push(Finding {
                        problem: what,
                        fix: Ok(format!(
                            "write {id} into {ACTIVE}: the history's last active release"
                        )),
                    });
                    if id != last.release {
                        entries.push(repair_entry(
                            &last.release,
                            &id,
                            now_ms,
                            "ACTIVE was lost and the last release is damaged; its predecessor is active again",
                        ));
                        rewrite = true;
                    }
                    actions.push(Action::SetActive(id.clone()));
                    active = Some(id);
                }
                None => findings.push(Finding {
                    problem: what,
                    fix: Err(format!(
                        "the history names no intact release to make active; promote one \
                         (`understudy releases promote ID --registry {}`)",
                        reg.root.display()
                    )),
                }),
            }
        }
        (ActiveFile::Junk(j), None) => findings.push(Finding {
            problem: format!(
                "{} holds `{j}`, not a release ID, and there is no history to tell which \
                 release was active",
                active_path.display()
            ),
            fix: Err(format!(
                "promote a release (`understudy releases promote ID --registry {}`)",
                reg.root.display()
            )),
        }),
        (ActiveFile::Id(id), last) => {
            active = Some(id.clone());
            if !reg.release_dir(id).is_dir() {
                findings.push(Finding {
                    problem: format!(
                        "{} names {id}, which is not in {}",
                        active_path.display(),
                        reg.root.join(RELEASES).display()
                    ),
                    fix: Err(format!(
                        "promote an existing release (`understudy releases promote ID \
                         --registry {}`)",
                        reg.root.display()
                    )),
                });
            } else {
                match last {
                    Some(last) if &last.release == id => {}
                    Some(last) if last.from.as_deref() == Some(id.as_str()) => {
                        findings.push(Finding {
                            problem: format!(
                                "the history's last entry ({} {}) never took effect: {ACTIVE} \
                                 still names {id} (that change was interrupted)",
                                last.action, last.release
                            ),
                            fix: Ok(format!("drop that entry; {id} stays active")),
                        });
                        entries.pop();
                        rewrite = true;
                    }
                    Some(last) => {
                        findings.push(Finding {
                            problem: format!(
                                "{ACTIVE} names {id} but the history's last entry made {} \
                                 active (entries lost, or {ACTIVE} edited by hand)",
                                last.release
                            ),
                            fix: Ok(format!("record in the history that {id} is active")),
                        });
                        entries.push(repair_entry(
                            &last.release,
                            id,
                            now_ms,
                            "ACTIVE and the history disagreed; ACTIVE kept",
                        ));
                        rewrite = true;
                    }
                    None => {
                        findings.push(Finding {
                            problem: format!(
                                "{ACTIVE} names {id} but {} has no entry",
                                history_path.display()
                            ),
                            fix: Ok(format!("start the history with {id} active")),
                        });
                        let mut e =
                            repair_entry("", id, now_ms, "history lost; started again from ACTIVE");
                        e.from = None;
                        entries.push(e);
                        rewrite = true;
                    }
                }
            }
        }
    }
    if rewrite {
        actions.push(Action::RewriteHistory {
            entries: entries.clone(),
            keep_damaged: !parsed.bad.is_empty(),
        });
    }
    // ACTIVE last: the history is whole before ACTIVE moves.
    if let Some(pos) = actions
        .iter()
        .position(|a| matches!(a, Action::SetActive(_)))
    {
        let a = actions.remove(pos);
        actions.push(a);
    }

    Ok(Report {
        releases,
        active,
        history_entries: entries.len(),
        findings,
        actions,
    })
}

fn repair_entry(from: &str, to: &str, at_ms: u64, note: &str) -> Activation {
    Activation {
        action: "repair".into(),
        at: record::rfc3339(at_ms),
        at_ms,
        from: Some(from.to_string()),
        note: note.to_string(),
        release: to.to_string(),
        seq: 0,
        sum: String::new(),
    }
}
