//! `[cascade]` and its `[[cascade.tiers]]`: the ordered fallback tiers [P-TIERS]. A tier's
//! `kind` decides its keys (and an embedded tier's `mode` decides some more): the schema
//! says so with one branch per kind.

use std::borrow::Cow;

use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use toml_span::value::{Value, ValueInner};
use toml_span::{DeserError, Deserialize};
use understudy_core::policy::{
    Cascade, EmbeddedTier, HttpTier, KvTier, NoMatch, Promise, Tier, TierKind,
};
use understudy_core::template::Template;

use super::leaf::*;
use super::origin::{result_path, DAY, MINUTE};
use super::problem::Problem;
use super::route::bug;
use super::table::{Problems, Table, Unknown};
use crate::codes::Code;

impl Words for Promise {
    const NAME: &'static str = "Promise";
    const ALL: &'static [(&'static str, Promise)] = Promise::ALL;
}

impl Words for NoMatch {
    const NAME: &'static str = "NoMatch";
    const ALL: &'static [(&'static str, NoMatch)] = NoMatch::ALL;
}

understudy_core::words! {
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Mode {
        Curated = "curated",
        Keyword = "keyword",
    }
}

impl Words for Mode {
    const NAME: &'static str = "EmbeddedMode";
    const ALL: &'static [(&'static str, Mode)] = Mode::ALL;
}

/// [P-TIERS] The fallback cascade.
#[derive(Debug, Clone, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Cascade")]
pub struct RawCascade {
    /// always_answer (the last tier must be embedded) or best_effort (504/503 when nothing
    /// answers). Default always_answer.
    pub promise: Option<Spanned<Word<Promise>>>,
    /// Tiers in order.
    pub tiers: Tiers,
    #[serde(skip)]
    pub span: Span,
    #[serde(skip)]
    pub unknown: Unknown,
}

/// The tiers, each read on its own: one bad tier leaves the others checked.
#[derive(Debug, Clone)]
pub struct Tiers(pub Vec<Part<RawTier>>, pub Span);

impl<'de> Deserialize<'de> for Tiers {
    fn deserialize(v: &mut Value<'de>) -> Result<Self, DeserError> {
        let span = (v.span.start, v.span.end);
        match v.take() {
            ValueInner::Array(items) if !items.is_empty() => Ok(Tiers(
                items
                    .into_iter()
                    .map(|mut item| {
                        Part::<RawTier>::deserialize(&mut item)
                            .unwrap_or_else(|e| Part::Bad(e.errors))
                    })
                    .collect(),
                span,
            )),
            ValueInner::Array(_) => Err(empty(v.span)),
            other => Err(Problem::new(
                Code::WrongType,
                format!(
                    "`{{key}}` must be an array of tables (`[[cascade.tiers]]`), found a {}",
                    other.type_str()
                ),
                "expected `[[cascade.tiers]]`",
                "write each tier as a `[[cascade.tiers]]` table",
            )
            .at(v.span)
            .into()),
        }
    }
}

fn empty(span: toml_span::Span) -> DeserError {
    Problem::new(
        Code::EmptyCascade,
        "the cascade has no tier",
        "no `[[cascade.tiers]]`",
        "add fallback tiers in order, ending with an `embedded` tier for endpoints that must answer",
    )
    .at(span)
    .into()
}

impl JsonSchema for Tiers {
    fn schema_name() -> Cow<'static, str> {
        "Tiers".into()
    }
    fn json_schema(g: &mut SchemaGenerator) -> Schema {
        let tier = g.subschema_for::<RawTier>();
        json_schema!({"type": "array", "minItems": 1, "items": tier})
    }
}

