//! [C-PRIVATE] Verified identity: HS256 bearer tokens (compact JWS, RFC 7515/7519).
//!
//! A per-user tier is keyed by a claim of a token the edge has verified, never by a value
//! the client simply states. [`verify`] checks, in this order and before anything reads a
//! claim: the size (at most [`MAX_TOKEN_LEN`] bytes), the shape (exactly three base64url
//! segments without padding), the header (`alg` exactly `HS256`, no `crit`), the HMAC-SHA256
//! signature (compared in constant time), and only then the payload: `exp` (required,
//! numeric), `nbf` (when present), `iss` and `aud` against the policy's
//! [`IdentityRules`](crate::policy::IdentityRules), with its leeway for clock skew.
//!
//! Every refusal is a [`TokenError`] whose variant says which check failed — for logs —
//! while [`TokenError::client_message`] is the same for all of them, so a client learns
//! nothing beyond "invalid or expired token". Neither ever contains the token or a claim
//! value.
//!
//! Sans-IO like the rest of the core: the key and the current time are inputs.

use std::collections::BTreeMap;
use std::fmt;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::Sha256;

use crate::policy::IdentityRules;
use crate::time::Millis;

type HmacSha256 = Hmac<Sha256>;

/// Tokens longer than this (in bytes) are refused before any decoding: 8 KiB.
pub const MAX_TOKEN_LEN: usize = 8 * 1024;

/// The one message a client is shown for any refused token.
pub const CLIENT_MESSAGE: &str = "invalid or expired token";

/// The only algorithm accepted, compared byte for byte.
const ALG: &str = "HS256";

/// Why a token was refused. The variant is for logs and metrics (see [`TokenError::reason`]);
/// clients only ever see [`TokenError::client_message`], identical for every variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenError {
    /// Longer than [`MAX_TOKEN_LEN`].
    TooLong,
    /// Not three base64url segments, or a header or payload that is not a JSON object.
    Malformed,
    /// `alg` missing, not a string, or anything but exactly `HS256` (including `none`);
    /// or a `crit` header naming extensions this verifier does not implement.
    BadAlgorithm,
    /// The HMAC does not match (or has the wrong length).
    BadSignature,
    /// `now` is past `exp` plus the leeway.
    Expired,
    /// `now` plus the leeway is before `nbf`.
    NotYetValid,
    /// `iss` is not the policy's issuer.
    WrongIssuer,
    /// `aud` neither is nor contains the policy's audience.
    WrongAudience,
    /// A required claim (`exp`, `iss`, `aud`) is absent.
    MissingClaim(&'static str),
    /// A registered claim has the wrong JSON type (e.g. a string `exp`).
    InvalidClaim(&'static str),
    /// The verification key is empty: a missing secret must not make tokens forgeable.
    NoKey,
}

impl TokenError {
    /// What a client is told, whatever the reason: `invalid or expired token`.
    pub fn client_message(&self) -> &'static str {
        CLIENT_MESSAGE
    }

    /// A stable, value-free code for log lines and counters (`expired`, `bad_signature`, …).
    pub fn reason(&self) -> &'static str {
        match self {
            TokenError::TooLong => "too_long",
            TokenError::Malformed => "malformed",
            TokenError::BadAlgorithm => "bad_algorithm",
            TokenError::BadSignature => "bad_signature",
            TokenError::Expired => "expired",
            TokenError::NotYetValid => "not_yet_valid",
            TokenError::WrongIssuer => "wrong_issuer",
            TokenError::WrongAudience => "wrong_audience",
            TokenError::MissingClaim(_) => "missing_claim",
            TokenError::InvalidClaim(_) => "invalid_claim",
            TokenError::NoKey => "no_key",
        }
    }
}

