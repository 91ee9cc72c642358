//! The baked artifact: the validated policy and catalog, serialised deterministically.
//!
//! The compiler writes it into a custom section of the Worker's `.wasm` (see
//! `docs/adr/001-custom-section.md`), so re-baking a catalog is a byte splice, not a Rust
//! compile. The Worker reads it once per isolate. A payload that is missing, truncated or
//! of another format version is an error the Worker answers with a 503, never a crash.

use serde::{Deserialize, Serialize};

use crate::catalog::{Catalog, Item};
use crate::policy::Policy;

/// Name of the `.wasm` custom section holding the bake.
pub const SECTION_NAME: &str = "understudy.bake";
/// First bytes of every bake payload.
/// The last byte is the format version: bumped whenever the policy model's shape changes
/// (2 named two different shapes on two branches — keyword tiers' `no_match` and hashed key
/// templates on one, the `[events]` section on the other; 3: both together), so an older
/// Worker refuses a newer bake by name instead of misreading it.
pub const MAGIC: &[u8; 8] = b"USTUDY\x00\x03";

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

/// A [`Bake`] by reference: the same fields in the same order, so it encodes to the same
/// bytes without the compiler copying a 200,000-item catalog to encode it.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct BakeRef<'a> {
    pub release_id: &'a str,
    pub policy_hash: &'a str,
    pub catalog_hash: &'a str,
    pub validated_at_ms: u64,
    pub compiler_version: &'a str,
    pub policy: &'a Policy,
    pub catalog: Option<&'a Catalog>,
}

impl Bake {
    pub fn as_ref(&self) -> BakeRef<'_> {
        BakeRef {
            release_id: &self.release_id,
            policy_hash: &self.policy_hash,
            catalog_hash: &self.catalog_hash,
            validated_at_ms: self.validated_at_ms,
            compiler_version: &self.compiler_version,
            policy: &self.policy,
            catalog: self.catalog.as_ref(),
        }
    }
}

/// A decoded bake whose strings borrow from the payload: what [`check`] decodes, with
/// the same field order and shapes as [`Bake`] (a test keeps them in step).
#[derive(Deserialize)]
struct BakeView<'a> {
    #[serde(borrow)]
    _release_id: &'a str,
    _policy_hash: &'a str,
    _catalog_hash: &'a str,
    _validated_at_ms: u64,
    _compiler_version: &'a str,
    _policy: Policy,
    #[serde(borrow)]
    _catalog: Option<CatalogView<'a>>,
}

#[derive(Deserialize)]
struct CatalogView<'a> {
    #[serde(borrow)]
    _items: Each<ItemView<'a>>,
    _validated_at_ms: u64,
    _snapshot_at_ms: u64,
    #[serde(borrow)]
    _tokens: Each<(&'a str, Each<u32>)>,
}

/// A sequence whose elements are decoded one by one and dropped: checked, never collected
/// (a 200,000-item catalog checked without a 200,000-element vector).
struct Each<T>(std::marker::PhantomData<T>);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Each<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> serde::de::Visitor<'de> for V<T> {
            type Value = Each<T>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a sequence")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Each<T>, A::Error> {
                while seq.next_element::<T>()?.is_some() {}
                Ok(Each(std::marker::PhantomData))
            }
        }
        d.deserialize_seq(V(std::marker::PhantomData))
    }
}

#[derive(Deserialize)]
struct ItemView<'a> {
    _sku: &'a str,
    _title: &'a str,
    _category: Option<&'a str>,
    _json: &'a str,
}

/// Keeps [`ItemView`] and [`Item`] in step: a field added to one must be added to both.
const _: fn(Item) = |i| {
    let Item {
        sku: _,
        title: _,
        category: _,
        json: _,
    } = i;
};

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
    let mut out = Vec::with_capacity(encoded_len(&bake.as_ref()));
    encode_into(&bake.as_ref(), &mut out);
    out
}

/// The length of the payload [`encode_into`] writes.
pub fn encoded_len(bake: &BakeRef<'_>) -> usize {
    // postcard serialisation of plain types cannot fail except on allocation failure.
    match postcard::serialize_with_flavor(bake, postcard::ser_flavors::Size::default()) {
        Ok(n) => MAGIC.len() + n,
        Err(e) => unreachable_encode(e),
    }
}

/// Appends the payload (magic, then the postcard body) to `out`.
pub fn encode_into(bake: &BakeRef<'_>, out: &mut Vec<u8>) {
    out.extend_from_slice(MAGIC);
    let taken = std::mem::take(out);
    match postcard::to_extend(bake, taken) {
        Ok(v) => *out = v,
        Err(e) => unreachable_encode(e),
    }
}

/// Whether `bytes` decodes as a bake, as [`decode`] would, without copying its strings.
pub fn check(bytes: &[u8]) -> Result<(), BakeError> {
    if bytes.is_empty() {
        return Err(BakeError::Missing);
    }
    let body = bytes
        .strip_prefix(MAGIC.as_slice())
        .ok_or(BakeError::BadMagic)?;
    let (_view, rest) = postcard::take_from_bytes::<BakeView<'_>>(body)
        .map_err(|e| BakeError::Corrupt(e.to_string()))?;
    if !rest.is_empty() {
        return Err(BakeError::Corrupt(format!("{} trailing bytes", rest.len())));
    }
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{seed_catalog, seed_policy};

    fn sample() -> Bake {
        Bake {
            release_id: "r-0123456789ab".into(),
            policy_hash: "aa".into(),
            catalog_hash: "bb".into(),
            validated_at_ms: 1_764_464_400_000,
            compiler_version: "0.1.0".into(),
            policy: seed_policy(),
            catalog: Some(seed_catalog()),
        }
    }

    #[test]
    fn encoding_by_reference_gives_the_bytes_of_the_owned_bake() {
        let b = sample();
        let mut owned = MAGIC.to_vec();
        owned.extend_from_slice(&postcard::to_allocvec(&b).unwrap());
        assert_eq!(encode(&b), owned);
        assert_eq!(encoded_len(&b.as_ref()), owned.len());
        assert_eq!(decode(&owned).unwrap(), b);
    }

    #[test]
    fn check_accepts_what_decode_accepts_and_nothing_else() {
        let bytes = encode(&sample());
        assert_eq!(check(&bytes), Ok(()));
        for cut in [0, 4, MAGIC.len(), bytes.len() / 2, bytes.len() - 1] {
            assert_eq!(
                check(&bytes[..cut]).is_ok(),
                decode(&bytes[..cut]).is_ok(),
                "cut at {cut}"
            );
            assert!(check(&bytes[..cut]).is_err());
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(check(&longer).is_err());
    }
}