impl<'de> Deserialize<'de> for RawCascade {
    fn deserialize(v: &mut Value<'de>) -> Result<Self, DeserError> {
        let span = (v.span.start, v.span.end);
        let mut t = Table::new(v)?;
        let promise = t.opt("promise");
        let tiers: Option<Spanned<Tiers>> = if t.has("tiers") {
            t.req("tiers")
        } else {
            t.th.take("tiers");
            t.th.errors.push(
                Problem::new(
                    Code::EmptyCascade,
                    "the cascade has no tier",
                    "no `[[cascade.tiers]]`",
                    "add fallback tiers in order, ending with an `embedded` tier for endpoints that must answer",
                )
                .at(t.span),
            );
            None
        };
        let unknown = Unknown(t.finish()?);
        Ok(RawCascade {
            promise,
            tiers: tiers.ok_or_else(bug)?.value,
            span,
            unknown,
        })
    }
}

impl Problems for RawCascade {
    fn problems(&self, out: &mut Vec<toml_span::Error>) {
        self.unknown.problems(out);
        self.tiers.0.problems(out);
    }
}

/// A fallback tier, tried in order.
#[derive(Debug, Clone, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[schemars(rename = "Tier")]
pub enum RawTier {
    /// A Workers KV namespace.
    Kv(RawKv),
    /// The baked catalog: answered from memory, no I/O.
    Embedded(RawEmbedded),
    /// A secondary HTTP source in its own failure domain.
    Http(RawHttp),
}

#[derive(Debug, Clone, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Kv")]
pub struct RawKv {
    /// Tier name (X-Fallback-Tier, logs, metrics).
    pub name: Spanned<Name>,
    /// Cache-Control for answers from this tier (overrides disclosure).
    pub cache_control: Option<Spanned<CacheControl>>,
    /// KV namespace binding.
    pub binding: Spanned<Binding>,
    /// Key template, e.g. user_rec:{user_id}.
    pub key: Spanned<TemplateText>,
    /// Store keys as their prefix and a SHA-256 of the whole key (default false).
    pub hash_key: Option<Spanned<Flag>>,
    /// Entries older than this are a miss (1s..=365d).
    pub max_staleness: Spanned<Dur<1_000, { 365 * DAY }>>,
    /// Read timeout (1ms..=1m).
    pub read_timeout: Spanned<Dur<1, MINUTE>>,
    /// Write live answers back to this tier (default false).
    pub write_through: Option<Spanned<Flag>>,
    /// Rewrite a key only when its copy is older than this (default 1m, 1s..=1d).
    pub refresh: Option<Spanned<Dur<1_000, DAY>>>,
    /// A curated tier filled by `understudy publish`: entries answer only with their
    /// inventory validation in the key's metadata (default false).
    pub published: Option<Spanned<Flag>>,
    /// Where `kind` is written.
    #[serde(skip)]
    pub kind_span: Span,
    #[serde(skip)]
    pub span: Span,
    #[serde(skip)]
    pub unknown: Unknown,
}

/// An embedded tier: `mode = "curated"` (default; `by` allowed) or `mode = "keyword"`
/// (`query` required; `no_match` allowed).
#[derive(Debug, Clone, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(transform = embedded_modes)]
#[schemars(rename = "Embedded")]
pub struct RawEmbedded {
    /// Tier name (X-Fallback-Tier, logs, metrics).
    pub name: Spanned<Name>,
    /// Cache-Control for answers from this tier (overrides disclosure).
    pub cache_control: Option<Spanned<CacheControl>>,
    /// Curated list (default) or keyword search.
    pub mode: Option<Spanned<Word<Mode>>>,
    /// curated: parameter holding the category.
    pub by: Option<Spanned<ParamName>>,
    /// keyword: parameter holding the query.
    pub query: Option<Spanned<ParamName>>,
    /// Most items answered (default 10, 1..=1000).
    pub limit: Option<Spanned<Count<1, 1000>>>,
    /// keyword: what to answer when nothing matches (default curated).
    pub no_match: Option<Spanned<Word<NoMatch>>>,
    /// Where `kind` is written.
    #[serde(skip)]
    pub kind_span: Span,
    #[serde(skip)]
    pub span: Span,
    #[serde(skip)]
    pub unknown: Unknown,
}

