//! Loading a policy file for a command: `check`, `build`, `bake`, `token`, drills and the
//! bench start here. It is a door into the one validation entry point
//! ([`crate::validate::check`]); the outcome type lives there, so `validate` never needs
//! this module (no cycle).

use std::path::Path;

use understudy_core::Millis;

use crate::validate::{check, CatalogSource, PolicyInput, Request};
pub use crate::validate::{Loaded, Options};

/// Loads and validates the policy at `path` as of `now`.
pub fn load_policy(path: &Path, now: Millis) -> Loaded {
    load_policy_with(path, now, Options::default())
}

/// [`load_policy`] with options (`--allow-outside-paths`).
pub fn load_policy_with(path: &Path, now: Millis, options: Options) -> Loaded {
    check(Request {
        policy: PolicyInput::File(path),
        catalog: CatalogSource::Declared,
        now,
        options,
    })
}
