//! `[cascade]` and its `[[cascade.tiers]]`: the ordered fallback tiers [P-TIERS].

use understudy_core::policy::*;

use super::node::{as_choice, Ctx, Table};
use crate::codes;
use understudy_core::template::Template;

use super::node::{self, Node, NodeKind};
use super::origin::result_path;

pub(super) fn cascade(ctx: &mut Ctx, mut t: Table) -> Option<Cascade> {
    let promise = t
        .opt_choice(
            ctx,
            "promise",
            &[
                ("always_answer", Promise::AlwaysAnswer),
                ("best_effort", Promise::BestEffort),
            ],
        )
        .unwrap_or(Promise::AlwaysAnswer);
    let mut tiers = Vec::new();
    let mut ok = true;
    match t.take(ctx, "tiers") {
        Some(Node {
            kind: NodeKind::Array(items),
            ..
        }) => {
            for (i, item) in items.into_iter().enumerate() {
                let path = format!("cascade.tiers[{i}]");
                ctx.spans.insert(path.clone(), item.span);
                match Table::new(ctx, &path, item).and_then(|tt| tier(ctx, &path, tt)) {
                    Some(tier) => tiers.push(tier),
                    None => ok = false,
                }
            }
        }
        Some(other) => {
            node::wrong_type(
                ctx,
                "cascade.tiers",
                other.span,
                "an array of tables (`[[cascade.tiers]]`)",
                &other.kind,
            );
            ok = false;
        }
        None => {}
    }
    if tiers.is_empty() && ok {
        let span = ctx.span_of("cascade.tiers").unwrap_or(t.span);
        ctx.error(
            codes::EMPTY_CASCADE,
            span,
            "the cascade has no tier",
            "no `[[cascade.tiers]]`",
            "add fallback tiers in order, ending with an `embedded` tier for endpoints that must answer",
        );
        ok = false;
    }
    t.finish(ctx);
    if !ok {
        return None;
    }
    Some(Cascade { promise, tiers })
}

fn template(ctx: &mut Ctx, path: &str, value: Option<String>) -> Option<Template> {
    let v = value?;
    match Template::parse(&v) {
        Ok(t) => Some(t),
        Err(e) => {
            let span = ctx
                .span_of(path)
                .map(|s| (s.0 + 1 + e.offset, s.0 + 2 + e.offset))
                .unwrap_or((0, 0));
            ctx.error(
                codes::BAD_TEMPLATE,
                span,
                format!("`{path}`: {}", e.message),
                "here",
                "write the key as text with `{param}` placeholders, e.g. \"user_rec:{user_id}\"",
            );
            None
        }
    }
}

fn tier(ctx: &mut Ctx, path: &str, mut t: Table) -> Option<Tier> {
    #[derive(Clone, Copy)]
    enum Kind {
        Kv,
        Embedded,
        Http,
    }
    let name = t.req_str(ctx, "name", "\"user\"");
    let kind_word = match t.req(ctx, "kind", "\"kv\"") {
        Some(n) => as_choice(
            ctx,
            &format!("{path}.kind"),
            n,
            &[
                ("kv", Kind::Kv),
                ("embedded", Kind::Embedded),
                ("http", Kind::Http),
            ],
        ),
        None => None,
    };
    let known_kind = kind_word.is_some();
    let cache_control = t.opt_str(ctx, "cache_control");
    let kind = match kind_word {
        Some(Kind::Kv) => {
            let binding = t.req_str(ctx, "binding", "\"USER_RECS\"");
            let key_src = t.req_str(ctx, "key", "\"user_rec:{user_id}\"");
            let key = template(ctx, &format!("{path}.key"), key_src);
            let max_staleness = t.req_duration(ctx, "max_staleness", "\"4h\"");
            let read_timeout = t.req_duration(ctx, "read_timeout", "\"8ms\"");
            let write_through = t.opt_bool(ctx, "write_through").unwrap_or(false);
            let refresh_ms = t.opt_duration(ctx, "refresh").unwrap_or(60_000);
            if refresh_ms < 1_000 {
                if let Some(span) = ctx.span_of(&format!("{path}.refresh")) {
                    ctx.error(
                        codes::INVALID_VALUE,
                        span,
                        "Workers KV takes at most one write per key per second",
                        "below 1s",
                        "set `refresh` to 1s or more",
                    );
                }
            }
            (|| {
                Some(TierKind::Kv(KvTier {
                    binding: binding?,
                    key: key?,
                    max_staleness_ms: max_staleness?,
                    read_timeout_ms: read_timeout?,
                    write_through,
                    refresh_ms,
                }))
            })()
        }
        Some(Kind::Embedded) => {
            #[derive(Clone, Copy)]
            enum Mode {
                Curated,
                Keyword,
            }
            let mode = t
                .opt_choice(
                    ctx,
                    "mode",
                    &[("curated", Mode::Curated), ("keyword", Mode::Keyword)],
                )
                .unwrap_or(Mode::Curated);
            let limit = t.opt_uint(ctx, "limit", 1000).unwrap_or(10) as u32;
            match mode {
                Mode::Curated => {
                    let by = t.opt_str(ctx, "by");
                    Some(TierKind::Embedded(EmbeddedTier::Curated { by, limit }))
                }
                Mode::Keyword => {
                    let query = t.req_str(ctx, "query", "\"q\"");
                    query.map(|query| TierKind::Embedded(EmbeddedTier::Keyword { query, limit }))
                }
            }
        }
        Some(Kind::Http) => {
            let url = t.req_str(ctx, "url", "\"https://fallback-model.example/v1/score\"");
            let timeout = t.req_duration(ctx, "timeout", "\"100ms\"");
            let credential_secret = t.opt_str(ctx, "credential_secret");
            let rp = t
                .opt_str(ctx, "result_path")
                .map(|s| result_path(&s))
                .unwrap_or_else(|| vec!["items".into()]);
            match (url, timeout) {
                (Some(url), Some(timeout_ms)) => Some(TierKind::Http(HttpTier {
                    url,
                    timeout_ms,
                    credential_secret,
                    result_path: rp,
                })),
                _ => None,
            }
        }
        None => None,
    };
    // When the kind is unknown its keys cannot be judged: report the kind alone.
    if known_kind {
        t.finish(ctx);
    }
    Some(Tier {
        name: name?,
        kind: kind?,
        cache_control,
    })
}
