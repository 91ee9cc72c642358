//! [E-INPUT] Parameters are checked against the policy before any I/O: bad input costs one
//! 400 with a code and a message naming the parameter, and never reaches the model, a KV key
//! or a log line.
//!
//! Values are judged as bytes first (length, then UTF-8, then control characters), so a
//! 10 kB value or a stray CR/LF is refused before anything else looks at it. Messages name
//! the parameter and the rule, never echo the value (it may be huge, binary or personal).

use std::collections::BTreeMap;

use regex_lite::Regex;

pub use crate::params::{ParamValue, Params};
use crate::policy::{Method, Param, ParamSource, ParamType, Policy};

/// The request as the adapter received it, nothing interpreted yet.
#[derive(Debug, Clone, Copy)]
pub struct RequestParts<'a> {
    pub method: &'a str,
    /// The URL path, still percent-encoded.
    pub path: &'a str,
    /// The raw query string without `?`, still percent-encoded.
    pub query: &'a str,
    /// Header names and values as the runtime gives them (names in any case).
    pub headers: &'a [(String, String)],
    /// Claims of a bearer token the adapter has already verified; `None` when there is no
    /// verified token. Verification itself lives outside this module (it needs the secret).
    pub claims: Option<&'a BTreeMap<String, String>>,
}

/// A refused request: the HTTP status, a stable code and a message naming the fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    pub status: u16,
    pub code: &'static str,
    pub message: String,
}

impl Rejection {
    fn bad(code: &'static str, p: &Param, what: impl std::fmt::Display) -> Rejection {
        Rejection {
            status: 400,
            code,
            message: format!("{} {what}", describe(p)),
        }
    }
}

/// Where the parameter is read from, as a client would look for it.
fn describe(p: &Param) -> String {
    let place = match p.source {
        ParamSource::Query => format!("query parameter `{}`", p.from),
        ParamSource::Header => format!("header `{}`", p.from),
        ParamSource::Path => format!("path segment `{{{}}}`", p.from),
        ParamSource::TokenClaim => format!("token claim `{}`", p.from),
    };
    if p.from == p.name {
        place
    } else {
        format!("{place} (parameter `{}`)", p.name)
    }
}

#[derive(Debug, Clone)]
enum Segment {
    Lit(String),
    Param(String),
}

/// The policy's parameter rules with their patterns compiled once per isolate.
#[derive(Debug, Clone)]
pub struct Validator {
    methods: Vec<Method>,
    route: Vec<Segment>,
    rules: Vec<(Param, Option<Regex>)>,
}

