//! Is a release directory what its `release.json` says, and is its content what its ID
//! says? Every file against its recorded SHA-256 (none missing, none added), then the ID
//! recomputed from the content itself — sources, edge and the compiler version the bake
//! names — so a release edited record and all is still caught.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{anyhow, Context, Result};
use understudy_core::bake::{self, SECTION_NAME};

use super::{is_inner_path, WRANGLER_STATE};
use crate::dist::{self, wasm};
use crate::release::record::{self, Record};

/// What is wrong with one file of a release directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileProblem {
    /// `release.json` lists a name that is not a plain relative path (a forged record).
    BadName(String),
    Missing {
        name: String,
        want: String,
    },
    Changed {
        name: String,
        want: String,
        got: String,
    },
    /// A file `release.json` does not list.
    Unlisted(String),
}

impl FileProblem {
    pub fn describe(&self, dir: &Path, id: &str) -> String {
        match self {
            FileProblem::BadName(name) => format!(
                "release {id}: {} lists `{name}`, which is not a file inside the release \
                 (tampered record)",
                dir.join(record::FILE).display()
            ),
            FileProblem::Missing { name, .. } => format!(
                "release {id}: {} is missing or unreadable (tampered or damaged)",
                dir.join(name).display()
            ),
            FileProblem::Changed { name, want, got } => format!(
                "release {id}: {} has SHA-256 {got}, but {} records {want}: the file was \
                 changed after the release was made (tampered or damaged); the release \
                 cannot be used",
                dir.join(name).display(),
                record::FILE
            ),
            FileProblem::Unlisted(name) => format!(
                "release {id}: {} is not part of the release ({} does not list it); a file \
                 was added after the release was made (tampered)",
                dir.join(name).display(),
                record::FILE
            ),
        }
    }
}

/// Every file of the release directory against `release.json`: same set of files, same
/// SHA-256 each. Empty when the directory is intact.
pub fn file_problems(dir: &Path, rec: &Record) -> Result<Vec<FileProblem>> {
    let mut problems = Vec::new();
    for (name, want) in &rec.files {
        if !is_inner_path(name) {
            problems.push(FileProblem::BadName(name.clone()));
            continue;
        }
        match std::fs::read(dir.join(name)) {
            Err(_) => problems.push(FileProblem::Missing {
                name: name.clone(),
                want: want.clone(),
            }),
            Ok(bytes) => {
                let got = dist::sha256_hex(&bytes);
                if &got != want {
                    problems.push(FileProblem::Changed {
                        name: name.clone(),
                        want: want.clone(),
                        got,
                    });
                }
            }
        }
    }
    let mut present = Vec::new();
    list_files(dir, dir, &mut present)?;
    for name in present {
        if name != record::FILE && !rec.files.contains_key(&name) {
            problems.push(FileProblem::Unlisted(name));
        }
    }
    Ok(problems)
}

/// Checks every file of the release directory against `release.json`; the first problem
/// is the error.
pub(super) fn verify_files(dir: &Path, rec: &Record) -> Result<()> {
    match file_problems(dir, rec)?.first() {
        Some(p) => Err(anyhow!(p.describe(dir, &rec.id))),
        None => Ok(()),
    }
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

/// Recomputes the release ID from the release's content: its sources, its edge (module
/// without the bake, and glue) and the compiler version its bake names. `read` gives a
/// file's bytes as they will be after repair.
pub fn content_problem(rec: &Record, read: &dyn Fn(&str) -> Option<Vec<u8>>) -> Option<String> {
    let module = read(dist::edge::MODULE)?;
    let glue = read(dist::edge::GLUE_JS)?;
    let policy = read(&rec.sources.policy)?;
    let bake = match bake_header(&module) {
        Ok(b) => b,
        Err(e) => return Some(format!("its module's bake does not decode: {e}")),
    };
    let policy_hash = dist::sha256_hex(&policy);
    let catalog_hash = match (&rec.sources.catalog, &rec.sources.inventory) {
        (Some(c), Some(i)) => crate::validate::stubs::catalog_hash(&read(c)?, &read(i)?),
        _ => String::new(),
    };
    let mut lists = BTreeMap::new();
    for (tier, path) in &rec.sources.lists {
        lists.insert(tier.clone(), dist::sha256_hex(&read(path)?));
    }
    let catalog_hash = crate::publish::curated_hash(&catalog_hash, &lists);
    let clean = match dist::wasm::remove_custom_section(&module, SECTION_NAME) {
        Ok(m) => m,
        Err(e) => return Some(format!("its module is not a valid wasm module: {e}")),
    };
    let edge_hash = dist::edge_hash(&dist::sha256_hex(&clean), &dist::sha256_hex(&glue));
    let id = dist::release_id_by(
        &bake.compiler_version,
        &policy_hash,
        &catalog_hash,
        &edge_hash,
    );
    let mut parts = Vec::new();
    if bake.release_id != rec.id {
        parts.push(format!(
            "its module carries the bake of {}",
            bake.release_id
        ));
    }
    if bake.policy_hash != policy_hash {
        parts.push(format!("{} is not the policy it baked", rec.sources.policy));
    }
    if bake.catalog_hash != catalog_hash {
        parts.push("its catalog or inventory source is not what it baked".to_string());
    }
    if id != rec.id {
        parts.push(format!("its content hashes to {id}"));
    }
    (!parts.is_empty()).then(|| {
        format!(
            "its content no longer hashes to its ID ({}): it was changed after it was made, \
             record and all",
            parts.join("; ")
        )
    })
}

/// The first fields of a bake (postcard keeps fields in declaration order, so a prefix of
/// [`Bake`] decodes from the start of its payload): what identifies it, without decoding
/// the policy and the catalog.
#[derive(serde::Deserialize)]
struct BakeHeader {
    release_id: String,
    policy_hash: String,
    catalog_hash: String,
    #[allow(dead_code)]
    validated_at_ms: u64,
    compiler_version: String,
}

fn bake_header(module: &[u8]) -> std::result::Result<BakeHeader, String> {
    let section = wasm::custom_section(module, SECTION_NAME)
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("the module carries no `{SECTION_NAME}` section"))?;
    let body = section
        .strip_prefix(bake::MAGIC.as_slice())
        .ok_or("the bake is not of this format version")?;
    postcard::take_from_bytes::<BakeHeader>(body)
        .map(|(h, _)| h)
        .map_err(|e| e.to_string())
}
