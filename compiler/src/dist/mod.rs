//! [B-BAKE] [B-DIST] From a validated policy to a directory `wrangler deploy` accepts as it is.
//!
//! The bake (policy + catalog + keyword index, postcard-encoded by `understudy_core::bake`)
//! is spliced as a custom section into a copy of the prebuilt edge module, so a re-bake is
//! a byte splice and never a Rust compile. Everything here is a pure function of its inputs
//! ([`assemble`]); only [`write_dir`] touches the disk. Same inputs, same bytes.
//!
//! The directory holds:
//! - `wrangler.toml`: name, `main`, compatibility date, KV / rate-limit bindings, vars;
//! - `entry.mjs` + `bake.mjs`: the JS entry, publishing the bake to the Rust adapter;
//! - `index.js` + `index_bg.wasm`: worker-build's glue and the baked module;
//! - `manifest.json`: hashes, sizes, validation time, compiler version, release id.

pub mod bindings;
pub mod edge;
pub mod entry;
pub mod manifest;
pub mod wasm;
pub mod wrangler;

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use sha2::{Digest, Sha256};
use understudy_core::bake::{self, BakeRef, SECTION_NAME};
use understudy_core::catalog::Catalog;
use understudy_core::policy::Policy;

use self::bindings::Bindings;
use self::edge::Edge;

use crate::load::Loaded;
use understudy_core::Millis;

pub const COMPILER_VERSION: &str = env!("CARGO_PKG_VERSION");
pub const MANIFEST: &str = "manifest.json";
pub const WRANGLER_TOML: &str = "wrangler.toml";

/// What is baked, besides the prebuilt edge.
pub struct Inputs<'a> {
    pub policy: &'a Policy,
    pub catalog: Option<&'a Catalog>,
    /// SHA-256 (hex) of the policy file's bytes.
    pub policy_hash: &'a str,
    /// SHA-256 (hex) of the catalog and inventory files' bytes ("" when there are none).
    pub catalog_hash: &'a str,
    /// The policy file's name, recorded in the manifest and `wrangler.toml`.
    pub policy_file: &'a str,
    pub validated_at_ms: u64,
}

impl<'a> Inputs<'a> {
    /// The bake input, assembled the one way `build`, `bake`, `releases`, the drills and the
    /// bench all use: the catalog and hashes of a policy `loaded` (validated) as of
    /// `validated_at`, and the policy to bake — the loaded one, or a drill's or the bench's
    /// time-scaled copy of it. `policy_file` is the name [`file_name`] gives.
    pub fn new(
        loaded: &'a Loaded,
        policy: &'a Policy,
        policy_file: &'a str,
        validated_at: Millis,
    ) -> Self {
        Inputs {
            policy,
            catalog: loaded.catalog.as_ref(),
            policy_hash: &loaded.policy_hash,
            catalog_hash: &loaded.catalog_hash,
            policy_file,
            validated_at_ms: validated_at.0,
        }
    }
}

/// The policy file's name as the manifest and `wrangler.toml` record it.
pub fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

/// A built directory, in memory.
pub struct Built {
    pub release_id: String,
    /// File name → bytes, manifest included.
    pub files: BTreeMap<String, Vec<u8>>,
    pub manifest: manifest::Manifest,
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The release id: `r-` and 12 hex digits of a hash over everything that decides what the
/// Worker does — the policy, the catalog, the edge code and the compiler that baked them.
/// The validation time is not in it: re-validating the same inputs is the same release.
pub fn release_id(policy_hash: &str, catalog_hash: &str, edge_hash: &str) -> String {
    release_id_by(COMPILER_VERSION, policy_hash, catalog_hash, edge_hash)
}

/// [`release_id`] as compiler `version` computed it (to check a release an older compiler
/// made).
pub fn release_id_by(
    version: &str,
    policy_hash: &str,
    catalog_hash: &str,
    edge_hash: &str,
) -> String {
    let mut h = Sha256::new();
    for part in [
        "understudy-release-v1",
        policy_hash,
        catalog_hash,
        edge_hash,
        version,
    ] {
        h.update(part.as_bytes());
        h.update(b"\n");
    }
    format!("r-{}", &hex::encode(h.finalize())[..12])
}

/// The edge's part of the release ID: the module without its bake, and the glue.
pub fn edge_hash(clean_module_sha256: &str, glue_sha256: &str) -> String {
    sha256_hex(format!("{clean_module_sha256}\n{glue_sha256}").as_bytes())
}

/// The gzipped size (level 6) of `bytes`: what the `--gzip-limit` start-up budget counts.
pub fn gzip_len(bytes: &[u8]) -> u64 {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(6));
    // Writing into a Vec cannot fail.
    match enc.write_all(bytes).and_then(|()| enc.finish()) {
        Ok(v) => v.len() as u64,
        Err(_) => 0,
    }
}

fn rfc3339(ms: u64) -> Result<String> {
    let t = time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .with_context(|| format!("validation time {ms} ms is out of range"))?;
    t.format(&time::format_description::well_known::Rfc3339)
        .context("cannot format the validation time")
}