impl Validator {
    /// Compiles every pattern (anchored: the whole value must match). A pattern that does not
    /// compile is a bake the compiler should have refused; the adapter answers `BAKE_INVALID`.
    pub fn new(policy: &Policy) -> Result<Validator, String> {
        let mut rules = Vec::with_capacity(policy.params.len());
        for p in &policy.params {
            let re = match &p.pattern {
                Some(pat) => Some(Regex::new(&format!("^(?:{pat})$")).map_err(|e| {
                    format!("pattern of parameter `{}` does not compile: {e}", p.name)
                })?),
                None => None,
            };
            rules.push((p.clone(), re));
        }
        let route = split_path(&policy.service.route)
            .map(
                |s| match s.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
                    Some(name) => Segment::Param(name.to_string()),
                    None => Segment::Lit(s.to_string()),
                },
            )
            .collect();
        Ok(Validator {
            methods: policy.service.methods.clone(),
            route,
            rules,
        })
    }

    /// Matches the route and method, then validates every parameter.
    pub fn validate(&self, req: &RequestParts<'_>) -> Result<Params, Rejection> {
        let method_ok = Method::parse(req.method).is_some_and(|m| self.methods.contains(&m));
        let path = self.match_route(req.path).ok_or_else(|| Rejection {
            status: 404,
            code: "NOT_FOUND",
            message: "no endpoint at this path; see the policy's `route`".into(),
        })?;
        if !method_ok {
            let allowed: Vec<&str> = self.methods.iter().map(|m| m.as_str()).collect();
            return Err(Rejection {
                status: 405,
                code: "METHOD_NOT_ALLOWED",
                message: format!(
                    "method `{}` is not allowed here; use {}",
                    printable(req.method),
                    allowed.join(", ")
                ),
            });
        }
        let query = parse_query(req.query);
        let mut values = Vec::new();
        for (p, re) in &self.rules {
            let raw: Option<Vec<u8>> = match p.source {
                ParamSource::Query => {
                    let mut hits = query.iter().filter(|(k, _)| k.as_slice() == p.from.as_bytes());
                    let first = hits.next().map(|(_, v)| v.clone());
                    if hits.next().is_some() {
                        return Err(Rejection::bad("PARAM_DUPLICATE", p, "given more than once; send it once"));
                    }
                    first
                }
                ParamSource::Header => {
                    let v = req.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(&p.from)).map(|(_, v)| v);
                    if let Some(v) = v {
                        // The runtime decodes header bytes as Latin-1, so anything outside
                        // ASCII here was not UTF-8 text on the wire in any reliable sense.
                        if !v.is_ascii() {
                            return Err(Rejection::bad("PARAM_INVALID_ENCODING", p, "must be ASCII text"));
                        }
                    }
                    v.map(|v| v.as_bytes().to_vec())
                }
                ParamSource::Path => path.iter().find(|(k, _)| k == &p.from).map(|(_, v)| v.clone()),
                ParamSource::TokenClaim => match req.claims {
                    Some(c) => c.get(&p.from).map(|v| v.as_bytes().to_vec()),
                    None if p.required => {
                        return Err(Rejection::bad(
                            "PARAM_MISSING",
                            p,
                            "needs a verified bearer token carrying this claim; send `Authorization: Bearer <token>`",
                        ))
                    }
                    None => None,
                },
            };
            let value = match raw {
                Some(bytes) => check_value(p, re.as_ref(), bytes)?,
                None => None,
            };
            let value = match value.or_else(|| p.default.clone()) {
                Some(v) => v,
                None if p.required => {
                    return Err(Rejection::bad(
                        "PARAM_MISSING",
                        p,
                        "is required; send a non-empty value",
                    ))
                }
                None => continue,
            };
            values.push(ParamValue {
                name: p.name.clone(),
                value,
                identity: p.identity,
            });
        }
        Ok(Params { values })
    }

    /// The path parameters when `path` matches the route (one trailing `/` tolerated).
    fn match_route(&self, path: &str) -> Option<Vec<(String, Vec<u8>)>> {
        let segs: Vec<&str> = split_path(path).collect();
        if segs.len() != self.route.len() {
            return None;
        }
        let mut out = Vec::new();
        for (seg, want) in segs.iter().zip(&self.route) {
            match want {
                Segment::Lit(l) if l == seg => {}
                Segment::Lit(_) => return None,
                Segment::Param(name) => out.push((name.clone(), percent_decode(seg, false))),
            }
        }
        Some(out)
    }
}

impl Validator {
    /// Whether `value` is one the edge accepts for parameter `name` (what `understudy
    /// publish` checks each list's key against, so no published key is one no request can
    /// reach). `Err` holds the reason, as a client would be told it.
    pub fn check(&self, name: &str, value: &str) -> Result<(), String> {
        let Some((p, re)) = self.rules.iter().find(|(p, _)| p.name == name) else {
            return Err(format!("the policy has no parameter `{name}`"));
        };
        match check_value(p, re.as_ref(), value.as_bytes().to_vec()) {
            Ok(Some(_)) => Ok(()),
            Ok(None) => Err(format!("{} is empty", describe(p))),
            Err(r) => Err(r.message),
        }
    }
}

fn split_path(path: &str) -> impl Iterator<Item = &str> {
    path.trim_end_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
}