/// curated: no `query`, no `no_match`; keyword: `query` required, no `by`.
fn embedded_modes(schema: &mut Schema) {
    schema.insert(
        "oneOf".into(),
        serde_json::json!([
            {
                "properties": {"mode": {"const": "keyword"}},
                "required": ["mode", "query"],
                "not": {"required": ["by"]}
            },
            {
                "properties": {"mode": {"const": "curated"}},
                "not": {"anyOf": [{"required": ["query"]}, {"required": ["no_match"]}]}
            }
        ]),
    );
}

#[derive(Debug, Clone, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Http")]
pub struct RawHttp {
    /// Tier name (X-Fallback-Tier, logs, metrics).
    pub name: Spanned<Name>,
    /// Cache-Control for answers from this tier (overrides disclosure).
    pub cache_control: Option<Spanned<CacheControl>>,
    /// URL of the secondary source.
    pub url: Spanned<Url>,
    /// Timeout (1ms..=1m).
    pub timeout: Spanned<Dur<1, MINUTE>>,
    /// Secret binding with its credential.
    pub credential_secret: Option<Spanned<Binding>>,
    /// Dotted path of the result list (default items).
    pub result_path: Option<Spanned<JsonPath>>,
    /// Where `kind` is written.
    #[serde(skip)]
    pub kind_span: Span,
    #[serde(skip)]
    pub span: Span,
    #[serde(skip)]
    pub unknown: Unknown,
}

understudy_core::words! {
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Kind {
        Kv = "kv",
        Embedded = "embedded",
        Http = "http",
    }
}

impl Words for Kind {
    const NAME: &'static str = "TierKind";
    const ALL: &'static [(&'static str, Kind)] = Kind::ALL;
}

impl<'de> Deserialize<'de> for RawTier {
    fn deserialize(v: &mut Value<'de>) -> Result<Self, DeserError> {
        let span = (v.span.start, v.span.end);
        let mut t = Table::new(v)?;
        let name = t.req("name");
        let Some(kind) = t.req::<Word<Kind>>("kind") else {
            // When the kind is unknown its keys cannot be judged: report the kind alone.
            return Err(DeserError {
                errors: t.th.errors,
            });
        };
        let cache_control = t.opt("cache_control");
        let kind_span = kind.span;
        Ok(match kind.value.0 {
            Kind::Kv => {
                let binding = t.req("binding");
                let key = t.req("key");
                let hash_key = t.opt("hash_key");
                let max_staleness = t.req("max_staleness");
                let read_timeout = t.req("read_timeout");
                let write_through = t.opt("write_through");
                let refresh = t.opt("refresh");
                let published = t.opt("published");
                let unknown = Unknown(t.finish()?);
                RawTier::Kv(RawKv {
                    name: name.ok_or_else(bug)?,
                    cache_control,
                    binding: binding.ok_or_else(bug)?,
                    key: key.ok_or_else(bug)?,
                    hash_key,
                    max_staleness: max_staleness.ok_or_else(bug)?,
                    read_timeout: read_timeout.ok_or_else(bug)?,
                    write_through,
                    refresh,
                    published,
                    kind_span,
                    span,
                    unknown,
                })
            }
            Kind::Embedded => {
                let mode: Option<Spanned<Word<Mode>>> = t.opt("mode");
                let keyword = mode.is_some_and(|m| m.value.0 == Mode::Keyword);
                let (by, query, no_match) = if keyword {
                    let query = t.req("query");
                    (None, query, t.opt("no_match"))
                } else {
                    (t.opt("by"), None, None)
                };
                let limit = t.opt("limit");
                let unknown = Unknown(t.finish()?);
                RawTier::Embedded(RawEmbedded {
                    name: name.ok_or_else(bug)?,
                    cache_control,
                    mode,
                    by,
                    query,
                    limit,
                    no_match,
                    kind_span,
                    span,
                    unknown,
                })
            }
            Kind::Http => {
                let url = t.req("url");
                let timeout = t.req("timeout");
                let credential_secret = t.opt("credential_secret");
                let result_path = t.opt("result_path");
                let unknown = Unknown(t.finish()?);
                RawTier::Http(RawHttp {
                    name: name.ok_or_else(bug)?,
                    cache_control,
                    url: url.ok_or_else(bug)?,
                    timeout: timeout.ok_or_else(bug)?,
                    credential_secret,
                    result_path,
                    kind_span,
                    span,
                    unknown,
                })
            }
        })
    }
}

