//! `[events]`: durable events — ingest, outbox, delivery [V-*] (seed 004 SRS-RES-002/003).
//!
//! Shape only, like every parse module: keys, types, units, enum words and each value's
//! range ([C-RANGE]: a value that switches a mechanism off is refused). Whether the
//! section makes sense with the rest of the policy — the retry schedule fits its window,
//! schema versions N and N−1, callers and operators authenticated — is
//! `validate::events`'s job.

use understudy_core::events::envelope::is_identifier;
use understudy_core::events::policy::*;
use understudy_core::policy::RetryOn;

use super::node::{self, Ctx, Node, NodeKind, Table};
use crate::codes;

/// Most shards (and so the fan-out of `events list` and the status endpoint).
pub const MAX_SHARDS: u64 = 256;
/// Workers allow 6 simultaneous connections per invocation.
pub const MAX_CONCURRENCY: u64 = 6;
/// Largest event body.
pub const MAX_BODY_BYTES: u64 = 1024 * 1024;
/// Most attempts one event may get.
pub const MAX_ATTEMPTS: u64 = 50;

/// The outcomes the policy can list as retryable; anything else a consumer answers is
/// permanent.
const RETRYABLE: [&str; 5] = ["timeout", "connect", "408", "429", "5xx"];

pub(super) fn events(ctx: &mut Ctx, mut t: Table) -> Option<Events> {
    let route = t.req_str(ctx, "route", "\"/v1/events\"");
    if let (Some(r), Some(span)) = (&route, ctx.span_of("events.route")) {
        if !r.starts_with('/') || r.contains(['{', '}', '?', '#', ' ']) {
            ctx.error(
                codes::INVALID_VALUE,
                span,
                format!("`events.route` is `{r}`: not a plain path"),
                "not a path",
                "write the ingest path as `/v1/events` (no parameters, query or fragment)",
            );
        }
    }
    let tenant_claim = t
        .opt_str(ctx, "tenant_claim")
        .unwrap_or_else(|| "tenant".into());
    if tenant_claim.is_empty() {
        positive_error(
            ctx,
            "events.tenant_claim",
            "name the token claim that carries the tenant, e.g. \"tenant\"",
        );
    }
    let max_body_bytes = ranged(ctx, &mut t, "max_body_bytes", 1, MAX_BODY_BYTES).unwrap_or(65_536);
    let shards = ranged(ctx, &mut t, "shards", 1, MAX_SHARDS).unwrap_or(16) as u32;
    let encryption_key_secret = t.req_str(ctx, "encryption_key_secret", "\"EVENTS_KEY\"");
    let redact: Vec<String> = t
        .opt_str_array(ctx, "redact")
        .unwrap_or_default()
        .into_iter()
        .map(|(s, _)| s)
        .collect();
    let replay = t.opt_bool(ctx, "replay").unwrap_or(false);
    let retention_ms = positive_duration(ctx, &mut t, "retention").unwrap_or(7 * 86_400_000);
    let dead_letter = t
        .opt_choice(ctx, "dead_letter", &DeadLetter::ALL)
        .unwrap_or(DeadLetter::Hold);
    let types = types(ctx, &mut t);
    let delivery = match t.opt_table(ctx, "delivery") {
        Some(d) => delivery(ctx, d),
        None => {
            missing(
                ctx,
                &t,
                "events.delivery",
                "[events.delivery] with its `url`",
            );
            None
        }
    };
    let retry = match t.opt_table(ctx, "retry") {
        Some(r) => retry(ctx, r),
        None => Some(default_retry()),
    };
    let alerts = match t.opt_table(ctx, "alerts") {
        Some(a) => alerts(ctx, a),
        None => Some(Alerts {
            oldest_pending_ms: 60_000,
            dead_letters: 0,
            gap_ms: 60_000,
        }),
    };
    t.finish(ctx);
    Some(Events {
        route: route?,
        tenant_claim,
        max_body_bytes,
        shards,
        types: types?,
        delivery: delivery?,
        retry: retry?,
        dead_letter,
        encryption_key_secret: encryption_key_secret?,
        redact,
        alerts: alerts?,
        replay,
        retention_ms,
    })
}

