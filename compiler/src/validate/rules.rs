//! The whole-policy rules [C-*]: each takes the parts that read and reports what it
//! finds. None of them stops the others; each skips only when a part it needs failed.

use understudy_core::policy::{Breaker, Promise};
use understudy_core::time::format_duration as fmt;

use super::model::{Model, Opt};
use super::{budget, events, fleet, params, privacy, Ctx};
use crate::codes::Code;
use crate::parse::host_of;
use crate::parse::tier::Check;

pub fn check_all(ctx: &mut Ctx, m: &Model<'_>) {
    params::check(ctx, m);
    duplicate_tiers(ctx, m);
    budget::check(ctx, m);
    local_last(ctx, m);
    failure_domain(ctx, m);
    kinds(ctx, m);
    privacy::check(ctx, m);
    throttling(ctx, m);
    breaker_can_trigger(ctx, m);
    fleet::check(ctx, m);
    transport(ctx, m);
    events::check(ctx, m);
    super::rollout::check(ctx, m);
}

fn duplicate_tiers(ctx: &mut Ctx, m: &Model<'_>) {
    let tiers: Vec<_> = m.tiers().collect();
    for (n, (_, t)) in tiers.iter().enumerate() {
        if let Some((_, first)) = tiers[..n]
            .iter()
            .find(|(_, f)| f.model.name == t.model.name)
        {
            ctx.push(
                ctx.diag(
                    Code::DuplicateTier,
                    format!("two tiers are named `{}`", t.model.name),
                )
                .at(t.raw.name().span, "second use of the name")
                .also(first.raw.name().span, "first used here")
                .help(
                    "give each tier its own name: it appears in X-Fallback-Tier, logs and metrics",
                ),
            );
        }
    }
}

fn local_last(ctx: &mut Ctx, m: &Model<'_>) {
    let Some(promise) = m.promise() else { return };
    if promise == Promise::AlwaysAnswer {
        if let Some(Some(last)) = m.tiers.last() {
            if !last.model.kind.local() {
                ctx.push(
                    ctx.diag(
                        Code::FinalTierNotLocal,
                        format!(
                            "the last tier `{}` is `{}`, so the promised answer depends on the network",
                            last.model.name,
                            last.model.kind.name()
                        ),
                    )
                    .at(last.raw.kind_span(), "the final net needs the network")
                    .note("cascade.promise is \"always_answer\" (the default)")
                    .help("add an `embedded` tier last (answered from the baked catalog), or set `cascade.promise = \"best_effort\"`"),
                );
            }
        }
    }
    if matches!(m.catalog, Opt::Absent) {
        if let Some((_, t)) = m.tiers().find(|(_, t)| t.model.kind.uses_catalog()) {
            ctx.push(
                ctx.diag(
                    Code::MissingKey,
                    format!(
                        "an {} tier needs a `[catalog]` to bake",
                        t.model.kind.name()
                    ),
                )
                .at(t.raw.kind_span(), "nothing to answer from")
                .help("add a `[catalog]` table with `stubs` and `inventory`"),
            );
        }
    }
}

fn failure_domain(ctx: &mut Ctx, m: &Model<'_>) {
    let Some((origin, raw_origin)) = &m.origin else {
        return;
    };
    let origin_host = host_of(&origin.url);
    let origin_secret = origin.credential_secret.as_deref();
    for (_, t) in m.tiers() {
        let kind = &t.model.kind;
        let at = |key: &str| t.raw.span_of(key).unwrap_or(t.raw.span());
        let mut found = Vec::new();
        if let Some(url) = kind.url() {
            if host_of(url.value).is_some() && host_of(url.value) == origin_host {
                found.push((
                    at(url.key),
                    format!(
                        "same host as the origin (`{}`)",
                        origin_host.clone().unwrap_or_default()
                    ),
                ));
            }
        }
        if let Some(s) = kind.secret().filter(|s| Some(s.value) == origin_secret) {
            found.push((
                at(s.key),
                format!("same credential secret as the origin (`{}`)", s.value),
            ));
        }
        if let Some(b) = kind.kv_binding().filter(|b| Some(b.value) == origin_secret) {
            found.push((
                at(b.key),
                format!("binding `{}` is the origin's credential secret", b.value),
            ));
        }
        for (span, why) in found {
            ctx.push(
                ctx.diag(
                    Code::SharedFailureDomain,
                    format!("tier `{}` shares a failure domain with the origin: {why}", t.model.name),
                )
                .at(span, "shared with the origin")
                .also(raw_origin.url.span, "the origin")
                .note("an outage of the origin's host or credential would take this tier down with it")
                .help("move the tier to its own host and credential, or replace it with a KV or embedded tier"),
            );
        }
    }
}

