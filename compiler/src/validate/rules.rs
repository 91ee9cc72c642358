//! The whole-policy rules [C-*]: each takes the parsed policy and the span index and
//! reports what it finds. None of them stops the others.

use understudy_core::policy::*;
use understudy_core::time::format_duration as fmt;

use crate::codes;
use crate::diag::{Diagnostic, Label, Severity};
use crate::parse::host_of;
use crate::parse::node::{Ctx, Span};

pub fn check_all(ctx: &mut Ctx, p: &Policy) {
    templates(ctx, p);
    duplicate_tiers(ctx, p);
    budget(ctx, p);
    local_last(ctx, p);
    failure_domain(ctx, p);
    privacy(ctx, p);
    throttling(ctx, p);
    breaker_can_trigger(ctx, p);
}

fn span(ctx: &Ctx, path: &str) -> Span {
    ctx.span_of(path).unwrap_or((0, 0))
}

// One call per finding reads best with every field named at the call site.
#[allow(clippy::too_many_arguments)]
fn push(
    ctx: &mut Ctx,
    code: &'static str,
    severity: Severity,
    span: Span,
    message: String,
    label: &str,
    notes: Vec<String>,
    help: String,
) {
    ctx.diags.push(Diagnostic {
        code,
        severity,
        message,
        file: ctx.file.clone(),
        span: Some(span),
        label: label.to_string(),
        secondary: Vec::new(),
        notes,
        help,
    });
}