/// Seed 004: 8 attempts, full jitter from 7 s doubling to at most 5 min, within 15 min,
/// on timeouts, connect errors, 408, 429 and 5xx, honouring `Retry-After`.
pub fn default_retry() -> RetrySchedule {
    RetrySchedule {
        attempts: 8,
        backoff_base_ms: 7_000,
        backoff_max_ms: 300_000,
        window_ms: 900_000,
        retry_on: RetryOn {
            timeout: true,
            connect: true,
            status_408: true,
            status_429: true,
            status_5xx: true,
        },
        honor_retry_after: true,
    }
}

fn missing(ctx: &mut Ctx, t: &Table, path: &str, what: &str) {
    ctx.error(
        codes::MISSING_KEY,
        t.span,
        format!("`[events]` has no `[{path}]`"),
        format!("`[{path}]` is required"),
        format!("add {what}; docs/policy.md lists its keys"),
    );
}

fn positive_error(ctx: &mut Ctx, path: &str, help: &str) {
    let span = ctx.span_of(path).unwrap_or((0, 0));
    ctx.error(
        codes::INVALID_VALUE,
        span,
        format!("`{path}` is empty or zero: it would switch the mechanism off"),
        "must be set",
        help,
    );
}

/// A whole number in `min..=max` ([C-RANGE]).
fn ranged(ctx: &mut Ctx, t: &mut Table, key: &'static str, min: u64, max: u64) -> Option<u64> {
    let v = t.opt_uint(ctx, key, max)?;
    if v < min {
        let path = format!("{}.{key}", t.path);
        let span = ctx.span_of(&path).unwrap_or(t.span);
        ctx.error(
            codes::INVALID_VALUE,
            span,
            format!("`{path}` is {v}, below its minimum {min}"),
            format!("between {min} and {max}"),
            format!("use a value from {min} to {max}"),
        );
        return None;
    }
    Some(v)
}

/// A duration above zero ([C-RANGE]).
fn positive_duration(ctx: &mut Ctx, t: &mut Table, key: &'static str) -> Option<u64> {
    let v = t.opt_duration(ctx, key)?;
    if v == 0 {
        let path = format!("{}.{key}", t.path);
        positive_error(ctx, &path, "give it a positive duration, e.g. \"60s\"");
        return None;
    }
    Some(v)
}

fn types(ctx: &mut Ctx, t: &mut Table) -> Option<Vec<EventType>> {
    let mut out = Vec::new();
    let mut ok = true;
    match t.take(ctx, "types") {
        Some(Node {
            kind: NodeKind::Array(items),
            ..
        }) => {
            for (i, item) in items.into_iter().enumerate() {
                let path = format!("events.types[{i}]");
                ctx.spans.insert(path.clone(), item.span);
                match Table::new(ctx, &path, item).and_then(|tt| event_type(ctx, &path, tt)) {
                    Some(ty) => out.push(ty),
                    None => ok = false,
                }
            }
        }
        Some(other) => {
            node::wrong_type(
                ctx,
                "events.types",
                other.span,
                "an array of tables (`[[events.types]]`)",
                &other.kind,
            );
            return None;
        }
        None => {}
    }
    if out.is_empty() && ok {
        ctx.error(
            codes::MISSING_KEY,
            t.span,
            "`[events]` accepts no event type",
            "no `[[events.types]]`",
            "declare each accepted type and schema version: `[[events.types]]` with `name`, `version` and `required`",
        );
        return None;
    }
    ok.then_some(out)
}

fn event_type(ctx: &mut Ctx, path: &str, mut t: Table) -> Option<EventType> {
    let name = t.req_str(ctx, "name", "\"order.placed\"");
    if let (Some(n), Some(span)) = (&name, ctx.span_of(&format!("{path}.name"))) {
        if !is_identifier(n) {
            ctx.error(
                codes::INVALID_VALUE,
                span,
                format!("event type `{n}` is not 1 to 128 printable characters without spaces"),
                "not a type name",
                "name types like `order.placed`",
            );
        }
    }
    let version = t.req_uint(ctx, "version", u64::from(u32::MAX), "2");
    if version == Some(0) {
        positive_error(
            ctx,
            &format!("{path}.version"),
            "schema versions start at 1",
        );
    }
    let required: Vec<String> = t
        .opt_str_array(ctx, "required")
        .unwrap_or_default()
        .into_iter()
        .filter_map(|(s, span)| {
            if s.is_empty() || s.split('.').any(str::is_empty) {
                ctx.error(
                    codes::INVALID_VALUE,
                    span,
                    format!("`{s}` is not a payload field path"),
                    "not a field",
                    "name payload fields as `orderId` or `customer.email`",
                );
                None
            } else {
                Some(s)
            }
        })
        .collect();
    t.finish(ctx);
    Some(EventType {
        name: name?,
        version: version.filter(|v| *v > 0)? as u32,
        required,
    })
}

