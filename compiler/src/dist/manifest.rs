//! `manifest.json`: what a built directory is, for people (which policy, which catalog,
//! validated when, by which compiler) and for tools (release listing, the local runner).
//!
//! Fields are declared in alphabetical order and maps are `BTreeMap`s, so the JSON has
//! sorted keys and is byte-stable. No field depends on where or when the build ran, except
//! the validation time, which is `--now` when given.

use std::collections::BTreeMap;

use serde::Serialize;

use super::bindings::Bindings;

/// Bumped when the manifest's shape changes incompatibly.
pub const FORMAT: u32 = 1;

#[derive(Debug, Serialize)]
pub struct Manifest {
    pub bindings: Bindings,
    pub catalog: Option<Hashed>,
    pub compiler_version: String,
    /// The prebuilt edge the bake went into (the module without any bake, and the glue).
    pub edge: Edge,
    /// Every other file of the directory with its SHA-256.
    pub files: BTreeMap<String, String>,
    pub format: u32,
    pub module: Module,
    pub policy: Policy,
    pub release_id: String,
    /// RFC 3339, UTC.
    pub validated_at: String,
    pub validated_at_ms: u64,
}

#[derive(Debug, Serialize)]
pub struct Hashed {
    pub sha256: String,
}

#[derive(Debug, Serialize)]
pub struct Edge {
    pub glue_sha256: String,
    pub module_sha256: String,
}

#[derive(Debug, Serialize)]
pub struct Module {
    /// Size of the bake payload inside the module.
    pub bake_bytes: u64,
    pub bytes: u64,
    pub file: String,
    pub sha256: String,
}

#[derive(Debug, Serialize)]
pub struct Policy {
    /// The policy file's name (not its path: the output must not depend on the checkout).
    pub file: String,
    pub service: String,
    pub sha256: String,
    pub version: String,
}

impl Manifest {
    pub fn to_json(&self) -> String {
        // Serialising plain structs, strings and integers to a String cannot fail.
        let mut s = serde_json::to_string_pretty(self).unwrap_or_default();
        s.push('\n');
        s
    }
}
