//! Validation with the catalog and inventory named explicitly, for `understudy bake` and
//! the release registry: the policy file says `stubs = "recommendations.catalog.json"`, but
//! a nightly re-bake validates tonight's export, wherever it lies, against that policy.
//!
//! The checks are exactly `check`'s (every rule, then [C-STUBS]); only where the two JSON
//! files are read from changes. The policy that comes back is the policy as written (its
//! `catalog.stubs` / `catalog.inventory` keep their declared values), so its hash and its
//! bake do not depend on where tonight's files were.

use std::io::Read as _;
use std::path::Path;

use sha2::{Digest, Sha256};
use understudy_core::policy::Policy;
use understudy_core::Millis;

use crate::codes;
use crate::diag::Diagnostic;
use crate::load::Loaded;
use crate::parse::{self, node::Ctx};

/// The catalog and inventory snapshot files to validate against.
#[derive(Debug, Clone, Copy)]
pub struct CatalogFiles<'a> {
    pub stubs: &'a Path,
    pub inventory: &'a Path,
}

/// A catalog export in the wrong encoding often still "reads": UTF-16 text of ASCII is
/// valid UTF-8 with a NUL after every letter, and serde_json then reports a baffling
/// syntax error. Name the encoding instead.
pub fn encoding_problem(path: &Path) -> Option<Diagnostic> {
    // The first 64 KiB tell: a byte-order mark, or NULs between ASCII letters.
    let mut bytes = Vec::with_capacity(64 << 10);
    std::fs::File::open(path)
        .ok()?
        .take(64 << 10)
        .read_to_end(&mut bytes)
        .ok()?;
    let problem = if bytes.starts_with(&[0xff, 0xfe]) || bytes.starts_with(&[0xfe, 0xff]) {
        "is UTF-16 (it starts with a UTF-16 byte-order mark)".to_string()
    } else if bytes.starts_with(&[0xef, 0xbb, 0xbf]) {
        "starts with a UTF-8 byte-order mark, which JSON does not allow".to_string()
    } else if let Some(at) = bytes.iter().position(|&b| b == 0) {
        format!("contains a NUL byte at offset {at}: it is probably UTF-16 or UTF-32, not UTF-8")
    } else {
        return None;
    };
    Some(super::file_error(
        codes::CATALOG_UNREADABLE,
        path,
        format!("`{}` {problem}", path.display()),
        "export the catalog and the inventory snapshot as UTF-8 JSON without a byte-order mark",
    ))
}

/// The encoding problems of both files; when there is one, the catalog check is skipped
/// (its JSON errors would only restate it, less clearly).
fn encoding_problems(files: CatalogFiles<'_>) -> Vec<Diagnostic> {
    [files.stubs, files.inventory]
        .into_iter()
        .filter_map(encoding_problem)
        .collect()
}

fn empty(path: &Path) -> Loaded {
    Loaded {
        path: path.to_path_buf(),
        diagnostics: Vec::new(),
        policy: None,
        catalog: None,
        policy_hash: String::new(),
        catalog_hash: String::new(),
        sources: Vec::new(),
    }
}

/// A copy of `policy` whose catalog rules point at `files` (absolute or relative to the
/// current directory), for [`super::stubs::check_catalog`] with an empty base.
fn pointed_at(policy: &Policy, files: CatalogFiles<'_>) -> Policy {
    let mut p = policy.clone();
    if let Some(rules) = p.catalog.as_mut() {
        rules.stubs = files.stubs.display().to_string();
        rules.inventory = files.inventory.display().to_string();
    }
    p
}

/// Validates policy `text` (as if read from `path`) with its catalog read from `files`.
/// A policy without a `[catalog]` table validates as usual and ignores `files`.
pub fn load_text_with_catalog(
    path: &Path,
    text: String,
    now: Millis,
    files: CatalogFiles<'_>,
) -> Loaded {
    let mut loaded = empty(path);
    loaded.policy_hash = hex::encode(Sha256::digest(text.as_bytes()));
    let mut ctx = Ctx::new(path.to_path_buf());
    ctx.text = text.clone();
    let policy = parse::parse(&mut ctx, &text);
    loaded.sources.push((path.to_path_buf(), text));
    if let Some(policy) = policy {
        super::rules::check_all(&mut ctx, &policy);
        let pointed = pointed_at(&policy, files);
        let encoding = encoding_problems(files);
        if !encoding.is_empty() && policy.catalog.is_some() {
            ctx.diags.extend(encoding);
        } else if let Some(c) = super::stubs::check_catalog(&mut ctx, &pointed, Path::new(""), now)
        {
            loaded.catalog_hash = c.hash;
            loaded.catalog = c.catalog;
            loaded.sources.extend(c.sources);
        }
        if !ctx.diags.iter().any(Diagnostic::is_error) {
            loaded.policy = Some(policy);
        }
    }
    finish(loaded, ctx)
}

/// Validates `files` against an already validated `policy` (decoded from a bake, so there
/// is no TOML text to point into: policy-side diagnostics name `policy_file` without a
/// span). `policy_hash` is carried through unchanged.
pub fn check_policy_catalog(
    policy: &Policy,
    policy_file: &Path,
    policy_hash: &str,
    now: Millis,
    files: CatalogFiles<'_>,
) -> Loaded {
    let mut loaded = empty(policy_file);
    loaded.policy_hash = policy_hash.to_string();
    let mut ctx = Ctx::new(policy_file.to_path_buf());
    let pointed = pointed_at(policy, files);
    let encoding = encoding_problems(files);
    if !encoding.is_empty() && policy.catalog.is_some() {
        ctx.diags.extend(encoding);
    } else if let Some(c) = super::stubs::check_catalog(&mut ctx, &pointed, Path::new(""), now) {
        loaded.catalog_hash = c.hash;
        loaded.catalog = c.catalog;
        loaded.sources.extend(c.sources);
    }
    // Without text, a "span" of (0, 0) would point at nothing: make those file-level.
    for d in &mut ctx.diags {
        if d.file == policy_file {
            d.span = None;
        }
    }
    if !ctx.diags.iter().any(Diagnostic::is_error) {
        loaded.policy = Some(policy.clone());
    }
    finish(loaded, ctx)
}

fn finish(mut loaded: Loaded, mut ctx: Ctx) -> Loaded {
    ctx.diags.sort_by(|a, b| {
        (a.file.clone(), a.span.map(|s| s.0)).cmp(&(b.file.clone(), b.span.map(|s| s.0)))
    });
    loaded.diagnostics = ctx.diags;
    if loaded.policy.is_none() {
        loaded.catalog = None;
    }
    loaded
}
