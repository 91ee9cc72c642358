//! `kind = "embedded"`: the baked catalog, answered from memory — `mode = "curated"`
//! (default; `by` allowed) or `mode = "keyword"` (`query` required; `no_match` allowed),
//! and the rule only a keyword tier has: as the final net it must answer when nothing
//! matches [C-EXPIRY].

use schemars::{JsonSchema, Schema};
use understudy_core::policy::{EmbeddedTier, NoMatch};

use super::{Check, Raw};
use crate::codes::Code;
use crate::diag::Diagnostic;
use crate::parse::leaf::*;
use crate::parse::table::Table;

/// `limit` when the policy does not say.
pub const DEFAULT_LIMIT: u64 = 10;

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

/// The baked catalog: answered from memory, no I/O.
#[derive(Debug, Clone, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(transform = embedded_modes)]
#[schemars(rename = "Embedded")]
pub struct RawEmbedded {
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

impl Raw for RawEmbedded {
    type Model = EmbeddedTier;

    fn read(t: &mut Table<'_>) -> Option<RawEmbedded> {
        let mode: Option<Spanned<Word<Mode>>> = t.opt("mode");
        let keyword = mode.is_some_and(|m| m.value.0 == Mode::Keyword);
        let (by, query, no_match) = if keyword {
            let query = t.req("query");
            (None, query, t.opt("no_match"))
        } else {
            (t.opt("by"), None, None)
        };
        let limit = t.opt("limit");
        Some(RawEmbedded {
            mode,
            by,
            query,
            limit,
            no_match,
        })
    }

    fn lower(&self) -> Option<EmbeddedTier> {
        let limit = self.limit.map_or(DEFAULT_LIMIT, |l| l.value.0) as u32;
        Some(match &self.query {
            Some(q) => EmbeddedTier::Keyword {
                query: q.value.0.clone(),
                limit,
                no_match: self.no_match.map_or(NoMatch::Curated, |n| n.value.0),
            },
            None => EmbeddedTier::Curated {
                by: self.by.as_ref().map(|b| b.value.0.clone()),
                limit,
            },
        })
    }

    /// A final keyword tier that passes on when nothing matches breaks `always_answer`.
    fn check(&self, model: &EmbeddedTier, cx: &Check<'_>) -> Vec<Diagnostic> {
        let EmbeddedTier::Keyword {
            no_match: NoMatch::NextTier,
            query,
            ..
        } = model
        else {
            return Vec::new();
        };
        if !cx.final_net {
            return Vec::new();
        }
        let span = self.no_match.map_or(cx.tier.span, |n| n.span);
        vec![cx.diag(
            Code::NoMatchUnanswered,
            format!(
                "the final tier `{}` has no answer when no catalog title matches `{query}` (or the request has none): the promised answer becomes a 503",
                cx.tier.name.value.0
            ),
        )
        .at(span, "passes on to a tier that does not exist")
        .note("for example a search for \"zebra\" over a catalog of headphones")
        .help("set `no_match = \"curated\"` (the default: the curated list) or `no_match = \"empty\"` (an empty, disclosed result)")]
    }
}
