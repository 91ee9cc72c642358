//! `[[cascade.tiers]]`: one fallback tier [P-TIERS]. The keys every tier has (`name`,
//! `kind`, `cache_control`) are read here; the kind's own keys, their checks and their
//! conversion to the edge's model are the kind's module, one per kind, registered in the
//! table below (the edge's `tier_kinds!` table is the other half: `edge/core/src/tier`).
//! The schema has one branch per kind, each with the common keys and the kind's.

pub mod embedded;
pub mod http;
pub mod kv;

use std::borrow::Cow;
use std::path::Path;

use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde_json::Value as Json;
use toml_span::value::Value;
use toml_span::{DeserError, Deserialize};
use understudy_core::policy::{Param, Tier};
use understudy_core::tier::{KindName, TierKind};

use super::leaf::*;
use super::route::bug;
use super::table::{Problems, Table, Unknown};
use crate::diag::Diagnostic;

/// A kind's own keys as read (with their spans), its checks and its conversion.
pub trait Raw: Sized {
    /// The kind's settings in the edge's model.
    type Model;

    /// Reads the kind's keys from the tier's table (`name`, `kind` and `cache_control` are
    /// read). A key that is missing or wrong leaves its error in `t` and gives `None`.
    fn read(t: &mut Table<'_>) -> Option<Self>;

    /// The edge's model of the kind, defaults applied; `None` when a value does not convert.
    fn lower(&self) -> Option<Self::Model>;

    /// Rules about this tier that only its kind has (each with its code), given the rest of
    /// the policy as far as it read.
    fn check(&self, model: &Self::Model, cx: &Check<'_>) -> Vec<Diagnostic> {
        let _ = (model, cx);
        Vec::new()
    }
}

/// What a kind's own checks see beside the tier.
pub struct Check<'a> {
    pub file: &'a Path,
    pub tier: &'a RawTier,
    /// The policy's parameters, when every one read.
    pub params: Option<&'a [Param]>,
    /// The tier is the last of a cascade that promises an answer.
    pub final_net: bool,
}

impl Check<'_> {
    pub fn diag(&self, code: crate::codes::Code, message: impl Into<String>) -> Diagnostic {
        Diagnostic::new(code, self.file, message)
    }
}

/// The registration table: one row per kind, its variant (the edge's [`TierKind`] variant
/// and [`KindName`] word of the same name) and its raw type. Generates [`RawKind`], the
/// dispatch to each kind's [`Raw`] and the schema's branches. A kind of the edge without a
/// row here does not compile.
macro_rules! raw_kinds {
    ($( $variant:ident($ty:ty), )*) => {
        /// A tier's own keys, by kind.
        #[derive(Debug, Clone)]
        pub enum RawKind { $( $variant($ty), )* }

        impl RawKind {
            fn read(kind: KindName, t: &mut Table<'_>) -> Option<RawKind> {
                match kind { $( KindName::$variant => <$ty>::read(t).map(RawKind::$variant), )* }
            }

            pub fn lower(&self) -> Option<TierKind> {
                match self { $( RawKind::$variant(r) => r.lower().map(TierKind::$variant), )* }
            }

            pub fn check(&self, model: &TierKind, cx: &Check<'_>) -> Vec<Diagnostic> {
                match (self, model) {
                    $( (RawKind::$variant(r), TierKind::$variant(m)) => r.check(m, cx), )*
                    _ => Vec::new(),
                }
            }

            fn branches(g: &mut SchemaGenerator) -> Vec<Json> {
                vec![ $( branch::<$ty>(g, KindName::$variant.as_str()), )* ]
            }
        }
    };
}

raw_kinds! {
    Kv(kv::RawKv),
    Embedded(embedded::RawEmbedded),
    Http(http::RawHttp),
}

impl Words for KindName {
    const NAME: &'static str = "TierKind";
    const ALL: &'static [(&'static str, KindName)] = KindName::ALL;
}

/// A fallback tier, tried in order.
#[derive(Debug, Clone)]
pub struct RawTier {
    pub name: Spanned<Name>,
    pub cache_control: Option<Spanned<CacheControl>>,
    pub kind: RawKind,
    /// Where `kind` is written.
    pub kind_span: Span,
    pub span: Span,
    /// Each key written in the table: its value's span, and its text when a string.
    pub keys: Vec<(String, Span, Option<String>)>,
    pub unknown: Unknown,
}

/// The keys every tier has (for the schema).
#[derive(JsonSchema)]
#[allow(dead_code)]
struct Common {
    /// Tier name (X-Fallback-Tier, logs, metrics).
    name: Spanned<Name>,
    /// Cache-Control for answers from this tier (overrides disclosure).
    cache_control: Option<Spanned<CacheControl>>,
}