/// The internal reason, for logs: names the failed check (and a registered claim's name),
/// never the token or a claim value.
impl fmt::Display for TokenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TokenError::TooLong => write!(f, "token refused: longer than {MAX_TOKEN_LEN} bytes"),
            TokenError::Malformed => write!(f, "token refused: malformed"),
            TokenError::BadAlgorithm => write!(f, "token refused: algorithm is not {ALG}"),
            TokenError::BadSignature => write!(f, "token refused: bad signature"),
            TokenError::Expired => write!(f, "token refused: expired"),
            TokenError::NotYetValid => write!(f, "token refused: not yet valid (nbf)"),
            TokenError::WrongIssuer => write!(f, "token refused: wrong issuer"),
            TokenError::WrongAudience => write!(f, "token refused: wrong audience"),
            TokenError::MissingClaim(c) => write!(f, "token refused: missing claim `{c}`"),
            TokenError::InvalidClaim(c) => {
                write!(f, "token refused: claim `{c}` has the wrong type")
            }
            TokenError::NoKey => write!(f, "token refused: no verification key configured"),
        }
    }
}

impl std::error::Error for TokenError {}

/// The claims of a verified token. Scalar claims are kept as strings: strings as they are,
/// numbers and booleans as their JSON text (`1700000000`, `true`); arrays, objects and
/// `null` are not parameter material and are left out.
#[derive(Clone, PartialEq, Eq)]
pub struct Claims {
    values: BTreeMap<String, String>,
    expires_at: Millis,
    not_before: Option<Millis>,
}

impl Claims {
    /// A claim by name, e.g. `claim("sub")`.
    pub fn claim(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str)
    }

    /// The `sub` claim.
    pub fn subject(&self) -> Option<&str> {
        self.claim("sub")
    }

    /// When the token expires (`exp`, without leeway).
    pub fn expires_at(&self) -> Millis {
        self.expires_at
    }

    /// All scalar claims by name, as [`crate::request::RequestParts::claims`] takes them.
    pub fn as_map(&self) -> &BTreeMap<String, String> {
        &self.values
    }

    /// All scalar claims by name.
    pub fn into_map(self) -> BTreeMap<String, String> {
        self.values
    }
}

/// Claim names only: claim values are identities and must not reach a log line by way of
/// `{:?}`.
impl fmt::Debug for Claims {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Claims")
            .field("names", &self.values.keys().collect::<Vec<_>>())
            .field("expires_at", &self.expires_at)
            .finish()
    }
}

/// The token of an `Authorization` header value (`Bearer <token>`, scheme in any case);
/// `None` for another scheme or an empty token.
pub fn bearer(authorization: &str) -> Option<&str> {
    let (scheme, rest) = authorization.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let token = rest.trim();
    (!token.is_empty()).then_some(token)
}

/// Verifies an HS256 token with `key` against `rules` at `now`; see the module docs for
/// the checks and their order.
pub fn verify(
    token: &str,
    key: &[u8],
    rules: &IdentityRules,
    now: Millis,
) -> Result<Claims, TokenError> {
    if token.len() > MAX_TOKEN_LEN {
        return Err(TokenError::TooLong);
    }
    if key.is_empty() {
        return Err(TokenError::NoKey);
    }
    let mut parts = token.split('.');
    let (Some(header_b64), Some(payload_b64), Some(sig_b64), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(TokenError::Malformed);
    };

    // The header decides the algorithm; nothing in it is trusted beyond that.
    let header = decode_object(header_b64)?;
    match header.get("alg") {
        Some(Value::String(alg)) if alg == ALG => {}
        _ => return Err(TokenError::BadAlgorithm),
    }
    // RFC 7515 §4.1.11: extensions marked critical must be understood; none are.
    if header.contains_key("crit") {
        return Err(TokenError::BadAlgorithm);
    }

    // The signature, before the payload is even decoded.
    let signature = URL_SAFE_NO_PAD
        .decode(sig_b64)
        .map_err(|_| TokenError::Malformed)?;
    let signed_len = header_b64.len() + 1 + payload_b64.len();
    let signing_input = &token.as_bytes()[..signed_len];
    let mac = HmacSha256::new_from_slice(key).map_err(|_| TokenError::NoKey)?;
    mac.chain_update(signing_input)
        .verify_slice(&signature)
        .map_err(|_| TokenError::BadSignature)?;

    let payload = decode_object(payload_b64)?;
    let leeway = rules.leeway_ms;

    let expires_at = match payload.get("exp") {
        None => return Err(TokenError::MissingClaim("exp")),
        Some(v) => numeric_date(v).ok_or(TokenError::InvalidClaim("exp"))?,
    };
    if now.0 > expires_at.0.saturating_add(leeway) {
        return Err(TokenError::Expired);
    }
    let not_before = match payload.get("nbf") {
        Some(v) => Some(numeric_date(v).ok_or(TokenError::InvalidClaim("nbf"))?),
        None => None,
    };
    if not_before.is_some_and(|nb| now.0.saturating_add(leeway) < nb.0) {
        return Err(TokenError::NotYetValid);
    }

    match payload.get("iss") {
        None => return Err(TokenError::MissingClaim("iss")),
        Some(Value::String(iss)) if *iss == rules.issuer => {}
        Some(Value::String(_)) => return Err(TokenError::WrongIssuer),
        Some(_) => return Err(TokenError::InvalidClaim("iss")),
    }
    match payload.get("aud") {
        None => return Err(TokenError::MissingClaim("aud")),
        Some(Value::String(aud)) if *aud == rules.audience => {}
        Some(Value::Array(auds))
            if auds
                .iter()
                .any(|a| a.as_str() == Some(rules.audience.as_str())) => {}
        Some(Value::String(_) | Value::Array(_)) => return Err(TokenError::WrongAudience),
        Some(_) => return Err(TokenError::InvalidClaim("aud")),
    }

    // Inserted, not collected: a collect into a map sorts first (`crate::sort`).
    let mut values = BTreeMap::new();
    for (name, value) in payload {
        let text = match value {
            Value::String(s) => s,
            Value::Number(n) => n.to_string(),
            Value::Bool(b) => b.to_string(),
            Value::Null | Value::Array(_) | Value::Object(_) => continue,
        };
        values.insert(name, text);
    }
    Ok(Claims {
        values,
        expires_at,
        not_before,
    })
}

