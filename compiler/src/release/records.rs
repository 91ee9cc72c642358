//! [R-GUARD] `releases verify` and `repair` over the registry's deployment records — the
//! rollouts' (`rollouts/`) and the uploads' (`versions/`) — beside the releases, the history
//! and `ACTIVE` that `registry::check` examines. What a crash or a hand can leave there: a
//! rollout record that cannot be read, a rollout that never ended with no controller running
//! it (its split still deployed), a version record that cannot be read, an upload asked for
//! whose result was never recorded. Each is named with the command that resolves it.

use anyhow::{Context as _, Result};

use super::registry::check::Finding;
use super::registry::repair::LOST_AND_FOUND;
use super::registry::{write_atomic, Registry};
use super::rollout::{guard, record};
use super::versions;
use crate::release::record::is_release_id;

/// Version records that cannot be read (their release IDs).
fn damaged_versions(reg: &Registry) -> Result<Vec<(String, String)>> {
    let dir = reg.root.join(versions::DIR);
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("cannot list {}", dir.display())),
    };
    let mut out = Vec::new();
    for entry in entries {
        let name = entry?.file_name().to_string_lossy().into_owned();
        let Some(id) = name.strip_suffix(".json").filter(|id| is_release_id(id)) else {
            continue;
        };
        if let Err(e) = versions::read(reg, id) {
            out.push((id.to_string(), format!("{e:#}")));
        }
    }
    out.sort();
    Ok(out)
}

/// What is wrong with the deployment records, and what fixes it.
pub fn findings(reg: &Registry) -> Result<Vec<Finding>> {
    let mut out = Vec::new();
    let l = record::list(reg)?;
    for d in &l.damaged {
        out.push(Finding {
            problem: format!("rollouts/{}.json: {}", d.id, d.error),
            fix: Err(d.way_out(reg)),
        });
    }
    let running = guard::holder(reg);
    for r in l.records.iter().filter(|r| !r.finished()) {
        if running.is_some() {
            continue; // its controller runs it
        }
        out.push(Finding {
            problem: format!(
                "the rollout of {} (from {}) has not ended ({}) and no controller runs it: its \
                 split is still deployed",
                r.new,
                r.old,
                r.summary()
            ),
            fix: Err(format!(
                "continue it with `understudy releases rollout {} --resume --registry {reg}` or \
                 revert it with `understudy releases rollout {} --abort --registry {reg}`",
                r.new,
                r.new,
                reg = reg.root.display()
            )),
        });
    }
    for (id, e) in damaged_versions(reg)? {
        out.push(Finding {
            problem: format!("versions/{id}.json: {e}"),
            fix: Ok(format!(
                "move it to {LOST_AND_FOUND}/versions/; `understudy releases upload {id}` then \
                 finds the version again by its tag"
            )),
        });
    }
    let dir = reg.root.join(versions::DIR);
    if let Ok(entries) = std::fs::read_dir(&dir) {
        let mut ids: Vec<String> = entries
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let n = e.file_name().to_string_lossy().into_owned();
                n.strip_suffix(".json")
                    .filter(|id| is_release_id(id))
                    .map(String::from)
            })
            .collect();
        ids.sort();
        for id in ids {
            if let Ok(Some(u)) = versions::read(reg, &id) {
                if u.version_id.is_none() {
                    out.push(Finding {
                        problem: format!(
                            "versions/{id}.json: the upload of {id} was asked for and its result \
                             never recorded (the command stopped mid-upload)"
                        ),
                        fix: Err(format!(
                            "run `understudy releases upload {id} --registry {}`: it finds the \
                             version by its tag, or uploads it",
                            reg.root.display()
                        )),
                    });
                }
            }
        }
    }
    Ok(out)
}

/// Does what [`findings`] says `repair` can: damaged version records moved aside. One line
/// per action.
pub fn repair(reg: &Registry) -> Result<Vec<String>> {
    let mut done = Vec::new();
    for (id, _) in damaged_versions(reg)? {
        let from = versions::path(reg, &id);
        let to = reg
            .root
            .join(LOST_AND_FOUND)
            .join(versions::DIR)
            .join(format!("{id}.json"));
        let bytes =
            std::fs::read(&from).with_context(|| format!("cannot read {}", from.display()))?;
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create {}", parent.display()))?;
        }
        write_atomic(&to, &bytes)?;
        std::fs::remove_file(&from).with_context(|| format!("cannot remove {}", from.display()))?;
        done.push(format!(
            "moved the damaged versions/{id}.json to {LOST_AND_FOUND}/versions/"
        ));
    }
    Ok(done)
}
