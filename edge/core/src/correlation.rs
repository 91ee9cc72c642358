//! [E-CORR] One ID follows a request through the edge, the origin and the logs; a client's
//! own ID is kept only when it is safe to echo into a response header.

/// The request and response header carrying the ID.
pub const HEADER: &str = "X-Correlation-ID";
/// Longest incoming ID kept; longer ones are replaced (a header is not a storage area).
pub const MAX_LEN: usize = 128;

/// Where the request's correlation ID came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provenance {
    /// The client's valid ID, kept.
    Kept,
    /// None was sent; one was minted.
    Minted,
    /// One was sent but was unsafe (CR/LF, control or non-ASCII characters, too long, empty):
    /// it was replaced, never echoed.
    Replaced,
}

impl Provenance {
    pub fn as_str(self) -> &'static str {
        match self {
            Provenance::Kept => "kept",
            Provenance::Minted => "minted",
            Provenance::Replaced => "replaced",
        }
    }
}

/// Printable ASCII without spaces (`!`..=`~`), 1 to [`MAX_LEN`] characters: safe in a header
/// and in a JSON log line as it is.
pub fn is_valid(id: &str) -> bool {
    !id.is_empty() && id.len() <= MAX_LEN && id.bytes().all(|b| (0x21..=0x7e).contains(&b))
}

/// Keeps a valid incoming ID or mints one from `random` (16 bytes, formatted as a UUIDv4).
/// The random source is injected so the core never reaches for entropy itself.
pub fn resolve(incoming: Option<&str>, random: impl FnOnce() -> [u8; 16]) -> (String, Provenance) {
    match incoming {
        Some(id) if is_valid(id) => (id.to_string(), Provenance::Kept),
        Some(_) => (mint(random()), Provenance::Replaced),
        None => (mint(random()), Provenance::Minted),
    }
}

/// Formats 16 random bytes as an RFC 9562 version-4 UUID.
pub fn mint(mut b: [u8; 16]) -> String {
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h = hex::encode(b);
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixed() -> [u8; 16] {
        [0xab; 16]
    }

    #[test]
    fn keeps_a_valid_incoming_id() {
        assert_eq!(
            resolve(Some("req-123_abc.DEF"), fixed),
            ("req-123_abc.DEF".to_string(), Provenance::Kept)
        );
        let long = "a".repeat(MAX_LEN);
        assert_eq!(resolve(Some(&long), fixed).1, Provenance::Kept);
    }

    #[test]
    fn replaces_unsafe_ids_instead_of_echoing_them() {
        for bad in [
            "abc\r\nSet-Cookie: x=1",
            "a\nb",
            "tab\there",
            "",
            "with space",
            "café",
            &"a".repeat(MAX_LEN + 1),
            "\u{7f}",
        ] {
            let (id, prov) = resolve(Some(bad), fixed);
            assert_eq!(prov, Provenance::Replaced, "{bad:?}");
            assert_ne!(id, bad);
            assert!(is_valid(&id));
        }
    }

    #[test]
    fn mints_a_uuid_v4_when_absent() {
        let (id, prov) = resolve(None, fixed);
        assert_eq!(prov, Provenance::Minted);
        assert_eq!(id, "abababab-abab-4bab-abab-abababababab");
        assert_eq!(id.len(), 36);
    }
}