impl Problems for RawTier {
    fn problems(&self, out: &mut Vec<toml_span::Error>) {
        match self {
            RawTier::Kv(t) => t.unknown.problems(out),
            RawTier::Embedded(t) => t.unknown.problems(out),
            RawTier::Http(t) => t.unknown.problems(out),
        }
    }
}

/// `limit` when the policy does not say.
pub const DEFAULT_LIMIT: u64 = 10;

impl RawTier {
    pub fn name(&self) -> &Spanned<Name> {
        match self {
            RawTier::Kv(t) => &t.name,
            RawTier::Embedded(t) => &t.name,
            RawTier::Http(t) => &t.name,
        }
    }

    pub fn kind_span(&self) -> Span {
        match self {
            RawTier::Kv(t) => t.kind_span,
            RawTier::Embedded(t) => t.kind_span,
            RawTier::Http(t) => t.kind_span,
        }
    }

    pub fn span(&self) -> Span {
        match self {
            RawTier::Kv(t) => t.span,
            RawTier::Embedded(t) => t.span,
            RawTier::Http(t) => t.span,
        }
    }

    pub fn cache_control(&self) -> Option<&Spanned<CacheControl>> {
        match self {
            RawTier::Kv(t) => t.cache_control.as_ref(),
            RawTier::Embedded(t) => t.cache_control.as_ref(),
            RawTier::Http(t) => t.cache_control.as_ref(),
        }
    }

    pub fn lower(&self) -> Option<Tier> {
        let kind = match self {
            RawTier::Kv(kv) => {
                let key = Template::parse(kv.key.value.as_str()).ok()?;
                TierKind::Kv(KvTier {
                    binding: kv.binding.value.0.clone(),
                    key: if kv.hash_key.is_some_and(|h| h.value.0) {
                        key.hashed()
                    } else {
                        key
                    },
                    max_staleness_ms: kv.max_staleness.value.0,
                    read_timeout_ms: kv.read_timeout.value.0,
                    write_through: kv.write_through.is_some_and(|w| w.value.0),
                    refresh_ms: kv.refresh.map_or(60_000, |r| r.value.0),
                    published: kv.published.is_some_and(|p| p.value.0),
                })
            }
            RawTier::Embedded(e) => {
                let limit = e.limit.map_or(DEFAULT_LIMIT, |l| l.value.0) as u32;
                TierKind::Embedded(match &e.query {
                    Some(q) => EmbeddedTier::Keyword {
                        query: q.value.0.clone(),
                        limit,
                        no_match: e.no_match.map_or(NoMatch::Curated, |n| n.value.0),
                    },
                    None => EmbeddedTier::Curated {
                        by: e.by.as_ref().map(|b| b.value.0.clone()),
                        limit,
                    },
                })
            }
            RawTier::Http(h) => TierKind::Http(HttpTier {
                url: h.url.value.0.clone(),
                timeout_ms: h.timeout.value.0,
                credential_secret: h.credential_secret.as_ref().map(|s| s.value.0.clone()),
                result_path: result_path(h.result_path.as_ref()),
            }),
        };
        Some(Tier {
            name: self.name().value.0.clone(),
            kind,
            cache_control: self.cache_control().map(|c| c.value.0.clone()),
        })
    }
}

impl RawCascade {
    pub fn promise(&self) -> Promise {
        self.promise.map_or(Promise::AlwaysAnswer, |p| p.value.0)
    }

    /// The cascade, when every tier read.
    pub fn lower(&self) -> Option<Cascade> {
        let tiers = self
            .tiers
            .0
            .iter()
            .map(|t| t.get().and_then(RawTier::lower))
            .collect::<Option<Vec<_>>>()?;
        Some(Cascade {
            promise: self.promise(),
            tiers,
        })
    }
}
