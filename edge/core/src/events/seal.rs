//! [V-STORE] Events are encrypted at rest: the payload is sealed with AES-256-GCM before it
//! reaches the outbox, so the stored bytes never contain it.
//!
//! - The key is derived from the secret binding `[events] encryption_key_secret` with
//!   SHA-256 over a fixed label and the secret (the secret should be 32 random bytes,
//!   base64: `openssl rand -base64 32`).
//! - The 96-bit nonce is fresh randomness from the driver (`crypto.getRandomValues` in the
//!   Worker) for every seal: the core never reaches for entropy itself.
//! - The row's identity (event ID, tenant, aggregate, sequence) is the additional
//!   authenticated data: a sealed payload copied into another row does not open.
//! - Layout: version byte `1`, nonce (12 bytes), ciphertext and tag. The version byte leaves
//!   room for key rotation.
//! - What tells a resend from another event under the same ID is a *keyed* digest of the
//!   envelope (HMAC-SHA-256, its key derived from the same secret under another label): a
//!   plain hash stored beside the sealed payload would let whoever reads the storage confirm
//!   a guessed payload.

use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes256Gcm, Key, Nonce};
use sha2::{Digest, Sha256};

const VERSION: u8 = 1;
const NONCE: usize = 12;
const LABEL: &[u8] = b"understudy-events-key-v1\0";
const DIGEST_LABEL: &[u8] = b"understudy-events-digest-v1\0";

/// A derived AES-256 key, and the key of the envelopes' digests.
#[derive(Clone)]
pub struct SealKey([u8; 32], [u8; 32]);

impl std::fmt::Debug for SealKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SealKey(…)")
    }
}

impl SealKey {
    /// The key from the secret's value; `None` for an empty secret (nothing is stored
    /// unsealed: the edge answers 503 instead).
    pub fn from_secret(secret: &str) -> Option<SealKey> {
        if secret.is_empty() {
            return None;
        }
        let derive = |label: &[u8]| -> [u8; 32] {
            let mut h = Sha256::new();
            h.update(label);
            h.update(secret.as_bytes());
            h.finalize().into()
        };
        Some(SealKey(derive(LABEL), derive(DIGEST_LABEL)))
    }

    /// HMAC-SHA-256 of `parts`, each prefixed with its length (so no two lists share an
    /// encoding), in hex.
    pub fn digest(&self, parts: &[&[u8]]) -> String {
        use hmac::{Hmac, Mac};
        // HMAC takes a key of any length; a 32-byte one never fails.
        let Ok(mut mac) = <Hmac<Sha256> as Mac>::new_from_slice(&self.1) else {
            return String::new();
        };
        for part in parts {
            mac.update(&(part.len() as u64).to_be_bytes());
            mac.update(part);
        }
        hex::encode(mac.finalize().into_bytes())
    }
}

/// The additional authenticated data binding a sealed payload to its row.
pub fn aad(event_id: &str, tenant: &str, aggregate: &str, sequence: u64) -> Vec<u8> {
    let mut a = Vec::with_capacity(event_id.len() + tenant.len() + aggregate.len() + 24);
    for part in [event_id, tenant, aggregate] {
        a.extend_from_slice(&(part.len() as u32).to_be_bytes());
        a.extend_from_slice(part.as_bytes());
    }
    a.extend_from_slice(&sequence.to_be_bytes());
    a
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SealError {
    /// Not a sealed payload of a known version (too short, other version byte).
    Format,
    /// The tag did not verify: another key, another row, or tampered bytes.
    Refused,
}

impl std::fmt::Display for SealError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SealError::Format => f.write_str("not a sealed payload of a known version"),
            SealError::Refused => {
                f.write_str("the sealed payload does not open with this key for this event")
            }
        }
    }
}

pub fn seal(key: &SealKey, nonce: [u8; NONCE], aad: &[u8], plaintext: &[u8]) -> Vec<u8> {
    let cipher = Aes256Gcm::new(Key::<Aes256Gcm>::from_slice(&key.0));
    let mut out = Vec::with_capacity(1 + NONCE + plaintext.len() + 16);
    out.push(VERSION);
    out.extend_from_slice(&nonce);
    // Encryption with a valid key and nonce length only fails for plaintexts over 64 GiB,
    // far beyond any body the edge accepts.
    if let Ok(ct) = cipher.encrypt(
        Nonce::from_slice(&nonce),
        Payload {
            msg: plaintext,
            aad,
        },
    ) {
        out.extend_from_slice(&ct);
    }
    out
}

pub fn open(key: &SealKey, aad: &[u8], sealed: &[u8]) -> Result<Vec<u8>, SealError> {
    if sealed.len() < 1 + NONCE + 16 || sealed[0] != VERSION {
        return Err(SealError::Format);
    }
    let cipher = Aes256Gcm::new(Key::<Aes256Gcm>::from_slice(&key.0));
    let nonce = Nonce::from_slice(&sealed[1..1 + NONCE]);
    cipher
        .decrypt(
            nonce,
            Payload {
                msg: &sealed[1 + NONCE..],
                aad,
            },
        )
        .map_err(|_| SealError::Refused)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_payload_opens_only_with_its_key_and_row() {
        let key = SealKey::from_secret("s3cret").unwrap();
        let row = aad("evt-1", "acme", "order-7", 3);
        let payload = br#"{"card":"4242 4242 4242 4242","total":12.5}"#;
        let sealed = seal(&key, [7; 12], &row, payload);
        assert!(
            !sealed.windows(4).any(|w| w == b"4242"),
            "the stored bytes carry no plaintext"
        );
        assert_eq!(open(&key, &row, &sealed).unwrap(), payload);
        let other_key = SealKey::from_secret("other").unwrap();
        assert_eq!(open(&other_key, &row, &sealed), Err(SealError::Refused));
        let other_row = aad("evt-1", "acme", "order-7", 4);
        assert_eq!(open(&key, &other_row, &sealed), Err(SealError::Refused));
        let mut tampered = sealed.clone();
        let last = tampered.len() - 1;
        tampered[last] ^= 1;
        assert_eq!(open(&key, &row, &tampered), Err(SealError::Refused));
        assert_eq!(open(&key, &row, &sealed[..10]), Err(SealError::Format));
    }

    #[test]
    fn fresh_nonces_give_different_bytes_and_empty_secrets_give_no_key() {
        let key = SealKey::from_secret("k").unwrap();
        let a = seal(&key, [1; 12], b"", b"same");
        let b = seal(&key, [2; 12], b"", b"same");
        assert_ne!(a, b);
        assert!(SealKey::from_secret("").is_none());
        // The aad's parts are length-prefixed: moving a character between parts changes it.
        assert_ne!(aad("ab", "c", "d", 1), aad("a", "bc", "d", 1));
    }

    #[test]
    fn digests_are_keyed_and_length_prefixed() {
        let key = SealKey::from_secret("k").unwrap();
        let d = key.digest(&[b"ab", b"c"]);
        assert_eq!(d.len(), 64);
        assert_eq!(key.digest(&[b"ab", b"c"]), d);
        assert_ne!(key.digest(&[b"a", b"bc"]), d);
        let other = SealKey::from_secret("other").unwrap();
        assert_ne!(
            other.digest(&[b"ab", b"c"]),
            d,
            "without the key, no digest to compare"
        );
        // Not the plain hash of the parts: a guess cannot be checked against storage.
        let plain = hex::encode(Sha256::digest(b"abc"));
        assert_ne!(d, plain);
    }
}