impl<'de> Deserialize<'de> for RawTier {
    fn deserialize(v: &mut Value<'de>) -> Result<Self, DeserError> {
        let span = (v.span.start, v.span.end);
        let mut t = Table::new(v)?;
        let keys =
            t.th.table
                .iter()
                .map(|(k, v)| {
                    let text = v.as_str().map(str::to_string);
                    (k.name.to_string(), (v.span.start, v.span.end), text)
                })
                .collect();
        let name = t.req("name");
        let Some(kind) = t.req::<Word<KindName>>("kind") else {
            // When the kind is unknown its keys cannot be judged: report the kind alone.
            return Err(DeserError {
                errors: t.th.errors,
            });
        };
        let cache_control = t.opt("cache_control");
        let raw = RawKind::read(kind.value.0, &mut t);
        let unknown = Unknown(t.finish()?);
        Ok(RawTier {
            name: name.ok_or_else(bug)?,
            cache_control,
            kind: raw.ok_or_else(bug)?,
            kind_span: kind.span,
            span,
            keys,
            unknown,
        })
    }
}

/// One branch of the schema: the kind's keys, the common ones and `kind = "<word>"`.
fn branch<T: JsonSchema>(g: &mut SchemaGenerator, word: &str) -> Json {
    let mut s = T::json_schema(g).to_value();
    let common = Common::json_schema(g).to_value();
    if let (Some(props), Some(common)) = (
        s.get_mut("properties").and_then(Json::as_object_mut),
        common.get("properties").and_then(Json::as_object),
    ) {
        props.extend(common.clone());
        props.insert(
            "kind".into(),
            serde_json::json!({"type": "string", "const": word}),
        );
    }
    let mut required = vec![Json::from("kind"), Json::from("name")];
    if let Some(own) = s.get("required").and_then(Json::as_array) {
        required.extend(own.iter().cloned());
    }
    s["required"] = Json::Array(required);
    s
}

impl JsonSchema for RawTier {
    fn schema_name() -> Cow<'static, str> {
        "Tier".into()
    }
    fn json_schema(g: &mut SchemaGenerator) -> Schema {
        let branches = RawKind::branches(g);
        json_schema!({"description": "A fallback tier, tried in order.", "oneOf": branches})
    }
}

impl Problems for RawTier {
    fn problems(&self, out: &mut Vec<toml_span::Error>) {
        self.unknown.problems(out);
    }
}

impl RawTier {
    pub fn name(&self) -> &Spanned<Name> {
        &self.name
    }

    pub fn kind_span(&self) -> Span {
        self.kind_span
    }

    pub fn span(&self) -> Span {
        self.span
    }

    pub fn cache_control(&self) -> Option<&Spanned<CacheControl>> {
        self.cache_control.as_ref()
    }

    /// Where `key`'s value is written, when the tier writes it.
    pub fn span_of(&self, key: &str) -> Option<Span> {
        self.keys
            .iter()
            .find(|(k, ..)| k == key)
            .map(|(_, s, _)| *s)
    }

    /// Where `needle` is written inside the string at `key` (a template's `{param}`), or
    /// the whole value when it cannot be found there.
    pub fn span_within(&self, key: &str, needle: &str) -> Option<Span> {
        let (_, span, text) = self.keys.iter().find(|(k, ..)| k == key)?;
        Some(
            text.as_deref()
                .and_then(|t| t.find(needle))
                .map(|at| (span.0 + at, span.0 + at + needle.len()))
                .unwrap_or(*span),
        )
    }

    pub fn lower(&self) -> Option<Tier> {
        Some(Tier {
            name: self.name.value.0.clone(),
            kind: self.kind.lower()?,
            cache_control: self.cache_control.as_ref().map(|c| c.value.0.clone()),
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::codes::Code;

    /// An unknown kind is reported alone — its keys cannot be judged — and the message
    /// lists every kind of the table (moved here from the ERR_INVALID_VALUE fixture, whose
    /// snapshot then changed with every new kind).
    #[test]
    fn an_unknown_kind_is_reported_alone_with_every_kind_listed() {
        let text = "[cascade]\n[[cascade.tiers]]\nname = \"t\"\nkind = \"memory\"\nmode = \"x\"\n";
        let parsed = crate::parse::parse(std::path::Path::new("p.toml"), text);
        let tier: Vec<_> = parsed
            .diagnostics
            .iter()
            .filter(|d| d.message.contains("cascade.tiers"))
            .collect();
        assert_eq!(tier.len(), 1, "{:?}", parsed.diagnostics);
        assert_eq!(tier[0].code, Code::InvalidValue);
        for (word, _) in understudy_core::tier::KindName::ALL {
            assert!(
                tier[0].message.contains(&format!("`{word}`")),
                "{}",
                tier[0].message
            );
        }
    }
}
