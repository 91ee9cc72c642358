//! Strings with a grammar: each kind is one regular expression, used by the checker
//! (regex-lite) and written into the schema (`pattern`), with what a value should be and
//! the code of a mismatch. Strings that reach HTTP headers follow RFC 9110 [C-HEADER].

use std::borrow::Cow;
use std::sync::OnceLock;

use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use toml_span::value::{Value, ValueInner};
use toml_span::{DeserError, Deserialize};

use super::problem::{err, wrong, Problem};
use crate::codes::Code;

/// A kind of string: the pattern its values match (one regex for the checker and the
/// schema), what it is called, and the code of a mismatch.
pub trait StrKind {
    const NAME: &'static str;
    /// Anchored regular expression, in the common subset of regex-lite and ECMA-262.
    const PATTERN: &'static str;
    /// What a value should be, for messages ("an HTTP token").
    const WHAT: &'static str;
    const CODE: Code;
    const HELP: &'static str;
    fn regex() -> &'static regex_lite::Regex;
}

/// A string of kind `K`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Str<K>(pub String, std::marker::PhantomData<K>);

impl<K> Str<K> {
    pub fn new(s: String) -> Str<K> {
        Str(s, std::marker::PhantomData)
    }
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl<'de, K: StrKind> Deserialize<'de> for Str<K> {
    fn deserialize(v: &mut Value<'de>) -> Result<Self, DeserError> {
        match v.take() {
            ValueInner::String(s) => {
                if K::regex().is_match(&s) {
                    Ok(Str::new(s.into_owned()))
                } else {
                    Err(err(
                        Problem::new(
                            K::CODE,
                            format!("`{{key}}` is {}, which is not {}", shown(&s), K::WHAT),
                            format!("not {}", K::WHAT),
                            K::HELP,
                        ),
                        v,
                    ))
                }
            }
            other => Err(wrong("a string", &other, v)),
        }
    }
}

/// A string for a message: quoted and escaped (control characters visible), at most 60
/// characters.
pub fn shown(s: &str) -> String {
    let mut out: String = s.chars().take(60).collect();
    if s.chars().count() > 60 {
        out.push('…');
    }
    format!("{out:?}")
}

impl<K: StrKind> JsonSchema for Str<K> {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> Cow<'static, str> {
        K::NAME.into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({"type": "string", "pattern": K::PATTERN})
    }
}