/// Length, encoding, control characters, emptiness, type and pattern, in that order.
/// `Ok(None)` is an empty value, treated as absent.
fn check_value(p: &Param, re: Option<&Regex>, bytes: Vec<u8>) -> Result<Option<String>, Rejection> {
    if bytes.len() > p.max_len as usize {
        return Err(Rejection::bad(
            "PARAM_TOO_LONG",
            p,
            format!(
                "is {} bytes; at most {} are allowed",
                bytes.len(),
                p.max_len
            ),
        ));
    }
    let s = String::from_utf8(bytes)
        .map_err(|_| Rejection::bad("PARAM_INVALID_ENCODING", p, "is not valid UTF-8"))?;
    if s.chars().any(char::is_control) {
        return Err(Rejection::bad(
            "PARAM_CONTROL_CHARACTER",
            p,
            "contains a control character (CR, LF, tab, NUL, …); remove it",
        ));
    }
    if s.is_empty() {
        return Ok(None);
    }
    if p.ty == ParamType::Integer && s.parse::<i64>().is_err() {
        return Err(Rejection::bad(
            "PARAM_NOT_INTEGER",
            p,
            "must be a whole number",
        ));
    }
    if let Some(re) = re {
        if !re.is_match(&s) {
            let pat = p.pattern.as_deref().unwrap_or_default();
            return Err(Rejection::bad(
                "PARAM_PATTERN_MISMATCH",
                p,
                format!("does not match the pattern `{pat}`"),
            ));
        }
    }
    Ok(Some(s))
}

/// `key=value` pairs, percent-decoded to bytes (`+` is a space), in order.
pub fn parse_query(query: &str) -> Vec<(Vec<u8>, Vec<u8>)> {
    query
        .split('&')
        .filter(|kv| !kv.is_empty())
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (percent_decode(k, true), percent_decode(v, true))
        })
        .collect()
}

/// Percent-decoding to bytes. Malformed escapes are kept literally, as `URLSearchParams` does.
pub fn percent_decode(s: &str, plus_is_space: bool) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' if i + 2 < b.len()
                && hex_val(b[i + 1]).is_some()
                && hex_val(b[i + 2]).is_some() =>
            {
                out.push(hex_val(b[i + 1]).unwrap_or(0) << 4 | hex_val(b[i + 2]).unwrap_or(0));
                i += 3;
                continue;
            }
            b'+' if plus_is_space => out.push(b' '),
            c => out.push(c),
        }
        i += 1;
    }
    out
}