/// Every parameter a tier refers to exists.
fn templates(ctx: &mut Ctx, p: &Policy) {
    let declared = p
        .params
        .iter()
        .map(|p| p.name.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    let help = |name: &str| {
        if declared.is_empty() {
            format!("declare it: add a `[params.{name}]` table with its `source`")
        } else {
            format!("declare `[params.{name}]`, or use one of the declared parameters: {declared}")
        }
    };
    for (i, tier) in p.cascade.tiers.iter().enumerate() {
        let (path, names): (String, Vec<&str>) = match &tier.kind {
            TierKind::Kv(kv) => (format!("cascade.tiers[{i}].key"), kv.key.params().collect()),
            TierKind::Embedded(EmbeddedTier::Curated { by: Some(b), .. }) => {
                (format!("cascade.tiers[{i}].by"), vec![b.as_str()])
            }
            TierKind::Embedded(EmbeddedTier::Keyword { query, .. }) => {
                (format!("cascade.tiers[{i}].query"), vec![query.as_str()])
            }
            _ => continue,
        };
        let whole = span(ctx, &path);
        for name in names {
            if p.param(name).is_none() {
                // Point at `{name}` inside the string when it can be found.
                let sp = ctx
                    .file_text_offset(whole, &format!("{{{name}}}"))
                    .unwrap_or(whole);
                push(
                    ctx,
                    codes::UNKNOWN_TEMPLATE_PARAM,
                    Severity::Error,
                    sp,
                    format!(
                        "tier `{}` refers to the parameter `{name}`, which is not declared",
                        tier.name
                    ),
                    "unknown parameter",
                    vec![],
                    help(name),
                );
            }
        }
    }
}

fn duplicate_tiers(ctx: &mut Ctx, p: &Policy) {
    for (i, tier) in p.cascade.tiers.iter().enumerate() {
        if let Some(first) = p.cascade.tiers[..i]
            .iter()
            .position(|t| t.name == tier.name)
        {
            let sp = span(ctx, &format!("cascade.tiers[{i}].name"));
            let first_sp = span(ctx, &format!("cascade.tiers[{first}].name"));
            ctx.diags.push(Diagnostic {
                code: codes::DUPLICATE_TIER,
                severity: Severity::Error,
                message: format!("two tiers are named `{}`", tier.name),
                file: ctx.file.clone(),
                span: Some(sp),
                label: "second use of the name".into(),
                secondary: vec![Label {
                    span: first_sp,
                    message: "first used here".into(),
                }],
                notes: vec![],
                help:
                    "give each tier its own name: it appears in X-Fallback-Tier, logs and metrics"
                        .into(),
            });
        }
    }
}

/// The origin phase's worst case: the race deadline, or every attempt plus its backoff
/// when that is shorter.
pub fn origin_worst_case(p: &Policy) -> (u64, String) {
    let o = &p.origin;
    let attempts = o.attempts.max(1) as u64;
    let all_attempts = attempts * o.attempt_timeout_ms + (attempts - 1) * o.backoff_max_ms;
    let worst = all_attempts.min(p.budget.deadline_ms);
    let how = if attempts == 1 {
        format!(
            "min(deadline {}, 1 attempt × {}) = {}",
            fmt(p.budget.deadline_ms),
            fmt(o.attempt_timeout_ms),
            fmt(worst)
        )
    } else {
        format!(
            "min(deadline {}, {attempts} attempts × {} + {} backoffs × {}) = {}",
            fmt(p.budget.deadline_ms),
            fmt(o.attempt_timeout_ms),
            attempts - 1,
            fmt(o.backoff_max_ms),
            fmt(worst)
        )
    };
    (worst, how)
}

fn budget(ctx: &mut Ctx, p: &Policy) {
    let (origin, how) = origin_worst_case(p);
    let mut notes = vec![format!("origin race: {how}")];
    let mut total = origin;
    for t in &p.cascade.tiers {
        let ms = t.kind.timeout_ms();
        let what = match &t.kind {
            TierKind::Kv(_) => "KV read timeout",
            TierKind::Http(_) => "HTTP timeout",
            TierKind::Embedded(_) => "embedded, no I/O",
        };
        notes.push(format!("+ tier `{}` ({what}): {}", t.name, fmt(ms)));
        total += ms;
    }
    notes.push(format!(
        "worst case: {} against budget.total {}",
        fmt(total),
        fmt(p.budget.total_ms)
    ));
    if total > p.budget.total_ms {
        let sp = span(ctx, "budget.total");
        push(
            ctx,
            codes::BUDGET_EXCEEDED,
            Severity::Error,
            sp,
            format!("the worst-case path takes {}, over the {} budget by {}", fmt(total), fmt(p.budget.total_ms), fmt(total - p.budget.total_ms)),
            "the total budget",
            notes,
            format!("lower `budget.deadline` or a tier timeout by {} in total, or raise `budget.total` if the SLA allows", fmt(total - p.budget.total_ms)),
        );
    }
    if p.budget.deadline_ms > p.budget.total_ms {
        let sp = span(ctx, "budget.deadline");
        push(
            ctx,
            codes::BUDGET_EXCEEDED,
            Severity::Error,
            sp,
            format!(
                "the origin deadline {} is longer than the total budget {}",
                fmt(p.budget.deadline_ms),
                fmt(p.budget.total_ms)
            ),
            "deadline over budget",
            vec![],
            "the deadline must leave time for the fallback tiers: lower it below `budget.total`"
                .into(),
        );
    }
}

fn local_last(ctx: &mut Ctx, p: &Policy) {
    if p.cascade.promise != Promise::AlwaysAnswer {
        return;
    }
    let Some(last) = p.cascade.tiers.last() else {
        return;
    };
    if !matches!(last.kind, TierKind::Embedded(_)) {
        let i = p.cascade.tiers.len() - 1;
        let sp = span(ctx, &format!("cascade.tiers[{i}].kind"));
        push(
            ctx,
            codes::FINAL_TIER_NOT_LOCAL,
            Severity::Error,
            sp,
            format!("the last tier `{}` is `{}`, so the promised answer depends on the network", last.name, last.kind.name()),
            "the final net needs the network",
            vec!["cascade.promise is \"always_answer\" (the default)".into()],
            "add an `embedded` tier last (answered from the baked catalog), or set `cascade.promise = \"best_effort\"`".into(),
        );
    }
    if p.cascade
        .tiers
        .iter()
        .any(|t| matches!(t.kind, TierKind::Embedded(_)))
        && p.catalog.is_none()
    {
        let i = p
            .cascade
            .tiers
            .iter()
            .position(|t| matches!(t.kind, TierKind::Embedded(_)))
            .unwrap_or(0);
        let sp = span(ctx, &format!("cascade.tiers[{i}].kind"));
        push(
            ctx,
            codes::MISSING_KEY,
            Severity::Error,
            sp,
            "an embedded tier needs a `[catalog]` to bake".into(),
            "nothing to answer from",
            vec![],
            "add a `[catalog]` table with `stubs` and `inventory`".into(),
        );
    }
}

fn failure_domain(ctx: &mut Ctx, p: &Policy) {
    let origin_host = host_of(&p.origin.url);
    let origin_secret = p.origin.credential_secret.as_deref();
    for (i, t) in p.cascade.tiers.iter().enumerate() {
        let mut found: Vec<(String, String)> = Vec::new();
        match &t.kind {
            TierKind::Http(h) => {
                if host_of(&h.url).is_some() && host_of(&h.url) == origin_host {
                    found.push((
                        format!("cascade.tiers[{i}].url"),
                        format!(
                            "same host as the origin (`{}`)",
                            origin_host.clone().unwrap_or_default()
                        ),
                    ));
                }
                if h.credential_secret.is_some() && h.credential_secret.as_deref() == origin_secret
                {
                    found.push((
                        format!("cascade.tiers[{i}].credential_secret"),
                        format!(
                            "same credential secret as the origin (`{}`)",
                            origin_secret.unwrap_or_default()
                        ),
                    ));
                }
            }
            TierKind::Kv(kv) => {
                if Some(kv.binding.as_str()) == origin_secret {
                    found.push((
                        format!("cascade.tiers[{i}].binding"),
                        format!("binding `{}` is the origin's credential secret", kv.binding),
                    ));
                }
            }
            TierKind::Embedded(_) => {}
        }
        for (path, why) in found {
            let sp = span(ctx, &path);
            let origin_sp = span(ctx, "origin.url");
            ctx.diags.push(Diagnostic {
                code: codes::SHARED_FAILURE_DOMAIN,
                severity: Severity::Error,
                message: format!("tier `{}` shares a failure domain with the origin: {why}", t.name),
                file: ctx.file.clone(),
                span: Some(sp),
                label: "shared with the origin".into(),
                secondary: vec![Label { span: origin_sp, message: "the origin".into() }],
                notes: vec!["an outage of the origin's host or credential would take this tier down with it".into()],
                help: "move the tier to its own host and credential, or replace it with a KV or embedded tier".into(),
            });
        }
    }
}

fn is_shared_cacheable(cc: &str) -> bool {
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

fn privacy(ctx: &mut Ctx, p: &Policy) {
    for (i, t) in p.cascade.tiers.iter().enumerate() {
        if !p.tier_is_per_user(t) {
            continue;
        }
        if let Some(cc) = p.tier_cache_control(t) {
            if is_shared_cacheable(cc) {
                let path = if t.cache_control.is_some() {
                    format!("cascade.tiers[{i}].cache_control")
                } else {
                    "disclosure.private_cache_control".to_string()
                };
                let sp = ctx
                    .span_of(&path)
                    .unwrap_or_else(|| span(ctx, &format!("cascade.tiers[{i}].key")));
                push(
                    ctx,
                    codes::SHARED_CACHE_PER_USER,
                    Severity::Error,
                    sp,
                    format!("tier `{}` is keyed by a user identity but its answers carry `Cache-Control: {cc}`", t.name),
                    "shared caches may store this",
                    vec!["a CDN or proxy could serve one user's fallback answer to another".into()],
                    format!("use a private Cache-Control for this tier, e.g. `cache_control = \"private, max-age={}\"`", p.disclosure.retry_after_s.unwrap_or(30).max(1)),
                );
            }
        }
    }
    for param in &p.params {
        if !param.identity {
            continue;
        }
        let path = format!("params.{}.source", param.name);
        let sp = span(ctx, &path);
        if param.source == ParamSource::TokenClaim {
            if p.identity.is_none() {
                push(ctx, codes::MISSING_KEY, Severity::Error, sp, format!("`{}` is a token claim but the policy has no `[identity]` table to verify tokens", param.name), "cannot be verified", vec![], "add `[identity]` with `secret`, `issuer` and `audience`".into());
            }
            continue;
        }
        if param.allow_unverified {
            push(
                ctx,
                codes::UNVERIFIED_IDENTITY_OPT_OUT,
                Severity::Warning,
                sp,
                format!("identity parameter `{}` comes from the {} without verification (explicit opt-out)", param.name, param.source.as_str()),
                "anyone can set this",
                vec![],
                "use `source = \"token_claim\"` before serving real users".into(),
            );
        } else {
            push(
                ctx,
                codes::UNVERIFIED_IDENTITY,
                Severity::Error,
                sp,
                format!("identity parameter `{}` is read from the {}, which any client can set", param.name, param.source.as_str()),
                "unverified identity",
                vec!["with it, one user could read another user's per-user tier".into()],
                "read it from a verified token claim (`source = \"token_claim\"`), or opt out with `allow_unverified_identity = true`".into(),
            );
        }
    }
}

fn throttling(ctx: &mut Ctx, p: &Policy) {
    if p.disclosure.retry_after_s.is_none() {
        let sp = ctx
            .span_of("disclosure")
            .unwrap_or_else(|| span(ctx, "cascade"));
        push(
            ctx,
            codes::UNTHROTTLED_DEGRADATION,
            Severity::Error,
            sp,
            "degraded answers would carry no `Retry-After`".into(),
            "no retry_after",
            vec!["clients retrying degraded answers at once turned 2,400 req/s into 12,000 in seed 000's incident".into()],
            "set `disclosure.retry_after`, e.g. \"5s\"".into(),
        );
    }
    for (i, t) in p.cascade.tiers.iter().enumerate() {
        if p.tier_cache_control(t).is_none() {
            let sp = span(ctx, &format!("cascade.tiers[{i}].name"));
            push(
                ctx,
                codes::UNTHROTTLED_DEGRADATION,
                Severity::Error,
                sp,
                format!("degraded answers from tier `{}` would carry no `Cache-Control`", t.name),
                "no Cache-Control",
                vec![],
                "set `disclosure.cache_control` (seed 000: \"public, max-age=30\") or this tier's `cache_control`".into(),
            );
        }
    }
    let o = &p.origin;
    if o.attempts > 1 && !o.idempotent && o.idempotency_key_header.is_none() {
        let sp = span(ctx, "origin.attempts");
        push(
            ctx,
            codes::UNSAFE_RETRY,
            Severity::Error,
            sp,
            format!(
                "the origin is called with {} and retried ({} attempts) without an idempotency key",
                o.method.as_str(),
                o.attempts
            ),
            "retries a non-idempotent call",
            vec![],
            "set `origin.attempts = 1`, or `origin.idempotency_key_header = \"Idempotency-Key\"`, or — if the call has no side effect (a POST that only scores) — `origin.idempotent = true`"
                .into(),
        );
    }
    if let Some(h) = &o.hedge {
        if !o.idempotent && o.idempotency_key_header.is_none() {
            let sp = ctx
                .span_of("origin.hedge")
                .unwrap_or_else(|| span(ctx, "origin"));
            push(
                ctx,
                codes::UNSAFE_RETRY,
                Severity::Error,
                sp,
                format!(
                    "the origin is called with {} and hedged (a second, identical request) without an idempotency key",
                    o.method.as_str()
                ),
                "hedges a non-idempotent call",
                vec![],
                "remove `[origin.hedge]`, or set `origin.idempotency_key_header = \"Idempotency-Key\"` (requests without the key are then not hedged)"
                    .into(),
            );
        }
        if let Some(after) = h.after_ms.filter(|a| *a >= o.attempt_timeout_ms) {
            let sp = ctx
                .span_of("origin.hedge.after")
                .unwrap_or_else(|| span(ctx, "origin"));
            push(
                ctx,
                codes::INVALID_VALUE,
                Severity::Error,
                sp,
                format!(
                    "the hedge would start after {after} ms, but an attempt times out after {} ms",
                    o.attempt_timeout_ms
                ),
                "the hedge never runs",
                vec![],
                "hedge earlier than the attempt's timeout, or write after = \"p95\"".into(),
            );
        }
    }
}

fn breaker_can_trigger(ctx: &mut Ctx, p: &Policy) {
    let Breaker::Rate(r) = &p.breaker else { return };
    let Some(rps) = p.service.expected_rps else {
        return;
    };
    let window_calls = rps as f64 * r.window_ms as f64 / 1000.0;
    if (r.min_calls as f64) > window_calls {
        let sp = ctx
            .span_of("breaker.min_calls")
            .unwrap_or_else(|| span(ctx, "breaker.window"));
        push(
            ctx,
            codes::BREAKER_NEVER_TRIGGERS,
            Severity::Error,
            sp,
            format!("the breaker needs {} calls in a window but {rps} req/s over {} brings at most {window_calls:.0}", r.min_calls, fmt(r.window_ms)),
            "can never be reached",
            vec![format!("{rps} req/s × {} = {window_calls:.0} calls per window < min_calls {}", fmt(r.window_ms), r.min_calls)],
            "lower `breaker.min_calls` or lengthen `breaker.window`".into(),
        );
    }
    let probe_calls = window_calls * r.probe_fraction;
    if (r.probe_min_calls as f64) > probe_calls {
        let sp = ctx
            .span_of("breaker.probe_min_calls")
            .unwrap_or_else(|| span(ctx, "breaker.probe_fraction"));
        push(
            ctx,
            codes::BREAKER_NEVER_TRIGGERS,
            Severity::Error,
            sp,
            format!("probing needs {} calls but {} of {rps} req/s over {} brings {probe_calls:.1}: the breaker would never close", r.probe_min_calls, r.probe_fraction, fmt(r.window_ms)),
            "can never be reached",
            vec![format!("{rps} req/s × {} × {} = {probe_calls:.1} probe calls per window < probe_min_calls {}", fmt(r.window_ms), r.probe_fraction, r.probe_min_calls)],
            "lower `breaker.probe_min_calls` or raise `breaker.probe_fraction`".into(),
        );
    }
}
