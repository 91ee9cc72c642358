//! Validation with the catalog and inventory named explicitly, for `understudy bake` and
//! the release registry: the policy file says `stubs = "recommendations.catalog.json"`, but
//! a nightly re-bake validates tonight's export, wherever it lies, against that policy.
//!
//! The checks are exactly `check`'s — these are thin doors into [`super::check`]; only
//! where the two JSON files are read from changes. The policy that comes back is the
//! policy as written (its `catalog.stubs` / `catalog.inventory` keep their declared
//! values), so its hash and its bake do not depend on where tonight's files were.

use std::path::Path;

use understudy_core::policy::Policy;
use understudy_core::Millis;

use super::catalog_files::{CatalogFiles, Files};
use super::{CatalogSource, Ctx, Loaded, Options, PolicyInput, Request};

/// Validates policy `text` (as if read from `path`) with its catalog read from `files`.
/// A policy without a `[catalog]` table validates as usual and ignores `files`.
pub fn load_text_with_catalog(
    path: &Path,
    text: String,
    now: Millis,
    files: CatalogFiles<'_>,
) -> Loaded {
    super::check(Request {
        policy: PolicyInput::Text { path, text },
        catalog: CatalogSource::Files(files),
        now,
        options: Options::default(),
    })
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
    super::check(Request {
        policy: PolicyInput::Baked {
            policy,
            path: policy_file,
            hash: policy_hash,
        },
        catalog: CatalogSource::Files(files),
        now,
        options: Options::default(),
    })
}

/// [`PolicyInput::Baked`]: only the catalog is checked.
pub(super) fn check_baked(
    policy: &Policy,
    path: &Path,
    hash: &str,
    now: Millis,
    catalog: CatalogSource<'_>,
    options: Options,
) -> Loaded {
    let mut loaded = Loaded::empty(path);
    loaded.policy_hash = hash.to_string();
    let mut ctx = Ctx::new(path);
    if let (Some(rules), false) = (&policy.catalog, matches!(catalog, CatalogSource::Skip)) {
        let files = match catalog {
            CatalogSource::Files(f) => Files::Given(f),
            CatalogSource::Declared | CatalogSource::Skip => Files::Declared {
                base: path.parent().unwrap_or(Path::new(".")),
                allow_outside: options.allow_outside_paths,
            },
        };
        let keyword_index = super::stubs::needs_keyword_index(policy);
        if let Some(c) =
            super::stubs::check_catalog(&mut ctx, rules, None, files, keyword_index, now)
        {
            loaded.catalog_hash = c.hash;
            if let Some(catalog) = &c.catalog {
                super::expiry::baked_stubs_expire(&mut ctx, policy, catalog);
            }
            loaded.catalog = c.catalog;
            loaded.sources.extend(c.sources);
        }
    }
    // Without text, a span would point at nothing: make those file-level.
    for d in &mut ctx.diags {
        if d.file == path {
            d.span = None;
        }
    }
    super::finish(loaded, ctx, Some(policy.clone()))
}