fn hex_val(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// A method name as it may appear in a message: printable ASCII, bounded.
fn printable(s: &str) -> String {
    s.chars()
        .filter(|c| c.is_ascii_graphic())
        .take(16)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::seed_policy;

    fn req<'a>(path: &'a str, query: &'a str, headers: &'a [(String, String)]) -> RequestParts<'a> {
        RequestParts {
            method: "GET",
            path,
            query,
            headers,
            claims: None,
        }
    }

    fn validator() -> Validator {
        Validator::new(&seed_policy()).unwrap()
    }

    #[test]
    fn accepts_a_good_request_and_applies_defaults() {
        let p = validator()
            .validate(&req("/recommendations/u-123", "", &[]))
            .unwrap();
        assert_eq!(p.get("user_id"), Some("u-123"));
        assert_eq!(p.get("category"), Some("general"));
        assert!(p.is_personalized());
        let p = validator()
            .validate(&req(
                "/recommendations/u-123/",
                "category=audio&limit=5",
                &[],
            ))
            .unwrap();
        assert_eq!(p.get("category"), Some("audio"));
        assert_eq!(p.get("limit"), Some("5"));
    }

    #[test]
    fn missing_required_parameter_is_named() {
        let h = [];
        let r =
            Validator::new(&seed_policy())
                .unwrap()
                .validate(&req("/recommendations/%20", "", &h));
        // A path segment that decodes to a space does not match the id pattern.
        assert_eq!(r.unwrap_err().code, "PARAM_PATTERN_MISMATCH");
        let mut policy = seed_policy();
        policy.params[1].required = true;
        policy.params[1].default = None;
        let r = Validator::new(&policy)
            .unwrap()
            .validate(&req("/recommendations/u1", "", &h))
            .unwrap_err();
        assert_eq!((r.status, r.code), (400, "PARAM_MISSING"));
        assert!(r.message.contains("`category`"), "{}", r.message);
        let r = Validator::new(&policy)
            .unwrap()
            .validate(&req("/recommendations/u1", "category=", &h))
            .unwrap_err();
        assert_eq!(r.code, "PARAM_MISSING");
    }

    #[test]
    fn too_long_and_10_kb_values_are_refused_before_anything_else() {
        let long = "a".repeat(65);
        let r = validator()
            .validate(&req(&format!("/recommendations/{long}"), "", &[]))
            .unwrap_err();
        assert_eq!(r.code, "PARAM_TOO_LONG");
        assert!(
            r.message.contains("65 bytes") && r.message.contains("user_id"),
            "{}",
            r.message
        );
        let huge = format!("category={}", "%0A".repeat(10_240 / 3 + 1));
        let r = validator()
            .validate(&req("/recommendations/u1", &huge, &[]))
            .unwrap_err();
        assert_eq!(r.code, "PARAM_TOO_LONG");
        assert!(!r.message.contains('\n'));
    }

    #[test]
    fn bad_pattern_and_bad_integer() {
        let r = validator()
            .validate(&req("/recommendations/u1", "category=Audio!", &[]))
            .unwrap_err();
        assert_eq!(r.code, "PARAM_PATTERN_MISMATCH");
        assert!(r.message.contains("`category`"));
        let r = validator()
            .validate(&req("/recommendations/u1", "limit=x1", &[]))
            .unwrap_err();
        assert_eq!(r.code, "PARAM_NOT_INTEGER");
    }

    #[test]
    fn cr_lf_control_and_non_utf8_are_refused() {
        for q in [
            "category=a%0D%0Ab",
            "category=a%0Ab",
            "category=%00",
            "category=a%09",
        ] {
            assert_eq!(
                validator()
                    .validate(&req("/recommendations/u1", q, &[]))
                    .unwrap_err()
                    .code,
                "PARAM_CONTROL_CHARACTER",
                "{q}"
            );
        }
        let r = validator()
            .validate(&req("/recommendations/u1", "category=%FF%FE", &[]))
            .unwrap_err();
        assert_eq!(r.code, "PARAM_INVALID_ENCODING");
        let mut policy = seed_policy();
        policy.params[1].source = ParamSource::Header;
        policy.params[1].from = "X-Category".into();
        let v = Validator::new(&policy).unwrap();
        let h = [("x-category".to_string(), "aud\u{ff}io".to_string())];
        assert_eq!(
            v.validate(&req("/recommendations/u1", "", &h))
                .unwrap_err()
                .code,
            "PARAM_INVALID_ENCODING"
        );
        let h = [("X-CATEGORY".to_string(), "audio".to_string())];
        assert_eq!(
            v.validate(&req("/recommendations/u1", "", &h))
                .unwrap()
                .get("category"),
            Some("audio")
        );
    }

    #[test]
    fn duplicates_route_and_method() {
        let r = validator()
            .validate(&req("/recommendations/u1", "category=a&category=b", &[]))
            .unwrap_err();
        assert_eq!(r.code, "PARAM_DUPLICATE");
        assert_eq!(
            validator()
                .validate(&req("/other/u1", "", &[]))
                .unwrap_err()
                .status,
            404
        );
        assert_eq!(
            validator()
                .validate(&req("/recommendations", "", &[]))
                .unwrap_err()
                .status,
            404
        );
        let mut r = req("/recommendations/u1", "", &[]);
        r.method = "DELETE";
        assert_eq!(validator().validate(&r).unwrap_err().status, 405);
    }

    #[test]
    fn token_claims_need_a_verified_token() {
        let mut policy = seed_policy();
        policy.params[0].source = ParamSource::TokenClaim;
        policy.params[0].from = "sub".into();
        policy.service.route = "/recommendations".into();
        let v = Validator::new(&policy).unwrap();
        let r = v.validate(&req("/recommendations", "", &[])).unwrap_err();
        assert_eq!(r.code, "PARAM_MISSING");
        assert!(r.message.contains("bearer token"));
        let claims: BTreeMap<String, String> = [("sub".to_string(), "alice".to_string())].into();
        let mut rq = req("/recommendations", "", &[]);
        rq.claims = Some(&claims);
        assert_eq!(v.validate(&rq).unwrap().get("user_id"), Some("alice"));
    }

    #[test]
    fn percent_decoding_keeps_malformed_escapes() {
        assert_eq!(percent_decode("a%20b+c", true), b"a b c");
        assert_eq!(percent_decode("100%", false), b"100%");
        assert_eq!(percent_decode("%zz%4", false), b"%zz%4");
        assert_eq!(percent_decode("%41%4a", false), b"AJ");
    }

    #[test]
    fn a_pattern_that_does_not_compile_is_reported() {
        let mut policy = seed_policy();
        policy.params[1].pattern = Some("(".into());
        assert!(Validator::new(&policy).unwrap_err().contains("category"));
    }
}
