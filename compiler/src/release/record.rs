//! `release.json`: what a release is (which policy, which catalog, validated when, made
//! from what) and the SHA-256 of every other file in its directory, so that a file changed
//! after the fact is caught before the release is listed as intact, promoted or rolled to.
//!
//! Fields are declared in alphabetical order and maps are `BTreeMap`s: sorted keys,
//! byte-stable JSON, like `manifest.json`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Bumped when the record's shape changes incompatibly.
pub const FORMAT: u32 = 1;
pub const FILE: &str = "release.json";

/// How a release came to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// `understudy releases add POLICY`: a policy with the catalog it names.
    Build,
    /// `understudy bake`: a release's policy with a new catalog and inventory snapshot.
    Bake,
    /// `understudy releases rollback`: an earlier policy re-paired with the current catalog.
    Rollback,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Build => "build",
            Kind::Bake => "bake",
            Kind::Rollback => "rollback",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Record {
    pub catalog: Option<CatalogInfo>,
    /// When the release was written into the registry (RFC 3339, UTC; `--now` when given).
    pub created_at: String,
    pub created_at_ms: u64,
    /// Every file of the release directory except this one → SHA-256 (hex).
    pub files: BTreeMap<String, String>,
    pub format: u32,
    pub id: String,
    pub kind: Kind,
    pub module: ModuleInfo,
    /// One line for people: what this release is for.
    pub note: String,
    /// The release this one was derived from (re-baked from, rolled back from).
    pub parent: Option<String>,
    pub policy: PolicyInfo,
    /// KV tiers published with the release (`bake --publish`), loaded by its deploy.sh.
    #[serde(default)]
    pub published: Vec<PublishedInfo>,
    pub service: String,
    pub sources: SourcesInfo,
    pub validated_at: String,
    pub validated_at_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CatalogInfo {
    /// The stubs count.
    pub items: u64,
    /// The policy's validation ceiling (`catalog.max_age`).
    pub max_age_ms: u64,
    /// `refuse` or `disclose`: what the edge does past the ceiling.
    pub on_expired: String,
    pub sha256: String,
    /// When the inventory snapshot was taken: the catalog's age counts from here.
    pub snapshot_at: String,
    pub snapshot_at_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModuleInfo {
    pub bytes: u64,
    /// Measured only with a gzip budget (`--gzip-limit`); older releases always have it.
    pub gzip_bytes: Option<u64>,
    pub sha256: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyInfo {
    pub file: String,
    pub sha256: String,
    pub version: String,
}

/// Where the sources the release was made from lie, relative to the release directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourcesInfo {
    pub catalog: Option<String>,
    pub inventory: Option<String>,
    /// Published tier → its lists file.
    #[serde(default)]
    pub lists: BTreeMap<String, String>,
    pub policy: String,
}

/// A KV tier published with the release.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PublishedInfo {
    pub binding: String,
    /// When the edge stops answering from these entries (snapshot + the tier's ceiling).
    pub expires_at: String,
    pub expires_at_ms: u64,
    /// The `wrangler kv bulk put` file in the release directory.
    pub file: String,
    pub items: u64,
    pub keys: u64,
    pub snapshot_at_ms: u64,
    pub tier: String,
    pub validated_at_ms: u64,
}

impl Record {
    pub fn to_json(&self) -> String {
        // Plain structs, strings and integers: serialising to a String cannot fail.
        let mut s = serde_json::to_string_pretty(self).unwrap_or_default();
        s.push('\n');
        s
    }
}

/// RFC 3339 (UTC, whole seconds) of `ms` since the epoch.
pub fn rfc3339(ms: u64) -> String {
    let secs = i64::try_from(ms / 1000).unwrap_or(i64::MAX);
    time::OffsetDateTime::from_unix_timestamp(secs)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_else(|| format!("{ms} ms since 1970"))
}

/// Whether `id` looks like a release ID (`r-` and 12 lower-case hex digits).
pub fn is_release_id(id: &str) -> bool {
    id.strip_prefix("r-").is_some_and(|h| {
        h.len() == 12
            && h.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn release_ids_are_recognised() {
        assert!(is_release_id("r-0123456789ab"));
        assert!(!is_release_id("r-0123456789AB"));
        assert!(!is_release_id("r-0123"));
        assert!(!is_release_id("../etc"));
    }

    #[test]
    fn times_render_as_rfc3339() {
        assert_eq!(rfc3339(1_764_464_400_000), "2025-11-30T01:00:00Z");
    }
}