/// Bakes `inputs` into `edge` and renders every file of the output directory.
pub fn assemble(inputs: &Inputs<'_>, edge: &Edge) -> Result<Built> {
    let clean_module =
        wasm::remove_custom_section(&edge.module, SECTION_NAME).with_context(|| {
            format!(
                "{}: the prebuilt module is not usable",
                edge.dir.join(edge::MODULE).display()
            )
        })?;
    let edge_info = manifest::Edge {
        glue_sha256: sha256_hex(&edge.glue_js),
        module_sha256: sha256_hex(&clean_module),
    };
    let edge_hash = edge_hash(&edge_info.module_sha256, &edge_info.glue_sha256);
    let release_id = release_id(inputs.policy_hash, inputs.catalog_hash, &edge_hash);

    // Encoded by reference straight into the module: the catalog is neither copied nor
    // held twice (a 200,000-item bake is tens of MiB).
    let the_bake = BakeRef {
        release_id: &release_id,
        policy_hash: inputs.policy_hash,
        catalog_hash: inputs.catalog_hash,
        validated_at_ms: inputs.validated_at_ms,
        compiler_version: COMPILER_VERSION,
        policy: inputs.policy,
        catalog: inputs.catalog,
    };
    let payload_len = bake::encoded_len(&the_bake);
    let (mut module, payload_at) =
        wasm::start_custom_section(clean_module, SECTION_NAME, payload_len)?;
    bake::encode_into(&the_bake, &mut module);
    crate::timing::mark("encode (postcard)");
    // The Worker decodes with the same schema: refuse to ship a bake it would reject.
    bake::check(&module[payload_at..])
        .map_err(|e| anyhow::anyhow!("the bake does not decode back: {e}"))?;
    crate::timing::mark("decode check");

    let bindings = Bindings::of(inputs.policy);
    let mut files: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    files.insert(
        WRANGLER_TOML.into(),
        wrangler::render(
            &inputs.policy.service.name,
            &release_id,
            inputs.policy_file,
            &bindings,
            inputs.policy.service.expected_rps,
        )
        .into_bytes(),
    );
    let classes: Vec<&str> = bindings
        .durable_objects
        .iter()
        .map(|d| d.class_name.as_str())
        .collect();
    files.insert(
        entry::ENTRY.into(),
        entry::entry_js(&classes, &release_id).into_bytes(),
    );
    files.insert(entry::BAKE_JS.into(), entry::bake_js().into_bytes());
    files.insert(edge::GLUE_JS.into(), edge.glue_js.clone());

    let module_info = manifest::Module {
        bake_bytes: payload_len as u64,
        bytes: module.len() as u64,
        file: edge::MODULE.into(),
        sha256: sha256_hex(&module),
    };
    files.insert(edge::MODULE.into(), module);

    let manifest = manifest::Manifest {
        bindings,
        catalog: (!inputs.catalog_hash.is_empty()).then(|| manifest::Hashed {
            sha256: inputs.catalog_hash.to_string(),
        }),
        compiler_version: COMPILER_VERSION.into(),
        edge: edge_info,
        files: files
            .iter()
            .map(|(name, bytes)| (name.clone(), sha256_hex(bytes)))
            .collect(),
        format: manifest::FORMAT,
        module: module_info,
        policy: manifest::Policy {
            file: inputs.policy_file.to_string(),
            service: inputs.policy.service.name.clone(),
            sha256: inputs.policy_hash.to_string(),
            version: inputs.policy.version.clone(),
        },
        release_id: release_id.clone(),
        validated_at: rfc3339(inputs.validated_at_ms)?,
        validated_at_ms: inputs.validated_at_ms,
    };
    files.insert(MANIFEST.into(), manifest.to_json().into_bytes());
    crate::timing::mark("hash + manifest");
    Ok(Built {
        release_id,
        files,
        manifest,
    })
}

/// Whether `dir` is safe to replace: absent, empty, or an earlier `understudy build` output.
fn replaceable(dir: &Path) -> Result<bool> {
    if !dir.exists() {
        return Ok(true);
    }
    if !dir.is_dir() {
        return Ok(false);
    }
    let mut entries =
        std::fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))?;
    if entries.next().is_none() {
        return Ok(true);
    }
    let Ok(text) = std::fs::read_to_string(dir.join(MANIFEST)) else {
        return Ok(false);
    };
    let ours = serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .is_some_and(|v| v.get("release_id").is_some() && v.get("compiler_version").is_some());
    Ok(ours)
}

/// Writes `built` to `out`, replacing an earlier build there as a whole (so no stale file
/// survives), through a sibling temporary directory renamed into place.
pub fn write_dir(out: &Path, built: &Built) -> Result<()> {
    if !replaceable(out)? {
        bail!(
            "{} exists and is not an `understudy build` output (no {MANIFEST} of ours); \
             refusing to replace it — choose another --out",
            out.display()
        );
    }
    let parent = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&parent)
        .with_context(|| format!("cannot create {}", parent.display()))?;
    let base = out
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "dist".into());
    let tmp = parent.join(format!(".{base}.tmp-{}", std::process::id()));
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp)
            .with_context(|| format!("cannot remove {}", tmp.display()))?;
    }
    std::fs::create_dir(&tmp).with_context(|| format!("cannot create {}", tmp.display()))?;
    let result = (|| -> Result<()> {
        for (name, bytes) in &built.files {
            let path = tmp.join(name);
            std::fs::write(&path, bytes)
                .with_context(|| format!("cannot write {}", path.display()))?;
        }
        if out.exists() {
            std::fs::remove_dir_all(out)
                .with_context(|| format!("cannot replace {}", out.display()))?;
        }
        std::fs::rename(&tmp, out)
            .with_context(|| format!("cannot move {} to {}", tmp.display(), out.display()))
    })();
    if result.is_err() {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    result
}

#[cfg(test)]
pub(crate) mod tests;
