//! The baked artifact: the validated policy and catalog, serialised deterministically.
//!
//! The compiler writes it into a custom section of the Worker's `.wasm` (see
//! `docs/adr/001-custom-section.md`), so re-baking a catalog is a byte splice, not a Rust
//! compile. The Worker reads it once per isolate. A payload that is missing, truncated or
//! of another format version is an error the Worker answers with a 503, never a crash.

use serde::{Deserialize, Serialize};

use crate::catalog::Catalog;
use crate::policy::Policy;

/// Name of the `.wasm` custom section holding the bake.
pub const SECTION_NAME: &str = "understudy.bake";
/// First bytes of every bake payload.
pub const MAGIC: &[u8; 8] = b"USTUDY\x00\x01";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bake {
    /// Release identifier, served as `X-Policy-Version`.
    pub release_id: String,
    /// SHA-256 (hex) of the policy source and of the catalog inputs.
    pub policy_hash: String,
    pub catalog_hash: String,
    /// When the compiler validated the inputs (ms since epoch).
    pub validated_at_ms: u64,
    pub compiler_version: String,
    pub policy: Policy,
    pub catalog: Option<Catalog>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BakeError {
    Missing,
    BadMagic,
    Corrupt(String),
}

impl std::fmt::Display for BakeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BakeError::Missing => write!(f, "the module carries no `{SECTION_NAME}` section; build it with `understudy build`"),
            BakeError::BadMagic => write!(f, "the `{SECTION_NAME}` section is not an Understudy bake of this format version; re-bake with this compiler"),
            BakeError::Corrupt(e) => write!(f, "the `{SECTION_NAME}` section is corrupt ({e}); re-bake it"),
        }
    }
}

impl std::error::Error for BakeError {}

pub fn encode(bake: &Bake) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    // postcard serialisation of plain types cannot fail except on allocation failure.
    match postcard::to_allocvec(bake) {
        Ok(body) => out.extend_from_slice(&body),
        Err(e) => unreachable_encode(e),
    }
    out
}

#[cold]
fn unreachable_encode(e: postcard::Error) -> ! {
    // ok: encoding runs in the compiler only, where an allocation failure aborts anyway.
    panic!("postcard could not encode the bake: {e}")
}

pub fn decode(bytes: &[u8]) -> Result<Bake, BakeError> {
    if bytes.is_empty() {
        return Err(BakeError::Missing);
    }
    let body = bytes
        .strip_prefix(MAGIC.as_slice())
        .ok_or(BakeError::BadMagic)?;
    let (bake, rest) =
        postcard::take_from_bytes::<Bake>(body).map_err(|e| BakeError::Corrupt(e.to_string()))?;
    if !rest.is_empty() {
        return Err(BakeError::Corrupt(format!("{} trailing bytes", rest.len())));
    }
    Ok(bake)
}
