//! `kind = "kv"`: a Workers KV namespace — its keys, and the rules only a KV tier has: its
//! longest key fits Workers KV's 512-byte limit [C-PARAMS], and a published tier is not
//! written through [C-STUBS].

use schemars::JsonSchema;
use understudy_core::policy::{KvTier, Param, ParamType};
use understudy_core::template::{Part as TemplatePart, Template};

use super::{Check, Raw};
use crate::codes::Code;
use crate::diag::Diagnostic;
use crate::parse::leaf::*;
use crate::parse::origin::{DAY, MINUTE};
use crate::parse::table::Table;

/// Workers KV's key size limit, in bytes.
pub const KV_KEY_LIMIT: usize = 512;
/// The length of an identity value in a key (the first 32 hex digits of its SHA-256).
const IDENTITY_KEY_LEN: usize = 32;
/// A hashed key's digest (SHA-256, hex).
const HASH_LEN: usize = 64;

/// A Workers KV namespace.
#[derive(Debug, Clone, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Kv")]
pub struct RawKv {
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
}

impl Raw for RawKv {
    type Model = KvTier;

    fn read(t: &mut Table<'_>) -> Option<RawKv> {
        let binding = t.req("binding");
        let key = t.req("key");
        let hash_key = t.opt("hash_key");
        let max_staleness = t.req("max_staleness");
        let read_timeout = t.req("read_timeout");
        let write_through = t.opt("write_through");
        let refresh = t.opt("refresh");
        let published = t.opt("published");
        Some(RawKv {
            binding: binding?,
            key: key?,
            hash_key,
            max_staleness: max_staleness?,
            read_timeout: read_timeout?,
            write_through,
            refresh,
            published,
        })
    }

    fn lower(&self) -> Option<KvTier> {
        let key = Template::parse(self.key.value.as_str()).ok()?;
        Some(KvTier {
            binding: self.binding.value.0.clone(),
            key: if self.hash_key.is_some_and(|h| h.value.0) {
                key.hashed()
            } else {
                key
            },
            max_staleness_ms: self.max_staleness.value.0,
            read_timeout_ms: self.read_timeout.value.0,
            write_through: self.write_through.is_some_and(|w| w.value.0),
            refresh_ms: self.refresh.map_or(60_000, |r| r.value.0),
            published: self.published.is_some_and(|p| p.value.0),
        })
    }

    fn check(&self, kv: &KvTier, cx: &Check<'_>) -> Vec<Diagnostic> {
        let mut out = Vec::new();
        out.extend(self.published_write_through(kv, cx));
        if let Some(params) = cx.params {
            out.extend(self.key_length(kv, params, cx));
        }
        out
    }
}

impl RawKv {
    /// [C-STUBS] A published tier is written by `understudy publish` alone: the edge's
    /// write-through would replace its validated lists with unvalidated ones.
    fn published_write_through(&self, kv: &KvTier, cx: &Check<'_>) -> Option<Diagnostic> {
        if !(kv.published && kv.write_through) {
            return None;
        }
        let (Some(p), Some(w)) = (&self.published, &self.write_through) else {
            return None;
        };
        Some(
            cx.diag(
                Code::PublishedWriteThrough,
                format!(
                    "tier `{}` is published and written through: the edge would overwrite its \
                     validated lists",
                    cx.tier.name.value.0
                ),
            )
            .at(w.span, "the edge writes live answers here")
            .also(p.span, "curated lists, validated by `understudy publish`")
            .note("a written-through entry has no validation, so the tier would refuse it (KV_NOT_VALIDATED)")
            .help("remove `write_through` from this tier, or write live answers to a KV tier of their own"),
        )
    }

    /// [C-PARAMS] The longest key the template renders fits Workers KV's limit.
    fn key_length(&self, kv: &KvTier, params: &[Param], cx: &Check<'_>) -> Option<Diagnostic> {
        let (n, notes) = longest_key(&kv.key, params);
        if n <= KV_KEY_LIMIT {
            return None;
        }
        let help = if kv.key.hashed {
            "shorten the key's literal prefix".to_string()
        } else {
            "lower the `max_len` of the parameters above, or set `hash_key = true` on the tier (the edge then stores the prefix and a SHA-256 of the key)".to_string()
        };
        Some(
            cx.diag(
                Code::KvKeyTooLong,
                format!(
                    "tier `{}`'s keys can be {n} bytes, over Workers KV's {KV_KEY_LIMIT}-byte key limit",
                    cx.tier.name.value.0
                ),
            )
            .at(self.key.span, "can render too long a key")
            .notes(notes)
            .help(help),
        )
    }
}

/// The longest key a template can render, with the arithmetic.
fn longest_key(template: &Template, params: &[Param]) -> (usize, Vec<String>) {
    if template.hashed {
        let n = template.prefix().len() + HASH_LEN;
        return (
            n,
            vec![format!(
                "hashed: prefix `{}` ({} bytes) + SHA-256 ({HASH_LEN} hex digits) = {n} bytes",
                template.prefix(),
                template.prefix().len()
            )],
        );
    }
    let mut total = 0;
    let mut notes = Vec::new();
    for part in &template.parts {
        match part {
            TemplatePart::Lit(l) => {
                total += l.len();
                notes.push(format!("literal `{l}`: {} bytes", l.len()));
            }
            TemplatePart::Param(name) => {
                let Some(p) = params.iter().find(|p| &p.name == name) else {
                    continue;
                };
                let (n, why) = if p.identity {
                    (IDENTITY_KEY_LEN, "identity, hashed".to_string())
                } else if p.ty == ParamType::Integer {
                    (
                        p.max_len as usize,
                        format!("integer, max_len {}", p.max_len),
                    )
                } else {
                    (
                        3 * p.max_len as usize,
                        format!("max_len {} × 3 (percent-encoding)", p.max_len),
                    )
                };
                total += n;
                notes.push(format!("`{{{name}}}` ({why}): up to {n} bytes"));
            }
        }
    }
    notes.push(format!(
        "longest key: {total} bytes; Workers KV allows {KV_KEY_LIMIT}"
    ));
    (total, notes)
}
