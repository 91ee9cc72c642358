//! Loading a policy: read the file, parse it, validate it with its catalog and
//! inventory, and hand back everything later stages need. `check`, `build` and `bake` all
//! start here, so they agree on what is valid.

use std::path::{Path, PathBuf};

use understudy_core::catalog::Catalog;
use understudy_core::policy::Policy;
use understudy_core::Millis;

use crate::diag::Diagnostic;

/// The outcome of loading one policy file.
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
        }
    }

    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(|d| d.is_error())
    }
}

/// Loads and validates the policy at `path` as of `now`.
pub fn load_policy(path: &Path, now: Millis) -> Loaded {
    crate::validate::load(path, now)
}