/// The tokens this isolate has verified, so a client's next request with the same token
/// costs a map lookup instead of base64, JSON and HMAC. Safe to cache: an entry exists only
/// after a full verification with the key (the token carries its signature), the key is a
/// secret binding that cannot change without a new isolate, and the time checks — `exp`,
/// `nbf` with the leeway — are made again on every hit. Bounded: when full it is cleared
/// (tokens are short-lived; a full sweep is cheaper than an LRU).
#[derive(Debug, Default)]
pub struct Verified {
    map: std::collections::HashMap<String, Claims>,
}

impl Verified {
    /// Tokens remembered per isolate (a token is ~300 bytes: about 1 MB at most).
    pub const CAPACITY: usize = 4096;

    /// [`verify`], remembering successes.
    pub fn verify(
        &mut self,
        token: &str,
        key: &[u8],
        rules: &IdentityRules,
        now: Millis,
    ) -> Result<Claims, TokenError> {
        if let Some(c) = self.map.get(token) {
            let leeway = rules.leeway_ms;
            if now.0 > c.expires_at.0.saturating_add(leeway) {
                self.map.remove(token);
                return Err(TokenError::Expired);
            }
            if c.not_before
                .is_some_and(|nb| now.0.saturating_add(leeway) < nb.0)
            {
                return Err(TokenError::NotYetValid);
            }
            return Ok(c.clone());
        }
        let claims = verify(token, key, rules, now)?;
        if self.map.len() >= Self::CAPACITY {
            self.map.clear();
        }
        self.map.insert(token.to_string(), claims.clone());
        Ok(claims)
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

/// Signs `claims` (normally a JSON object) as an HS256 token with header
/// `{"alg":"HS256","typ":"JWT"}`. For tests, `understudy token` and `dev`; the edge only
/// verifies.
pub fn sign(claims: &Value, key: &[u8]) -> String {
    let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"HS256","typ":"JWT"}"#);
    let payload = URL_SAFE_NO_PAD.encode(claims.to_string());
    let signing_input = format!("{header}.{payload}");
    // HMAC takes keys of any length, so this cannot fail; were it ever to, the empty
    // signature below is one `verify` refuses (fail closed, no panic).
    let signature = match HmacSha256::new_from_slice(key) {
        Ok(mac) => mac
            .chain_update(signing_input.as_bytes())
            .finalize()
            .into_bytes()
            .to_vec(),
        Err(_) => Vec::new(),
    };
    format!("{signing_input}.{}", URL_SAFE_NO_PAD.encode(signature))
}

/// A base64url (unpadded) segment holding a JSON object.
fn decode_object(segment: &str) -> Result<serde_json::Map<String, Value>, TokenError> {
    let bytes = URL_SAFE_NO_PAD
        .decode(segment)
        .map_err(|_| TokenError::Malformed)?;
    match serde_json::from_slice(&bytes) {
        Ok(Value::Object(map)) => Ok(map),
        _ => Err(TokenError::Malformed),
    }
}

/// A JWT NumericDate (seconds since the epoch, possibly fractional) as [`Millis`]. Negative
/// dates clamp to the epoch and huge ones saturate.
fn numeric_date(v: &Value) -> Option<Millis> {
    let n = v.as_number()?;
    if let Some(secs) = n.as_u64() {
        return Some(Millis(secs.saturating_mul(1000)));
    }
    if n.is_i64() {
        return Some(Millis(0));
    }
    let secs = n.as_f64()?;
    // `as` saturates (and maps NaN, which JSON cannot carry, to 0).
    Some(Millis((secs * 1000.0) as u64))
}

#[cfg(test)]
mod cache_tests {
    use super::*;
    use serde_json::json;

