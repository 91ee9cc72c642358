//! [R-VERSION] Which Workers version each release was uploaded as:
//! `REGISTRY/versions/<release>.json`, written as ADR 008 writes the history — the upload is
//! recorded as intended before wrangler runs and as done, with its version ID, after. An
//! upload whose result was lost (the command killed after Cloudflare took it) leaves the
//! intent; the next `releases upload` finds the version again by its tag
//! (`wrangler versions list --json`) instead of uploading a second copy.

use std::path::PathBuf;

use anyhow::{bail, Context as _, Result};
use serde::{Deserialize, Serialize};

use super::record::is_release_id;
use super::registry::{write_atomic, Registry};

pub const DIR: &str = "versions";
pub const FORMAT: u32 = 1;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Uploaded {
    pub format: u32,
    pub release: String,
    /// The Worker's name (its `wrangler.toml`).
    pub worker: String,
    /// `None` while the upload is only intended (or its result was lost).
    pub version_id: Option<String>,
    pub message: String,
    pub intended_at_ms: u64,
    pub uploaded_at_ms: Option<u64>,
}

pub fn path(reg: &Registry, release: &str) -> PathBuf {
    reg.root.join(DIR).join(format!("{release}.json"))
}

pub fn write(reg: &Registry, u: &Uploaded) -> Result<()> {
    let dir = reg.root.join(DIR);
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut text = serde_json::to_string_pretty(u).context("version record")?;
    text.push('\n');
    write_atomic(&path(reg, &u.release), text.as_bytes())
}

pub fn read(reg: &Registry, release: &str) -> Result<Option<Uploaded>> {
    if !is_release_id(release) {
        bail!("`{release}` is not a release ID");
    }
    let p = path(reg, release);
    let text = match std::fs::read_to_string(&p) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", p.display())),
    };
    let u: Uploaded = serde_json::from_str(&text)
        .with_context(|| format!("{}: not a version record", p.display()))?;
    if u.format != FORMAT || u.release != release {
        bail!(
            "{}: a version record of format {} for {}",
            p.display(),
            u.format,
            u.release
        );
    }
    Ok(Some(u))
}

/// The version ID `release` was uploaded as, or an error saying how to upload it.
pub fn version_of(reg: &Registry, release: &str) -> Result<String> {
    match read(reg, release)? {
        Some(Uploaded {
            version_id: Some(v),
            ..
        }) => Ok(v),
        _ => bail!(
            "release {release} has no Workers version yet; upload it with `understudy releases \
             upload {release} --registry {}`",
            reg.root.display()
        ),
    }
}
