//! `[budget]` and `[origin]`: the time allowed and the model call [P-BUDGET] [P-ORIGIN].

use understudy_core::policy::*;

use super::node::{Ctx, Table};
use crate::codes;

use super::node;

pub(super) fn budget(ctx: &mut Ctx, mut t: Table) -> Option<Budget> {
    let total = t.req_duration(ctx, "total", "\"60ms\"");
    let deadline = t.req_duration(ctx, "deadline", "\"45ms\"");
    t.finish(ctx);
    for (key, v) in [("total", total), ("deadline", deadline)] {
        if v == Some(0) {
            if let Some(span) = ctx.span_of(&format!("budget.{key}")) {
                ctx.error(
                    codes::INVALID_VALUE,
                    span,
                    format!("`budget.{key}` is zero"),
                    "must be positive",
                    "give the step some time, e.g. \"45ms\"",
                );
            }
        }
    }
    Some(Budget {
        total_ms: total?,
        deadline_ms: deadline?,
    })
}

pub(super) fn result_path(s: &str) -> Vec<String> {
    s.split('.')
        .filter(|p| !p.is_empty())
        .map(str::to_string)
        .collect()
}

pub(super) fn origin(ctx: &mut Ctx, mut t: Table) -> Option<Origin> {
    let url = t.req_str(ctx, "url", "\"https://model.example/v1/score\"");
    if let (Some(u), Some(span)) = (&url, ctx.span_of("origin.url")) {
        if host_of(u).is_none() {
            ctx.error(
                codes::INVALID_VALUE,
                span,
                format!("`{u}` is not an http(s) URL with a host"),
                "not a URL",
                "write the origin as \"https://host/path\"",
            );
        }
    }
    let method = match t.take(ctx, "method") {
        Some(n) => {
            let span = n.span;
            match node::as_str(ctx, "origin.method", n) {
                Some(m) => Method::parse(&m).or_else(|| {
                    ctx.error(
                        codes::INVALID_VALUE,
                        span,
                        format!("`{m}` is not an HTTP method"),
                        "unknown method",
                        "use GET or POST",
                    );
                    None
                }),
                None => None,
            }
        }
        None => Some(Method::Post),
    };
    let idempotent = t.opt_bool(ctx, "idempotent");
    let attempt_timeout = t.req_duration(ctx, "attempt_timeout", "\"45ms\"");
    let connect_timeout_ms = t.opt_duration(ctx, "connect_timeout");
    let attempts = t.opt_uint(ctx, "attempts", 10).unwrap_or(1) as u32;
    if attempts == 0 {
        if let Some(span) = ctx.span_of("origin.attempts") {
            ctx.error(
                codes::INVALID_VALUE,
                span,
                "`origin.attempts` is 0: the origin would never be called",
                "at least 1",
                "set `attempts = 1` for no retry, more to retry",
            );
        }
    }
    let (backoff_base_ms, backoff_max_ms) = match t.opt_table(ctx, "backoff") {
        Some(mut b) => {
            let base = b.opt_duration(ctx, "base").unwrap_or(10);
            let max = b.opt_duration(ctx, "max").unwrap_or(base.saturating_mul(8));
            b.finish(ctx);
            (base, max)
        }
        None => (10, 80),
    };
    let retry_on = match t.opt_str_array(ctx, "retry_on") {
        Some(list) => {
            let mut r = RetryOn::none();
            for (s, span) in list {
                match s.as_str() {
                    "timeout" => r.timeout = true,
                    "connect" => r.connect = true,
                    "408" => r.status_408 = true,
                    "429" => r.status_429 = true,
                    "5xx" => r.status_5xx = true,
                    other => ctx.error(
                        codes::INVALID_VALUE,
                        span,
                        format!("`{other}` is not a retryable outcome"),
                        "unknown outcome",
                        format!(
                            "use any of {}",
                            RetryOn::NAMES
                                .iter()
                                .map(|n| format!("`{n}`"))
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    ),
                }
            }
            r
        }
        None => RetryOn {
            timeout: true,
            connect: true,
            status_408: true,
            status_429: true,
            status_5xx: true,
        },
    };
    let honor_retry_after = t.opt_bool(ctx, "honor_retry_after").unwrap_or(true);
    let idempotency_key_header = t.opt_str(ctx, "idempotency_key_header");
    let credential_secret = t.opt_str(ctx, "credential_secret");
    let credential_header = t
        .opt_str(ctx, "credential_header")
        .unwrap_or_else(|| "Authorization".into());
    let result_path = t
        .opt_str(ctx, "result_path")
        .map(|s| result_path(&s))
        .unwrap_or_else(|| vec!["items".into()]);
    let max_body_bytes = t
        .opt_uint(ctx, "max_body_bytes", 64 << 20)
        .unwrap_or(1 << 20);
    let client_errors = match t.take(ctx, "client_errors") {
        Some(n) => {
            let span = n.span;
            node::as_str(ctx, "origin.client_errors", n).and_then(|v| {
                let found = ClientErrors::ALL.iter().find(|(name, _)| *name == v);
                if found.is_none() {
                    ctx.error(
                        codes::INVALID_VALUE,
                        span,
                        format!("`{v}` is not a way to answer an origin 4xx"),
                        "unknown choice",
                        "use \"pass_through\" (the origin's status in the error envelope) or \"fallback\" (a disclosed fallback with reason ML_4XX)",
                    );
                }
                found.map(|(_, c)| *c)
            })
        }
        None => Some(ClientErrors::PassThrough),
    };
    let max_in_flight = t.opt_uint(ctx, "max_in_flight", 100_000).map(|n| n as u32);
    if max_in_flight == Some(0) {
        if let Some(span) = ctx.span_of("origin.max_in_flight") {
            ctx.error(
                codes::INVALID_VALUE,
                span,
                "`origin.max_in_flight` is 0: the origin would never be called",
                "at least 1",
                "cap the origin calls an isolate has in flight at 1 or more, or remove the key for no cap",
            );
        }
    }
    let hedge = t.opt_table(ctx, "hedge").and_then(|h| hedge(ctx, h));
    t.finish(ctx);
    Some(Origin {
        url: url?,
        idempotent: idempotent.unwrap_or_else(|| method.is_some_and(Method::is_idempotent)),
        method: method?,
        attempt_timeout_ms: attempt_timeout?,
        connect_timeout_ms,
        attempts,
        backoff_base_ms,
        backoff_max_ms,
        retry_on,
        honor_retry_after,
        idempotency_key_header,
        credential_secret,
        credential_header,
        result_path,
        max_body_bytes,
        client_errors: client_errors?,
        max_in_flight,
        hedge,
    })
}

/// `[origin.hedge]`: when to send a second request, and how many.
fn hedge(ctx: &mut Ctx, mut h: Table) -> Option<Hedge> {
    let after_ms = match h.take(ctx, "after") {
        None => None,
        Some(n) => {
            let span = n.span;
            match node::as_str(ctx, "origin.hedge.after", n) {
                Some(v) if v == "p95" => None,
                Some(v) => match understudy_core::time::parse_duration(&v) {
                    Ok(ms) if ms > 0 => Some(ms),
                    _ => {
                        ctx.error(
                            codes::INVALID_VALUE,
                            span,
                            format!("`{v}` is neither \"p95\" nor a positive duration"),
                            "not a hedge delay",
                            "write after = \"p95\" (the origin's observed p95) or a duration such as \"30ms\"",
                        );
                        None
                    }
                },
                None => None,
            }
        }
    };
    let max_share = h.opt_ratio(ctx, "max_share").unwrap_or(0.05);
    if !(max_share > 0.0 && max_share <= 0.5) {
        if let Some(span) = ctx.span_of("origin.hedge.max_share") {
            ctx.error(
                codes::INVALID_VALUE,
                span,
                format!("`origin.hedge.max_share` = {max_share} is outside (0, 0.5]"),
                "out of range",
                "hedge a few percent of calls (0.05); more than half doubles the load on a slow origin",
            );
        }
    }
    let burst = h.opt_uint(ctx, "burst", 1_000).unwrap_or(10) as u32;
    let min_calls = h.opt_uint(ctx, "min_calls", 100_000).unwrap_or(20) as u32;
    h.finish(ctx);
    Some(Hedge {
        after_ms,
        max_share,
        burst: burst.max(1),
        min_calls: min_calls.max(1),
    })
}

/// The host of an http(s) URL, lower-cased.
pub fn host_of(url: &str) -> Option<String> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let host = authority.rsplit('@').next()?;
    let host = if host.starts_with('[') {
        host.split(']').next().map(|h| format!("{h}]"))?
    } else {
        host.split(':').next()?.to_string()
    };
    if host.is_empty() {
        None
    } else {
        Some(host.to_ascii_lowercase())
    }
}