macro_rules! str_kind {
    ($(#[$m:meta])* $name:ident, $pattern:literal, $what:literal, $code:expr, $help:literal) => {
        $(#[$m])*
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub struct $name;
        impl StrKind for $name {
            const NAME: &'static str = stringify!($name);
            const PATTERN: &'static str = $pattern;
            const WHAT: &'static str = $what;
            const CODE: Code = $code;
            const HELP: &'static str = $help;
            fn regex() -> &'static regex_lite::Regex {
                static RE: OnceLock<regex_lite::Regex> = OnceLock::new();
                RE.get_or_init(|| {
                    #[allow(clippy::unwrap_used)]
                    // ok: a constant pattern, compiled by the `str_kinds_compile` test.
                    regex_lite::Regex::new($pattern).unwrap()
                })
            }
        }
    };
}

str_kind!(
    /// Tier and service names: they are written into `X-Fallback-Tier`, logs and metrics.
    NameKind,
    r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$",
    "a name of letters, digits, `.`, `_` and `-` (at most 64, starting with a letter or digit)",
    Code::BadHeaderValue,
    "rename it with letters, digits, `.`, `_` and `-`: the edge writes it into a header"
);
str_kind!(
    /// RFC 9110 `token`: header names.
    TokenKind,
    r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$",
    "an HTTP header name (an RFC 9110 token)",
    Code::BadHeaderValue,
    "use letters, digits and `!#$%&'*+-.^_`|~` only, e.g. `Idempotency-Key`"
);
str_kind!(
    /// RFC 9111 Cache-Control: comma-separated directives, each a token with an optional
    /// `=token` or `="quoted"` argument.
    CacheControlKind,
    r#"^[!#$%&'*+.^_`|~0-9A-Za-z-]+(=([!#$%&'*+.^_`|~0-9A-Za-z-]+|"[ !#-\[\]-~]*"))?( *, *[!#$%&'*+.^_`|~0-9A-Za-z-]+(=([!#$%&'*+.^_`|~0-9A-Za-z-]+|"[ !#-\[\]-~]*"))?)*$"#,
    "a Cache-Control value (comma-separated directives such as `public, max-age=30`)",
    Code::BadHeaderValue,
    "write directives separated by commas, e.g. `public, max-age=30` or `private, no-store`"
);
str_kind!(
    /// Binding and secret names: wrangler writes them as JavaScript identifiers.
    BindingKind,
    r"^[A-Za-z_][A-Za-z0-9_]{0,63}$",
    "a binding name (letters, digits and `_`, not starting with a digit)",
    Code::InvalidValue,
    "name bindings and secrets like `USER_RECS` or `ML_API_KEY`"
);
str_kind!(
    /// A route or admin path: absolute, printable ASCII, no query or fragment.
    PathKind,
    r"^/[!$&-.0-;=@-Z_a-z~/{}]{0,255}$",
    "an absolute path such as \"/v1/recommendations\" (printable ASCII, no `?` or `#`)",
    Code::InvalidValue,
    "write the path from its leading `/`, e.g. \"/v1/recommendations\""
);
str_kind!(
    /// An http(s) URL with a host.
    UrlKind,
    r"^https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[!$&-;=?-Z_a-z~]*)?$",
    "an http(s) URL with a host",
    Code::InvalidValue,
    "write it as \"https://host/path\""
);
str_kind!(
    /// A dotted path into a JSON body (`items`, `data.results`).
    JsonPathKind,
    r"^[A-Za-z0-9_-]{1,64}(\.[A-Za-z0-9_-]{1,64}){0,7}$",
    "a dotted path such as \"items\" or \"data.results\"",
    Code::InvalidValue,
    "name the result list's field, with dots between nested fields"
);
str_kind!(
    /// Free text (versions, issuers, audiences, claim and query names): no control characters.
    TextKind,
    r"^[^\x00-\x1f\x7f]{1,256}$",
    "text of 1 to 256 characters without control characters",
    Code::InvalidValue,
    "write it on one line, without control characters"
);
str_kind!(
    /// A parameter's default: any text without control characters (the parameter's own
    /// rules are checked by [C-PARAMS]).
    AnyKind,
    r"^[^\x00-\x1f\x7f]{0,8192}$",
    "text without control characters",
    Code::InvalidValue,
    "write it on one line, without control characters"
);

str_kind!(
    /// A reference to a declared parameter by name.
    ParamNameKind,
    r"^[A-Za-z0-9_]{1,64}$",
    "a parameter name (letters, digits and `_`)",
    Code::InvalidValue,
    "name a parameter declared under `[params.NAME]`"
);

str_kind!(
    /// The events ingest path: a fixed path, so no `{param}` segments (and, like every
    /// path, no query or fragment).
    PlainPathKind,
    r"^/[!$&-.0-;=@-Z_a-z~/]{0,255}$",
    "a plain absolute path such as \"/v1/events\" (printable ASCII, no `{}`, `?` or `#`)",
    Code::InvalidValue,
    "write the ingest path as `/v1/events` (no parameters, query or fragment)"
);

str_kind!(
    /// An event type's name: what the envelope's `type` is compared with, so the same
    /// identifier rule (`understudy_core::events::envelope::is_identifier`).
    EventTypeKind,
    r"^[!-~]{1,128}$",
    "an event type name of 1 to 128 printable characters without spaces",
    Code::InvalidValue,
    "name types like `order.placed`"
);

str_kind!(
    /// A payload field as a dotted path (`orderId`, `customer.email`): no empty segment.
    FieldPathKind,
    r"^[^.\x00-\x1f\x7f]+(\.[^.\x00-\x1f\x7f]+)*$",
    "a payload field path such as `orderId` or `customer.email`",
    Code::InvalidValue,
    "name payload fields as `orderId` or `customer.email` (dots between nested fields)"
);

pub type Name = Str<NameKind>;
pub type ParamName = Str<ParamNameKind>;
pub type Token = Str<TokenKind>;
pub type CacheControl = Str<CacheControlKind>;
pub type Binding = Str<BindingKind>;
pub type UrlPath = Str<PathKind>;
pub type Url = Str<UrlKind>;
pub type JsonPath = Str<JsonPathKind>;
pub type Text = Str<TextKind>;
pub type AnyText = Str<AnyKind>;
pub type PlainPath = Str<PlainPathKind>;
pub type EventTypeName = Str<EventTypeKind>;
pub type FieldPath = Str<FieldPathKind>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn str_kinds_compile_and_accept_their_examples() {
        assert!(NameKind::regex().is_match("recommendation-service"));
        assert!(!NameKind::regex().is_match("bad\r\nname"));
        assert!(!NameKind::regex().is_match("café"));
        assert!(TokenKind::regex().is_match("Idempotency-Key"));
        assert!(!TokenKind::regex().is_match("X Header"));
        for ok in [
            "public, max-age=30",
            "private, no-store",
            "no-cache=\"set-cookie\"",
            "private,max-age=0",
        ] {
            assert!(CacheControlKind::regex().is_match(ok), "{ok}");
        }
        for bad in ["", " ", "public,", "max-age=", "a\tb", "public;max-age=3"] {
            assert!(!CacheControlKind::regex().is_match(bad), "{bad:?}");
        }
        assert!(BindingKind::regex().is_match("USER_RECS"));
        assert!(!BindingKind::regex().is_match("user-recs"));
        assert!(PathKind::regex().is_match("/v1/orders/{order_id}"));
        assert!(!PathKind::regex().is_match("v1/orders"));
        assert!(UrlKind::regex().is_match("https://ml.example:8443/v2/recommend"));
        assert!(UrlKind::regex().is_match("http://127.0.0.1:8788"));
        assert!(!UrlKind::regex().is_match("https:///x"));
        assert!(!UrlKind::regex().is_match("ftp://x"));
        assert!(PlainPathKind::regex().is_match("/v1/events"));
        for bad in [
            "/v1/{id}",
            "/v1/events?x",
            "/v1/events#a",
            "/v1 events",
            "v1/events",
        ] {
            assert!(!PlainPathKind::regex().is_match(bad), "{bad:?}");
        }
        for name in ["order.placed", "a", "x".repeat(128).as_str()] {
            assert_eq!(
                EventTypeKind::regex().is_match(name),
                understudy_core::events::envelope::is_identifier(name),
                "{name:?}"
            );
        }
        for name in ["", "order placed", "x".repeat(129).as_str(), "caf\u{e9}"] {
            assert!(!EventTypeKind::regex().is_match(name), "{name:?}");
            assert!(
                !understudy_core::events::envelope::is_identifier(name),
                "{name:?}"
            );
        }
        assert!(FieldPathKind::regex().is_match("customer.email"));
        for bad in ["", ".a", "a.", "a..b", "a\nb"] {
            assert!(!FieldPathKind::regex().is_match(bad), "{bad:?}");
        }
        assert!(TextKind::regex().is_match("2026-11-30.1"));
        assert!(!TextKind::regex().is_match("a\nb"));
    }
}