/// Each tier's own rules, as its kind states them (`parse::tier`: a KV key's length, a
/// published tier written through, a final keyword tier without an answer).
fn kinds(ctx: &mut Ctx, m: &Model<'_>) {
    let params = m.params();
    let last = m.tiers.len().checked_sub(1);
    let promised = m.promise() == Some(Promise::AlwaysAnswer);
    let file = ctx.file.clone();
    for (i, t) in m.tiers() {
        let cx = Check {
            file: &file,
            tier: t.raw,
            params: params.as_deref(),
            final_net: promised && Some(i) == last,
        };
        for d in t.raw.kind.check(&t.model.kind, &cx) {
            ctx.push(d);
        }
    }
}

fn throttling(ctx: &mut Ctx, m: &Model<'_>) {
    if let Some(d) = &m.disclosure {
        if d.retry_after_s.is_none() {
            let span = m
                .raw_disclosure
                .map(|d| d.span)
                .or(m.cascade.map(|c| c.span))
                .unwrap_or((0, 0));
            ctx.push(
                ctx.diag(Code::UnthrottledDegradation, "degraded answers would carry no `Retry-After`")
                    .at(span, "no retry_after")
                    .note("clients retrying degraded answers at once turned 2,400 req/s into 12,000 in seed 000's incident")
                    .help("set `disclosure.retry_after`, e.g. \"5s\""),
            );
        }
        if let Some(params) = m.params() {
            for (_, t) in m.tiers() {
                if t.model.cache_control_with(&params, d).is_none() {
                    ctx.push(
                        ctx.diag(
                            Code::UnthrottledDegradation,
                            format!("degraded answers from tier `{}` would carry no `Cache-Control`", t.model.name),
                        )
                        .at(t.raw.name().span, "no Cache-Control")
                        .help("set `disclosure.cache_control` (seed 000: \"public, max-age=30\") or this tier's `cache_control`"),
                    );
                }
            }
        }
    }
    if let Some((o, raw)) = &m.origin {
        if o.attempts > 1 && !o.idempotent && o.idempotency_key_header.is_none() {
            let span = raw.attempts.map_or(raw.span, |a| a.span);
            ctx.push(
                ctx.diag(
                    Code::UnsafeRetry,
                    format!(
                        "the origin is called with {} and retried ({} attempts) without an idempotency key",
                        o.method.as_str(),
                        o.attempts
                    ),
                )
                .at(span, "retries a non-idempotent call")
                .help("set `origin.attempts = 1`, or `origin.idempotency_key_header = \"Idempotency-Key\"`, or — if the call has no side effect (a POST that only scores) — `origin.idempotent = true`"),
            );
        }
        hedge(ctx, o, raw);
    }
}

/// A hedge is a second, identical request: only for calls that may be repeated, and only
/// when it can start before the attempt times out.
fn hedge(
    ctx: &mut Ctx,
    o: &understudy_core::policy::Origin,
    raw: &crate::parse::origin::RawOrigin,
) {
    let (Some(h), Some(raw_h)) = (&o.hedge, &raw.hedge) else {
        return;
    };
    if !o.idempotent && o.idempotency_key_header.is_none() {
        ctx.push(
            ctx.diag(
                Code::UnsafeRetry,
                format!(
                    "the origin is called with {} and hedged (a second, identical request) without an idempotency key",
                    o.method.as_str()
                ),
            )
            .at(raw_h.span, "hedges a non-idempotent call")
            .help("remove `[origin.hedge]`, or set `origin.idempotency_key_header = \"Idempotency-Key\"` (requests without the key are then not hedged)"),
        );
    }
    if let Some(after) = h.after_ms.filter(|a| *a >= o.attempt_timeout_ms) {
        let span = raw_h.value.after.map_or(raw_h.span, |a| a.span);
        ctx.push(
            ctx.diag(
                Code::OutOfRange,
                format!(
                    "the hedge would start after {}, but an attempt times out after {}: the hedge would never run",
                    fmt(after),
                    fmt(o.attempt_timeout_ms)
                ),
            )
            .at(span, "the hedge never runs")
            .also(raw.attempt_timeout.span, "the attempt's timeout")
            .help("hedge earlier than the attempt's timeout, or write after = \"p95\""),
        );
    }
}

