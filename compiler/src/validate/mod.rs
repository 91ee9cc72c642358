//! Phase two: does the policy make sense as a whole? [`check`] is the one validation entry
//! point — `check`, `build`, `bake`, the registry, drills and the bench all come through it —
//! and every rule runs on every part that read, reporting into one list, so one run shows
//! every problem.

mod budget;
pub mod catalog_files;
mod events;
mod expiry;
pub mod explicit;
mod fleet;
pub mod inventory;
pub mod model;
mod params;
mod privacy;
mod rollout;
mod rules;
pub mod stubs;

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use understudy_core::catalog::Catalog;
use understudy_core::policy::Policy;
use understudy_core::Millis;

use crate::codes::Code;
use crate::diag::Diagnostic;
use crate::parse;

pub use crate::files::{read_text, MAX_POLICY_BYTES};
pub use catalog_files::CatalogFiles;

/// The outcome of validating one policy.
#[derive(Debug)]
pub struct Loaded {
    pub path: PathBuf,
    /// Every problem found, errors and warnings, in source order.
    pub diagnostics: Vec<Diagnostic>,
    /// The validated policy; `Some` only when there are no errors.
    pub policy: Option<Policy>,
    /// The validated catalog with its keyword index, when the policy declares one.
    pub catalog: Option<Catalog>,
    /// SHA-256 (hex) of the policy file's bytes.
    pub policy_hash: String,
    /// SHA-256 (hex) of the catalog and inventory files' bytes (empty when there are none).
    pub catalog_hash: String,
    /// Every file read (policy, catalog, inventory) with its text, for rendering spans.
    pub sources: Vec<(PathBuf, String)>,
    /// Parts of the policy that did not read (`[origin]`, `[[cascade.tiers]]`, …): the
    /// rules that need them wait until their errors are fixed.
    pub unread: Vec<&'static str>,
    /// [R-GRADUAL] The policy's `[rollout]` table, lowered (defaults for absent keys);
    /// `None` when the table is absent or did not read.
    pub rollout: Option<crate::slo::Slo>,
}

impl Loaded {
    /// Nothing loaded yet from `path`.
    pub fn empty(path: &Path) -> Loaded {
        Loaded {
            path: path.to_path_buf(),
            diagnostics: Vec::new(),
            policy: None,
            catalog: None,
            policy_hash: String::new(),
            catalog_hash: String::new(),
            sources: Vec::new(),
            unread: Vec::new(),
            rollout: None,
        }
    }

    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(|d| d.is_error())
    }

    pub fn has_warnings(&self) -> bool {
        self.diagnostics.iter().any(|d| !d.is_error())
    }
}

/// Where the policy comes from.
pub enum PolicyInput<'a> {
    /// A policy file on disk.
    File(&'a Path),
    /// Policy text, as if read from `path` (catalog paths resolve next to it).
    Text { path: &'a Path, text: String },
    /// A policy decoded from a bake: already validated, no text to point into. Only its
    /// catalog is checked; policy-side diagnostics name `path` without a span.
    Baked {
        policy: &'a Policy,
        path: &'a Path,
        hash: &'a str,
    },
}

/// Where the catalog and inventory come from.
#[derive(Clone, Copy)]
pub enum CatalogSource<'a> {
    /// The files the policy's `[catalog]` names, relative to the policy.
    Declared,
    /// These files instead (a nightly re-bake validates tonight's export against the policy).
    Files(CatalogFiles<'a>),
    /// None: the command brings its own curated data (`understudy publish`).
    Skip,
}

/// How strict to be about what a policy may make the compiler read.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// Let `catalog.stubs` / `catalog.inventory` lead outside the policy's directory.
    pub allow_outside_paths: bool,
}

pub struct Request<'a> {
    pub policy: PolicyInput<'a>,
    pub catalog: CatalogSource<'a>,
    /// Freshness is judged as of this instant.
    pub now: Millis,
    pub options: Options,
}

/// Collects the diagnostics of one policy.
pub struct Ctx {
    pub file: PathBuf,
    pub diags: Vec<Diagnostic>,
}

impl Ctx {
    pub fn new(file: &Path) -> Ctx {
        Ctx {
            file: file.to_path_buf(),
            diags: Vec::new(),
        }
    }

    /// A diagnostic about the policy file.
    pub fn diag(&self, code: Code, message: impl Into<String>) -> Diagnostic {
        Diagnostic::new(code, &self.file, message)
    }

    pub fn push(&mut self, d: Diagnostic) {
        self.diags.push(d);
    }
}

