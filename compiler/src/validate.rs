//! Placeholder until the validator lands.
use std::path::Path;
use understudy_core::Millis;
use crate::load::Loaded;

pub fn load(path: &Path, _now: Millis) -> Loaded {
    Loaded { path: path.to_path_buf(), diagnostics: vec![], policy: None, catalog: None, policy_hash: String::new(), catalog_hash: String::new() }
}
