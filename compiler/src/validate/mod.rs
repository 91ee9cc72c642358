//! Phase two: does the parsed policy make sense as a whole? Every rule runs and reports
//! into the same list, so one `check` shows every problem.

mod events;
pub mod explicit;
pub mod inventory;
mod rules;
pub mod stubs;

use std::path::Path;

use sha2::{Digest, Sha256};
use understudy_core::Millis;

use crate::codes;
use crate::diag::{Diagnostic, Severity};
use crate::load::Loaded;
use crate::parse::{self, node::Ctx};

/// Policies are small; anything larger is a mistake (or an attack on the compiler).
pub const MAX_POLICY_BYTES: u64 = 1 << 20;

pub fn load(path: &Path, now: Millis) -> Loaded {
    let mut loaded = Loaded::empty(path);
    let text = match read_text(path, MAX_POLICY_BYTES) {
        Ok(t) => t,
        Err(msg) => {
            loaded.diagnostics.push(file_error(
                codes::POLICY_UNREADABLE,
                path,
                msg,
                "check the path and that the file is a UTF-8 TOML policy",
            ));
            return loaded;
        }
    };
    load_source(loaded, text, now)
}

/// Validates policy `text` as if read from `path` (catalog paths resolve next to it).
pub fn load_text(path: &Path, text: String, now: Millis) -> Loaded {
    let loaded = Loaded::empty(path);
    load_source(loaded, text, now)
}

/// Validates the policy in `text` (as if read from `path`) without reading its catalog:
/// for commands that bring their own curated data (`understudy publish`).
pub fn load_text_without_catalog(path: &Path, text: String) -> Loaded {
    let mut loaded = Loaded::empty(path);
    loaded.policy_hash = hex::encode(Sha256::digest(text.as_bytes()));
    let mut ctx = Ctx::new(path.to_path_buf());
    ctx.text = text.clone();
    let policy = parse::parse(&mut ctx, &text);
    loaded.sources.push((path.to_path_buf(), text));
    if let Some(policy) = policy {
        rules::check_all(&mut ctx, &policy);
        if !ctx.diags.iter().any(Diagnostic::is_error) {
            loaded.policy = Some(policy);
        }
    }
    loaded.diagnostics = ctx.diags;
    loaded
}

fn load_source(mut loaded: Loaded, text: String, now: Millis) -> Loaded {
    let path = loaded.path.clone();
    let path = path.as_path();
    loaded.policy_hash = hex::encode(Sha256::digest(text.as_bytes()));
    let mut ctx = Ctx::new(path.to_path_buf());
    ctx.text = text.clone();
    let policy = parse::parse(&mut ctx, &text);
    loaded.sources.push((path.to_path_buf(), text));
    if let Some(policy) = policy {
        rules::check_all(&mut ctx, &policy);
        events::check(&mut ctx, &policy);
        let base = path.parent().unwrap_or(Path::new("."));
        let cat = stubs::check_catalog(&mut ctx, &policy, base, now);
        if let Some(c) = cat {
            loaded.catalog_hash = c.hash;
            loaded.catalog = c.catalog;
            loaded.sources.extend(c.sources);
        }
        if !ctx.diags.iter().any(Diagnostic::is_error) {
            loaded.policy = Some(policy);
        }
    }
    ctx.diags.sort_by(|a, b| {
        (a.file.clone(), a.span.map(|s| s.0)).cmp(&(b.file.clone(), b.span.map(|s| s.0)))
    });
    loaded.diagnostics = ctx.diags;
    if loaded.policy.is_none() {
        loaded.catalog = None;
    }
    loaded
}

/// Reads a UTF-8 file of at most `max` bytes, with a message naming what went wrong.
pub fn read_text(path: &Path, max: u64) -> Result<String, String> {
    let meta =
        std::fs::metadata(path).map_err(|e| format!("cannot read `{}`: {e}", path.display()))?;
    if !meta.is_file() {
        return Err(format!("`{}` is not a file", path.display()));
    }
    if meta.len() > max {
        return Err(format!(
            "`{}` is {} bytes, over the {} byte limit",
            path.display(),
            meta.len(),
            max
        ));
    }
    let bytes =
        std::fs::read(path).map_err(|e| format!("cannot read `{}`: {e}", path.display()))?;
    String::from_utf8(bytes).map_err(|e| {
        format!(
            "`{}` is not UTF-8 (invalid byte at offset {})",
            path.display(),
            e.utf8_error().valid_up_to()
        )
    })
}

pub fn file_error(code: &'static str, path: &Path, message: String, help: &str) -> Diagnostic {
    Diagnostic {
        code,
        severity: Severity::Error,
        message,
        file: path.to_path_buf(),
        span: None,
        label: String::new(),
        secondary: Vec::new(),
        notes: Vec::new(),
        help: help.to_string(),
    }
}