fn breaker_can_trigger(ctx: &mut Ctx, m: &Model<'_>) {
    let (
        Some(Breaker::Rate(r)),
        Some((service, _)),
        Some(crate::parse::breaker::RawBreaker::Rate(raw)),
    ) = (&m.breaker, &m.service, m.raw_breaker)
    else {
        return;
    };
    let Some(rps) = service.expected_rps else {
        return;
    };
    let window_calls = rps as f64 * r.window_ms as f64 / 1000.0;
    if (r.min_calls as f64) > window_calls {
        let span = raw.min_calls.map_or(raw.window.span, |s| s.span);
        ctx.push(
            ctx.diag(
                Code::BreakerNeverTriggers,
                format!(
                    "the breaker needs {} calls in a window but {rps} req/s over {} brings at most {window_calls:.0}",
                    r.min_calls,
                    fmt(r.window_ms)
                ),
            )
            .at(span, "can never be reached")
            .note(format!(
                "{rps} req/s × {} = {window_calls:.0} calls per window < min_calls {}",
                fmt(r.window_ms),
                r.min_calls
            ))
            .help("lower `breaker.min_calls` or lengthen `breaker.window`"),
        );
    }
    let probe_calls = window_calls * r.probe_fraction;
    if (r.probe_min_calls as f64) > probe_calls {
        let span = raw
            .probe_min_calls
            .map(|s| s.span)
            .or(raw.probe_fraction.map(|s| s.span))
            .unwrap_or(raw.window.span);
        ctx.push(
            ctx.diag(
                Code::BreakerNeverTriggers,
                format!(
                    "probing needs {} calls but {} of {rps} req/s over {} brings {probe_calls:.1}: the breaker would never close",
                    r.probe_min_calls,
                    r.probe_fraction,
                    fmt(r.window_ms)
                ),
            )
            .at(span, "can never be reached")
            .note(format!(
                "{rps} req/s × {} × {} = {probe_calls:.1} probe calls per window < probe_min_calls {}",
                fmt(r.window_ms),
                r.probe_fraction,
                r.probe_min_calls
            ))
            .help("lower `breaker.probe_min_calls` or raise `breaker.probe_fraction`"),
        );
    }
}

fn loopback(url: &str) -> bool {
    matches!(
        host_of(url).as_deref(),
        Some("127.0.0.1" | "localhost" | "[::1]")
    )
}

/// Credentials over plain http, and settings the runtime cannot enforce.
fn transport(ctx: &mut Ctx, m: &Model<'_>) {
    let Some((o, raw)) = &m.origin else { return };
    if o.url.starts_with("http://") && o.credential_secret.is_some() && !loopback(&o.url) {
        ctx.push(
            ctx.diag(
                Code::PlaintextCredential,
                format!(
                    "the origin credential (`{}`) would be sent over plain http to `{}`",
                    o.credential_secret.as_deref().unwrap_or_default(),
                    host_of(&o.url).unwrap_or_default()
                ),
            )
            .at(raw.url.span, "plain http")
            .help("use an `https://` URL for the origin"),
        );
    }
    for (_, t) in m.tiers() {
        let (Some(url), Some(_)) = (t.model.kind.url(), t.model.kind.secret()) else {
            continue;
        };
        if url.value.starts_with("http://") && !loopback(url.value) {
            ctx.push(
                ctx.diag(
                    Code::PlaintextCredential,
                    format!(
                        "tier `{}` would send its credential over plain http",
                        t.model.name
                    ),
                )
                .at(t.raw.span_of(url.key).unwrap_or(t.raw.span()), "plain http")
                .help("use an `https://` URL for the tier"),
            );
        }
    }
    if let Some(c) = raw.connect_timeout {
        ctx.push(
            ctx.diag(
                Code::Unenforceable,
                format!(
                    "`origin.connect_timeout` ({}) cannot be enforced: Workers' fetch has no connect timeout",
                    fmt(c.value.0)
                ),
            )
            .at(c.span, "not enforced at the edge")
            .note(format!(
                "the attempt timeout ({}) and the race deadline still bound every call",
                fmt(o.attempt_timeout_ms)
            ))
            .help("remove `connect_timeout`, or keep it as documentation knowing the edge does not enforce it"),
        );
    }
}