    fn rules() -> IdentityRules {
        IdentityRules {
            secret: "K".into(),
            issuer: "iss".into(),
            audience: "aud".into(),
            leeway_ms: 0,
        }
    }

    #[test]
    fn a_cached_token_is_checked_for_time_again_and_a_forged_one_never_cached() {
        let key = b"k3y";
        let tok = sign(
            &json!({"sub": "a", "iss": "iss", "aud": "aud", "exp": 100}),
            key,
        );
        let mut v = Verified::default();
        assert!(v.verify(&tok, key, &rules(), Millis(10_000)).is_ok());
        assert_eq!(v.len(), 1);
        assert!(
            v.verify(&tok, key, &rules(), Millis(50_000)).is_ok(),
            "a hit"
        );
        assert_eq!(
            v.verify(&tok, key, &rules(), Millis(100_001)),
            Err(TokenError::Expired),
            "expiry is checked on a hit"
        );
        assert!(v.is_empty());
        let forged = sign(
            &json!({"sub": "a", "iss": "iss", "aud": "aud", "exp": 100}),
            b"other",
        );
        assert_eq!(
            v.verify(&forged, key, &rules(), Millis(10_000)),
            Err(TokenError::BadSignature)
        );
        assert!(v.is_empty(), "failures are not remembered");
        let later = sign(
            &json!({"sub": "b", "iss": "iss", "aud": "aud", "exp": 100, "nbf": 50}),
            key,
        );
        assert_eq!(
            v.verify(&later, key, &rules(), Millis(10_000)),
            Err(TokenError::NotYetValid)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    const KEY: &[u8] = b"test-hmac-key-0123456789abcdef";
    const ISS: &str = "https://auth.mercado.example";
    const AUD: &str = "recommendations";
    /// 2026-11-30T12:00:00Z.
    const NOW_S: u64 = 1_796_040_000;
    const NOW: Millis = Millis(NOW_S * 1000);

    fn rules() -> IdentityRules {
        IdentityRules {
            secret: "TOKEN_HMAC_KEY".into(),
            issuer: ISS.into(),
            audience: AUD.into(),
            leeway_ms: 30_000,
        }
    }

    fn claims() -> Value {
        json!({"sub": "alice", "iss": ISS, "aud": AUD, "exp": NOW_S + 3600, "iat": NOW_S, "admin": false})
    }

    fn with(key: &str, value: Value) -> Value {
        let mut c = claims();
        c[key] = value;
        c
    }

    fn without(key: &str) -> Value {
        let mut c = claims();
        c.as_object_mut().unwrap().remove(key);
        c
    }

    fn check(token: &str) -> Result<Claims, TokenError> {
        verify(token, KEY, &rules(), NOW)
    }

    fn b64(s: &str) -> String {
        URL_SAFE_NO_PAD.encode(s)
    }

    /// A token with an arbitrary header, signed with HS256 over what it carries.
    fn with_header(header: &str, claims: &Value) -> String {
        let input = format!("{}.{}", b64(header), b64(&claims.to_string()));
        let mac = HmacSha256::new_from_slice(KEY)
            .unwrap()
            .chain_update(input.as_bytes());
        format!(
            "{input}.{}",
            URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes())
        )
    }

    /// Replaces the character at `i` with another base64url character.
    fn flip(token: &str, i: usize) -> String {
        let mut bytes = token.as_bytes().to_vec();
        bytes[i] = if bytes[i] == b'A' { b'B' } else { b'A' };
        String::from_utf8(bytes).unwrap()
    }

    #[test]
    fn a_valid_token_gives_its_claims() {
        let c = check(&sign(&claims(), KEY)).unwrap();
        assert_eq!(c.claim("sub"), Some("alice"));
        assert_eq!(c.subject(), Some("alice"));
        assert_eq!(c.claim("iss"), Some(ISS));
        assert_eq!(c.claim("exp"), Some((NOW_S + 3600).to_string().as_str()));
        assert_eq!(c.claim("admin"), Some("false"));
        assert_eq!(c.claim("nope"), None);
        assert_eq!(c.expires_at(), Millis((NOW_S + 3600) * 1000));
        assert_eq!(c.as_map().get("sub").map(String::as_str), Some("alice"));
        assert_eq!(c.clone().into_map().len(), c.as_map().len());
    }

    #[test]
    fn debug_output_names_claims_but_not_their_values() {
        let c = check(&sign(&claims(), KEY)).unwrap();
        let text = format!("{c:?}");
        assert!(text.contains("sub"));
        assert!(!text.contains("alice"));
    }

    #[test]
    fn nested_and_null_claims_are_left_out() {
        let c = check(&sign(&with("groups", json!(["a", "b"])), KEY)).unwrap();
        assert_eq!(c.claim("groups"), None);
        let c = check(&sign(&with("x", Value::Null), KEY)).unwrap();
        assert_eq!(c.claim("x"), None);
    }

    #[test]
    fn expired_tokens_are_refused() {
        let t = sign(&with("exp", json!(NOW_S - 31)), KEY);
        assert_eq!(check(&t).unwrap_err(), TokenError::Expired);
        let t = sign(&with("exp", json!(0)), KEY);
        assert_eq!(check(&t).unwrap_err(), TokenError::Expired);
        let t = sign(&with("exp", json!(-5)), KEY);
        assert_eq!(check(&t).unwrap_err(), TokenError::Expired);
    }

    #[test]
    fn expiry_within_the_leeway_is_accepted() {
        // Expired 30 s ago, leeway 30 s: `now == exp + leeway` is still accepted.
        let t = sign(&with("exp", json!(NOW_S - 30)), KEY);
        assert!(check(&t).is_ok());
        // One millisecond later it is not.
        assert_eq!(
            verify(&t, KEY, &rules(), NOW.plus(1)).unwrap_err(),
            TokenError::Expired
        );
        // Fractional NumericDates are honoured to the millisecond.
        let t = sign(&with("exp", json!(NOW_S as f64 - 29.5)), KEY);
        assert!(check(&t).is_ok());
        let t = sign(&with("exp", json!(NOW_S as f64 - 30.5)), KEY);
        assert_eq!(check(&t).unwrap_err(), TokenError::Expired);
    }

    #[test]
    fn not_before_is_honoured() {
        let t = sign(&with("nbf", json!(NOW_S + 60)), KEY);
        assert_eq!(check(&t).unwrap_err(), TokenError::NotYetValid);
        // Within the leeway.
        let t = sign(&with("nbf", json!(NOW_S + 30)), KEY);
        assert!(check(&t).is_ok());
        let t = sign(&with("nbf", json!(NOW_S - 60)), KEY);
        assert!(check(&t).is_ok());
        let t = sign(&with("nbf", json!("soon")), KEY);
        assert_eq!(check(&t).unwrap_err(), TokenError::InvalidClaim("nbf"));
    }

    #[test]
    fn a_tampered_signature_or_payload_is_refused() {
        let t = sign(&claims(), KEY);
        let last = t.len() - 2; // not the final char, whose low bits are padding
        assert_eq!(
            check(&flip(&t, last)).unwrap_err(),
            TokenError::BadSignature
        );
        let payload_char = t.find('.').unwrap() + 5;
        assert_eq!(
            check(&flip(&t, payload_char)).unwrap_err(),
            TokenError::BadSignature
        );
        // Another key.
        let t = sign(&claims(), b"another-key");
        assert_eq!(check(&t).unwrap_err(), TokenError::BadSignature);
        // A truncated signature.
        let t = sign(&claims(), KEY);
        let short = &t[..t.len() - 3]; // 40 chars: whole bytes, just too few
        assert_eq!(check(short).unwrap_err(), TokenError::BadSignature);
    }

    #[test]
    fn a_forged_payload_with_the_original_signature_is_refused() {
        let t = sign(&claims(), KEY);
        let parts: Vec<&str> = t.split('.').collect();
        let forged = format!(
            "{}.{}.{}",
            parts[0],
            b64(&with("sub", json!("bob")).to_string()),
            parts[2]
        );
        assert_eq!(check(&forged).unwrap_err(), TokenError::BadSignature);
    }

    #[test]
    fn alg_none_with_an_empty_signature_is_refused() {
        let t = format!(
            "{}.{}.",
            b64(r#"{"alg":"none","typ":"JWT"}"#),
            b64(&claims().to_string())
        );
        assert_eq!(check(&t).unwrap_err(), TokenError::BadAlgorithm);
        // Even an HS256 header with an empty signature.
        let t = format!(
            "{}.{}.",
            b64(r#"{"alg":"HS256"}"#),
            b64(&claims().to_string())
        );
        assert_eq!(check(&t).unwrap_err(), TokenError::BadSignature);
    }

    #[test]
    fn other_algorithms_are_refused_even_when_signed_with_hs256() {
        for header in [
            r#"{"alg":"HS384","typ":"JWT"}"#,
            r#"{"alg":"RS256","typ":"JWT"}"#,
            r#"{"alg":"none"}"#,
            r#"{"alg":"hs256"}"#,
            r#"{"alg":"Hs256"}"#,
            r#"{"alg":"HS256 "}"#,
            r#"{"alg":" HS256"}"#,
            r#"{"alg":"HS256\u0000"}"#,
            r#"{"alg":["HS256"]}"#,
            r#"{"alg":null}"#,
            r#"{"ALG":"HS256"}"#,
            r#"{"typ":"JWT"}"#,
            r#"{"alg":"HS256","crit":["exp"]}"#,
        ] {
            assert_eq!(
                check(&with_header(header, &claims())).unwrap_err(),
                TokenError::BadAlgorithm,
                "{header}"
            );
        }
        // The same construction with a plain HS256 header passes.
        assert!(check(&with_header(r#"{"alg":"HS256","kid":"k1"}"#, &claims())).is_ok());
    }

    #[test]
    fn a_header_that_is_not_a_json_object_is_malformed() {
        for header in [
            "not json",
            "",
            "[\"HS256\"]",
            "\"HS256\"",
            "{\"alg\":\"HS256\"",
        ] {
            assert_eq!(
                check(&with_header(header, &claims())).unwrap_err(),
                TokenError::Malformed,
                "{header}"
            );
        }
    }

    #[test]
    fn a_payload_that_is_not_a_json_object_is_malformed() {
        let input = format!("{}.{}", b64(r#"{"alg":"HS256"}"#), b64("[1,2]"));
        let mac = HmacSha256::new_from_slice(KEY)
            .unwrap()
            .chain_update(input.as_bytes());
        let t = format!(
            "{input}.{}",
            URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes())
        );
        assert_eq!(check(&t).unwrap_err(), TokenError::Malformed);
    }

    #[test]
    fn only_three_segments_are_accepted() {
        let t = sign(&claims(), KEY);
        let parts: Vec<&str> = t.split('.').collect();
        assert_eq!(
            check(&format!("{}.{}", parts[0], parts[1])).unwrap_err(),
            TokenError::Malformed
        );
        assert_eq!(
            check(&format!("{t}.{}", parts[2])).unwrap_err(),
            TokenError::Malformed
        );
        assert_eq!(check(&format!("{t}.")).unwrap_err(), TokenError::Malformed);
        assert_eq!(check("").unwrap_err(), TokenError::Malformed);
        assert_eq!(check("..").unwrap_err(), TokenError::Malformed);
    }

    #[test]
    fn non_base64url_segments_are_malformed() {
        let t = sign(&claims(), KEY);
        let parts: Vec<&str> = t.split('.').collect();
        // Standard-alphabet characters, padding and whitespace are not base64url.
        for bad in ["ab+/", "abc=", "ab c", "a$b", "é"] {
            assert_eq!(
                check(&format!("{bad}.{}.{}", parts[1], parts[2])).unwrap_err(),
                TokenError::Malformed
            );
            assert_eq!(
                check(&format!("{}.{}.{bad}", parts[0], parts[1])).unwrap_err(),
                TokenError::Malformed
            );
        }
        // A padded signature.
        assert_eq!(check(&format!("{t}=")).unwrap_err(), TokenError::Malformed);
        // Non-base64 payload after a good header: the signature fails first (the payload
        // is not decoded before the signature is checked).
        assert_eq!(
            check(&format!("{}.a$b.{}", parts[0], parts[2])).unwrap_err(),
            TokenError::BadSignature
        );
    }

    #[test]
    fn oversize_tokens_are_refused_before_decoding() {
        // A correctly signed token, just too long.
        let t = sign(&with("pad", json!("x".repeat(MAX_TOKEN_LEN))), KEY);
        assert!(t.len() > MAX_TOKEN_LEN);
        assert_eq!(check(&t).unwrap_err(), TokenError::TooLong);
        assert_eq!(
            check(&"A".repeat(MAX_TOKEN_LEN + 1)).unwrap_err(),
            TokenError::TooLong
        );
        // Exactly at the limit is decoded (and here malformed).
        assert_eq!(
            check(&"A".repeat(MAX_TOKEN_LEN)).unwrap_err(),
            TokenError::Malformed
        );
    }

    #[test]
    fn the_issuer_must_match() {
        let t = sign(&with("iss", json!("https://evil.example")), KEY);
        assert_eq!(check(&t).unwrap_err(), TokenError::WrongIssuer);
        let t = sign(&with("iss", json!("https://auth.mercado.example/")), KEY);
        assert_eq!(check(&t).unwrap_err(), TokenError::WrongIssuer);
        assert_eq!(
            check(&sign(&without("iss"), KEY)).unwrap_err(),
            TokenError::MissingClaim("iss")
        );
        let t = sign(&with("iss", json!([ISS])), KEY);
        assert_eq!(check(&t).unwrap_err(), TokenError::InvalidClaim("iss"));
    }

    #[test]
    fn the_audience_must_match() {
        let t = sign(&with("aud", json!("search")), KEY);
        assert_eq!(check(&t).unwrap_err(), TokenError::WrongAudience);
        let t = sign(&with("aud", json!("Recommendations")), KEY);
        assert_eq!(check(&t).unwrap_err(), TokenError::WrongAudience);
        let t = sign(&with("aud", json!(["search", "billing"])), KEY);
        assert_eq!(check(&t).unwrap_err(), TokenError::WrongAudience);
        let t = sign(&with("aud", json!([])), KEY);
        assert_eq!(check(&t).unwrap_err(), TokenError::WrongAudience);
        assert_eq!(
            check(&sign(&without("aud"), KEY)).unwrap_err(),
            TokenError::MissingClaim("aud")
        );
        let t = sign(&with("aud", json!(7)), KEY);
        assert_eq!(check(&t).unwrap_err(), TokenError::InvalidClaim("aud"));
    }

    #[test]
    fn an_audience_array_containing_ours_is_accepted() {
        let t = sign(&with("aud", json!(["search", AUD])), KEY);
        let c = check(&t).unwrap();
        assert_eq!(c.claim("aud"), None, "an array is not a scalar claim");
        assert_eq!(c.subject(), Some("alice"));
    }

    #[test]
    fn exp_is_required_and_numeric() {
        assert_eq!(
            check(&sign(&without("exp"), KEY)).unwrap_err(),
            TokenError::MissingClaim("exp")
        );
        for bad in [
            json!("1900000000"),
            json!(null),
            json!(true),
            json!([1]),
            json!({"s": 1}),
        ] {
            let t = sign(&with("exp", bad.clone()), KEY);
            assert_eq!(
                check(&t).unwrap_err(),
                TokenError::InvalidClaim("exp"),
                "{bad}"
            );
        }
    }

    #[test]
    fn an_empty_key_verifies_nothing() {
        let t = sign(&claims(), b"");
        assert_eq!(
            verify(&t, b"", &rules(), NOW).unwrap_err(),
            TokenError::NoKey
        );
    }

    #[test]
    fn huge_dates_saturate_instead_of_overflowing() {
        let t = sign(&with("exp", json!(u64::MAX)), KEY);
        assert!(check(&t).is_ok());
        let t = sign(&with("exp", json!(1e300)), KEY);
        assert!(check(&t).is_ok());
        let t = sign(&with("nbf", json!(u64::MAX)), KEY);
        assert_eq!(check(&t).unwrap_err(), TokenError::NotYetValid);
    }

    #[test]
    fn every_refusal_gives_the_same_client_message_and_no_values() {
        let parts_of = sign(&claims(), KEY);
        let tokens = [
            "A".repeat(MAX_TOKEN_LEN + 1),
            "a.b".to_string(),
            with_header(r#"{"alg":"none"}"#, &claims()),
            flip(&parts_of, parts_of.len() - 2),
            sign(&with("exp", json!(NOW_S - 3600)), KEY),
            sign(&with("nbf", json!(NOW_S + 3600)), KEY),
            sign(&with("iss", json!("https://secret-issuer.example")), KEY),
            sign(&with("aud", json!("secret-audience")), KEY),
            sign(&without("exp"), KEY),
            sign(&with("exp", json!("soon")), KEY),
        ];
        let mut reasons = std::collections::BTreeSet::new();
        for t in &tokens {
            let e = check(t).unwrap_err();
            reasons.insert(e.reason());
            assert_eq!(e.client_message(), "invalid or expired token");
            assert_eq!(e.client_message(), CLIENT_MESSAGE);
            let internal = e.to_string();
            for secret in [
                "alice",
                "secret-issuer",
                "secret-audience",
                "soon",
                t.as_str(),
            ] {
                assert!(!internal.contains(secret), "{internal}");
            }
        }
        assert_eq!(
            check("").unwrap_err().client_message(),
            verify("", b"", &rules(), NOW).unwrap_err().client_message()
        );
        // The reasons differ, for the logs.
        assert_eq!(reasons.len(), tokens.len());
    }

    #[test]
    fn bearer_extracts_the_token() {
        assert_eq!(bearer("Bearer abc.def.ghi"), Some("abc.def.ghi"));
        assert_eq!(bearer("bearer  abc "), Some("abc"));
        assert_eq!(bearer("Basic abc"), None);
        assert_eq!(bearer("Bearer "), None);
        assert_eq!(bearer("Bearer"), None);
        assert_eq!(bearer(""), None);
    }

    proptest! {
        #[test]
        fn arbitrary_strings_never_panic(s in ".*") {
            let _ = check(&s);
        }

        #[test]
        fn arbitrary_base64url_segments_never_panic(a in "[A-Za-z0-9_-]{0,64}", b in "[A-Za-z0-9_-]{0,64}", c in "[A-Za-z0-9_-]{0,64}") {
            let _ = check(&format!("{a}.{b}.{c}"));
        }

        #[test]
        fn arbitrary_json_payloads_signed_never_panic(payload in ".{0,200}") {
            let input = format!("{}.{}", b64(r#"{"alg":"HS256"}"#), b64(&payload));
            let mac = HmacSha256::new_from_slice(KEY).unwrap().chain_update(input.as_bytes());
            let t = format!("{input}.{}", URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes()));
            let _ = check(&t);
        }

        #[test]
        fn signed_tokens_round_trip(sub in "[ -~]{1,40}", ttl in 0u64..100_000) {
            let t = sign(&json!({"sub": sub, "iss": ISS, "aud": AUD, "exp": NOW_S + ttl}), KEY);
            let c = check(&t).unwrap();
            prop_assert_eq!(c.subject(), Some(sub.as_str()));
        }
    }
}