/// The one validation entry point.
pub fn check(req: Request<'_>) -> Loaded {
    let (path, text) = match req.policy {
        PolicyInput::File(path) => match read_text(path, MAX_POLICY_BYTES) {
            Ok(t) => (path, t),
            Err(msg) => {
                let mut loaded = Loaded::empty(path);
                loaded.diagnostics.push(
                    Diagnostic::new(Code::PolicyUnreadable, path, msg)
                        .help("check the path and that the file is a UTF-8 TOML policy"),
                );
                return loaded;
            }
        },
        PolicyInput::Text { path, text } => (path, text),
        PolicyInput::Baked { policy, path, hash } => {
            return explicit::check_baked(policy, path, hash, req.now, req.catalog, req.options)
        }
    };
    let mut loaded = Loaded::empty(path);
    loaded.policy_hash = hex::encode(Sha256::digest(text.as_bytes()));
    let parsed = parse::parse(path, &text);
    loaded.sources.push((path.to_path_buf(), text));
    let mut ctx = Ctx::new(path);
    ctx.diags = parsed.diagnostics;
    let mut policy = None;
    if let Some(raw) = &parsed.raw {
        let model = model::Model::new(raw);
        loaded.unread = model.unread();
        loaded.rollout = model.rollout.read().flatten().map(|r| r.0.clone());
        rules::check_all(&mut ctx, &model);
        let base = path.parent().unwrap_or(Path::new("."));
        if let (model::Opt::Ok((rules, raw_catalog)), false) =
            (&model.catalog, matches!(req.catalog, CatalogSource::Skip))
        {
            let files = match req.catalog {
                CatalogSource::Files(f) => catalog_files::Files::Given(f),
                CatalogSource::Declared | CatalogSource::Skip => catalog_files::Files::Declared {
                    base,
                    allow_outside: req.options.allow_outside_paths,
                },
            };
            let keyword_index = model.tiers().any(|(_, t)| {
                matches!(
                    t.model.kind,
                    understudy_core::policy::TierKind::Embedded(
                        understudy_core::policy::EmbeddedTier::Keyword { .. }
                    )
                )
            });
            if let Some(c) = stubs::check_catalog(
                &mut ctx,
                rules,
                Some(raw_catalog),
                files,
                keyword_index,
                req.now,
            ) {
                loaded.catalog_hash = c.hash;
                loaded.sources.extend(c.sources);
                if let Some(catalog) = &c.catalog {
                    expiry::stubs_expire(&mut ctx, &model, catalog);
                }
                loaded.catalog = c.catalog;
            }
        }
        if !ctx.diags.iter().any(Diagnostic::is_error) {
            policy = model.policy();
            if policy.is_none() {
                // Every part that fails reports why; this is a safety net, never a pass.
                ctx.push(
                    ctx.diag(
                        Code::MissingKey,
                        format!(
                            "the policy read without errors but is incomplete ({}): this is a bug in the compiler, please report it",
                            model.unread().join(", ")
                        ),
                    )
                    .help("run `understudy check` on the file and include it in the report"),
                );
            }
        }
    }
    finish(loaded, ctx, policy)
}

/// Sorts the diagnostics (by file, then position) and keeps the policy and catalog only
/// when nothing is an error.
pub(crate) fn finish(mut loaded: Loaded, mut ctx: Ctx, policy: Option<Policy>) -> Loaded {
    ctx.diags.sort_by(|a, b| {
        (a.file.clone(), a.span.map(|s| s.0)).cmp(&(b.file.clone(), b.span.map(|s| s.0)))
    });
    let ok = !ctx.diags.iter().any(Diagnostic::is_error);
    loaded.diagnostics = ctx.diags;
    loaded.policy = if ok { policy } else { None };
    if loaded.policy.is_none() {
        loaded.catalog = None;
    }
    loaded
}

/// Validates the policy file at `path` as of `now` with its declared catalog.
pub fn load(path: &Path, now: Millis) -> Loaded {
    check(Request {
        policy: PolicyInput::File(path),
        catalog: CatalogSource::Declared,
        now,
        options: Options::default(),
    })
}

/// Validates the policy in `text` (as if read from `path`) without reading its catalog:
/// for commands that bring their own curated data (`understudy publish`).
pub fn load_text_without_catalog(path: &Path, text: String) -> Loaded {
    check(Request {
        policy: PolicyInput::Text { path, text },
        catalog: CatalogSource::Skip,
        now: Millis(0),
        options: Options::default(),
    })
}

/// Validates policy `text` as if read from `path` (catalog paths resolve next to it).
pub fn load_text(path: &Path, text: String, now: Millis) -> Loaded {
    check(Request {
        policy: PolicyInput::Text { path, text },
        catalog: CatalogSource::Declared,
        now,
        options: Options::default(),
    })
}