fn delivery(ctx: &mut Ctx, mut t: Table) -> Option<Delivery> {
    let url = t.req_str(ctx, "url", "\"https://orders.internal.example/v1/events\"");
    if let (Some(u), Some(span)) = (&url, ctx.span_of("events.delivery.url")) {
        if super::host_of(u).is_none() {
            ctx.error(
                codes::INVALID_VALUE,
                span,
                format!("`{u}` is not an http(s) URL with a host"),
                "not a URL",
                "write the consumer as \"https://host/path\"",
            );
        }
    }
    let credential_secret = t.opt_str(ctx, "credential_secret");
    let credential_header = t
        .opt_str(ctx, "credential_header")
        .unwrap_or_else(|| "Authorization".into());
    let attempt_timeout_ms = positive_duration(ctx, &mut t, "attempt_timeout").unwrap_or(10_000);
    let concurrency = ranged(ctx, &mut t, "concurrency", 1, MAX_CONCURRENCY).unwrap_or(4) as u32;
    t.finish(ctx);
    Some(Delivery {
        url: url?,
        credential_secret,
        credential_header,
        attempt_timeout_ms,
        concurrency,
    })
}

fn retry(ctx: &mut Ctx, mut t: Table) -> Option<RetrySchedule> {
    let d = default_retry();
    let attempts =
        ranged(ctx, &mut t, "attempts", 1, MAX_ATTEMPTS).unwrap_or(u64::from(d.attempts)) as u32;
    let (base, max) = match t.opt_table(ctx, "backoff") {
        Some(mut b) => {
            let base = positive_duration(ctx, &mut b, "base").unwrap_or(d.backoff_base_ms);
            let max = positive_duration(ctx, &mut b, "max").unwrap_or(d.backoff_max_ms.max(base));
            b.finish(ctx);
            if base > max {
                let span = ctx.span_of("events.retry.backoff.base").unwrap_or(t.span);
                ctx.error(
                    codes::INVALID_VALUE,
                    span,
                    format!(
                        "`events.retry.backoff.base` ({}) is above its `max` ({}): no wait could grow",
                        understudy_core::time::format_duration(base),
                        understudy_core::time::format_duration(max)
                    ),
                    "base above max",
                    "make `base` at most `max`",
                );
            }
            (base, max)
        }
        None => (d.backoff_base_ms, d.backoff_max_ms),
    };
    let window_ms = positive_duration(ctx, &mut t, "window").unwrap_or(d.window_ms);
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
                    other if other == "4xx" || (other.len() == 3 && other.starts_with('4') && other.bytes().all(|b| b.is_ascii_digit())) => ctx.error(
                        codes::EVENTS_PERMANENT_RETRY,
                        span,
                        format!("`{other}` is a permanent failure and cannot be retried"),
                        "permanent 4xx",
                        "remove it: a consumer's 4xx other than 408 and 429 refuses the event itself (schema or authentication) and is dead-lettered at once; fix the event or the credential, then replay it",
                    ),
                    other => ctx.error(
                        codes::INVALID_VALUE,
                        span,
                        format!("`{other}` is not a retryable outcome"),
                        "unknown outcome",
                        format!("use any of {}", RETRYABLE.map(|n| format!("`{n}`")).join(", ")),
                    ),
                }
            }
            r
        }
        None => d.retry_on,
    };
    let honor_retry_after = t.opt_bool(ctx, "honor_retry_after").unwrap_or(true);
    t.finish(ctx);
    Some(RetrySchedule {
        attempts,
        backoff_base_ms: base,
        backoff_max_ms: max,
        window_ms,
        retry_on,
        honor_retry_after,
    })
}

fn alerts(ctx: &mut Ctx, mut t: Table) -> Option<Alerts> {
    let oldest_pending_ms = positive_duration(ctx, &mut t, "oldest_pending").unwrap_or(60_000);
    let dead_letters = t
        .opt_uint(ctx, "dead_letters", u64::from(u32::MAX))
        .unwrap_or(0);
    let gap_ms = positive_duration(ctx, &mut t, "gap").unwrap_or(60_000);
    t.finish(ctx);
    Some(Alerts {
        oldest_pending_ms,
        dead_letters,
        gap_ms,
    })
}
