//! [C-PRIVATE] One user's answer is never served to another: per-user tiers and
//! personalised live answers are not shared-cacheable, and identities come from a verified
//! source (or an explicit, warned opt-out).

use understudy_core::policy::ParamSource;

use super::model::{Model, Opt};
use super::Ctx;
use crate::codes::Code;

/// Whether a shared cache (a CDN, a proxy) may store an answer with this Cache-Control.
pub fn is_shared_cacheable(cc: &str) -> bool {
    let lower = cc.to_ascii_lowercase();
    let directives: Vec<&str> = lower
        .split(',')
        .map(|d| d.trim().split('=').next().unwrap_or("").trim())
        .collect();
    if directives.contains(&"no-store") {
        return false;
    }
    directives.contains(&"public")
        || directives.contains(&"s-maxage")
        || !directives.contains(&"private")
}

pub fn check(ctx: &mut Ctx, m: &Model<'_>) {
    per_user_tiers(ctx, m);
    live_answers(ctx, m);
    identity_sources(ctx, m);
}

fn per_user_tiers(ctx: &mut Ctx, m: &Model<'_>) {
    let (Some(params), Some(disclosure)) = (m.params(), &m.disclosure) else {
        return;
    };
    for (_, t) in m.tiers() {
        if !t.model.is_per_user(&params) {
            continue;
        }
        let Some(cc) = t.model.cache_control_with(&params, disclosure) else {
            continue;
        };
        if !is_shared_cacheable(cc) {
            continue;
        }
        let span = t
            .raw
            .cache_control()
            .map(|c| c.span)
            .or_else(|| {
                m.raw_disclosure
                    .and_then(|d| d.private_cache_control.as_ref())
                    .map(|c| c.span)
            })
            .unwrap_or(t.raw.name().span);
        ctx.push(
            ctx.diag(
                Code::SharedCachePerUser,
                format!(
                    "tier `{}` is keyed by a user identity but its answers carry `Cache-Control: {cc}`",
                    t.model.name
                ),
            )
            .at(span, "shared caches may store this")
            .note("a CDN or proxy could serve one user's fallback answer to another")
            .help(format!(
                "use a private Cache-Control for this tier, e.g. `cache_control = \"private, max-age={}\"`",
                disclosure.retry_after_s.unwrap_or(30).max(1)
            )),
        );
    }
}

/// Live answers are personalised when a parameter is an identity (`is_personalized: true`).
fn live_answers(ctx: &mut Ctx, m: &Model<'_>) {
    let Some(disclosure) = &m.disclosure else {
        return;
    };
    let Some(identity) = m.params.iter().find(|p| p.model.identity) else {
        return;
    };
    let cc = &disclosure.live_cache_control;
    if !is_shared_cacheable(cc) {
        return;
    }
    let span = m
        .raw_disclosure
        .and_then(|d| d.live_cache_control.as_ref())
        .map_or(identity.key_span, |c| c.span);
    ctx.push(
        ctx.diag(
            Code::LiveAnswerPublic,
            format!(
                "live answers are personalised (parameter `{}` is an identity) but carry `Cache-Control: {cc}`",
                identity.model.name
            ),
        )
        .at(span, "shared caches may store this")
        .also(identity.key_span, "the identity parameter")
        .note("a CDN could serve one user's live answer to another")
        .help("make `disclosure.live_cache_control` private, e.g. \"private, no-store\" (the default)"),
    );
}

fn identity_sources(ctx: &mut Ctx, m: &Model<'_>) {
    for p in &m.params {
        if !p.model.identity {
            continue;
        }
        let span = p.raw.source.span;
        let name = &p.model.name;
        if p.model.source == ParamSource::TokenClaim {
            if matches!(m.identity, Opt::Absent) {
                ctx.push(
                    ctx.diag(
                        Code::MissingKey,
                        format!("`{name}` is a token claim but the policy has no `[identity]` table to verify tokens"),
                    )
                    .at(span, "cannot be verified")
                    .help("add `[identity]` with `secret`, `issuer` and `audience`"),
                );
            }
            continue;
        }
        let from = p.model.source.as_str();
        if p.model.allow_unverified {
            ctx.push(
                ctx.diag(
                    Code::UnverifiedIdentityOptOut,
                    format!("identity parameter `{name}` comes from the {from} without verification (explicit opt-out)"),
                )
                .at(span, "anyone can set this")
                .help("use `source = \"token_claim\"` before serving real users"),
            );
        } else {
            ctx.push(
                ctx.diag(
                    Code::UnverifiedIdentity,
                    format!("identity parameter `{name}` is read from the {from}, which any client can set"),
                )
                .at(span, "unverified identity")
                .note("with it, one user could read another user's per-user tier")
                .help("read it from a verified token claim (`source = \"token_claim\"`), or opt out with `allow_unverified_identity = true`"),
            );
        }
    }
}
