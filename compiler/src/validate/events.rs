//! The `[events]` rules that need the whole policy [V-*]: the retry schedule fits its window
//! (with the arithmetic), the backoff can grow, schema versions N and N−1, callers
//! authenticated and operators behind a secret, a key of its own, routes that do not
//! collide, and a warning when a dead letter does not hold its aggregate.

use std::collections::BTreeMap;

use understudy_core::events::flow::OPS_PATH;
use understudy_core::policy::events::{DeadLetter, Events};
use understudy_core::time::format_duration as fmt;

use super::model::{Model, Opt};
use super::Ctx;
use crate::codes::Code;
use crate::parse::events::RawEvents;

pub fn check(ctx: &mut Ctx, m: &Model<'_>) {
    let Opt::Ok((ev, raw)) = &m.events else {
        return;
    };
    window(ctx, ev, raw);
    backoff(ctx, ev, raw);
    versions(ctx, ev, raw);
    authenticated(ctx, m, ev, raw);
    routes(ctx, m, ev, raw);
    if ev.dead_letter == DeadLetter::Continue {
        let span = raw.dead_letter.map_or(raw.span, |d| d.span);
        ctx.push(
            ctx.diag(
                Code::EventsOrderRelaxed,
                "a dead letter does not hold its aggregate: later events go on, and a replayed dead letter arrives out of order",
            )
            .at(span, "dead_letter = \"continue\"")
            .help("keep `dead_letter = \"hold\"` unless the consumer does not depend on per-aggregate order"),
        );
    }
}

/// [V-DELIVER] Every attempt can start within the window.
fn window(ctx: &mut Ctx, ev: &Events, raw: &RawEvents) {
    let r = &ev.retry;
    let (worst, mut notes) = r.worst_case(ev.delivery.attempt_timeout_ms);
    if worst <= r.window_ms {
        return;
    }
    notes.push(format!(
        "worst case: {} against the window {}",
        fmt(worst),
        fmt(r.window_ms)
    ));
    let span = raw.retry.as_ref().map_or(raw.span, |retry| {
        retry.value.window.map_or(retry.span, |w| w.span)
    });
    ctx.push(
        ctx.diag(
            Code::EventsRetryWindow,
            format!(
                "the retry schedule takes up to {}, over its {} window by {}",
                fmt(worst),
                fmt(r.window_ms),
                fmt(worst - r.window_ms)
            ),
        )
        .at(span, "the window")
        .notes(notes)
        .help(format!(
            "lower `attempts`, `backoff.max` or `[events.delivery] attempt_timeout` by {} in total, or widen `window`",
            fmt(worst - r.window_ms)
        )),
    );
}

/// [C-RANGE] A backoff whose base is above its maximum never grows.
fn backoff(ctx: &mut Ctx, ev: &Events, raw: &RawEvents) {
    let r = &ev.retry;
    if r.backoff_base_ms <= r.backoff_max_ms {
        return;
    }
    // Only a written `max` can be below the base: the default follows it.
    let Some(b) = raw.retry.as_ref().and_then(|r| r.value.backoff.as_ref()) else {
        return;
    };
    let span = b.value.base.map_or(b.span, |s| s.span);
    ctx.push(
        ctx.diag(
            Code::OutOfRange,
            format!(
                "`events.retry.backoff.base` ({}) is above its `max` ({}): no wait could grow",
                fmt(r.backoff_base_ms),
                fmt(r.backoff_max_ms)
            ),
        )
        .at(span, "base above max")
        .help("make `base` at most `max`"),
    );
}

/// [V-INGEST] Each type declares its current version N and N−1, each version once.
fn versions(ctx: &mut Ctx, ev: &Events, raw: &RawEvents) {
    let version_span = |i: usize| raw.types.0.get(i).map_or(raw.span, |t| t.version.span);
    let mut seen: BTreeMap<(&str, u32), usize> = BTreeMap::new();
    for (i, t) in ev.types.iter().enumerate() {
        if let Some(first) = seen.insert((t.name.as_str(), t.version), i) {
            ctx.push(
                ctx.diag(
                    Code::EventsSchemaVersions,
                    format!("version {} of `{}` is declared twice", t.version, t.name),
                )
                .at(version_span(i), "second declaration")
                .also(version_span(first), "first declared here")
                .help("declare each (name, version) once, with the fields that version requires"),
            );
        }
    }
    let mut names: Vec<&str> = ev.types.iter().map(|t| t.name.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    for name in names {
        let versions = ev.versions_of(name);
        let Some(current) = versions.first() else {
            continue;
        };
        let n = current.version;
        if n > 1 && !versions.iter().any(|t| t.version == n - 1) {
            let i = ev
                .types
                .iter()
                .position(|t| t.name == name && t.version == n)
                .unwrap_or(0);
            let declared: Vec<String> = versions.iter().map(|t| t.version.to_string()).collect();
            ctx.push(
                ctx.diag(
                    Code::EventsSchemaVersions,
                    format!(
                        "`{name}` accepts version {n} but not the version before it, {}",
                        n - 1
                    ),
                )
                .at(version_span(i), "current version")
                .note(format!("declared versions of `{name}`: {}", declared.join(", ")))
                .help(format!(
                    "add `[[events.types]]` with `name = \"{name}\"`, `version = {}` and the fields it requires, so producers still on it are not refused",
                    n - 1
                )),
            );
        }
    }
}

/// [V-INGEST] [V-OPS] Callers are authenticated, operators hold a secret, the key is its own.
fn authenticated(ctx: &mut Ctx, m: &Model<'_>, ev: &Events, raw: &RawEvents) {
    let mut missing = Vec::new();
    // A table that is there but did not read has its own errors: it is not missing.
    if matches!(m.identity, Opt::Absent) {
        missing.push("`[identity]` (callers' tokens carry their tenant)");
    }
    if matches!(m.admin, Opt::Absent) {
        missing.push("`[admin]` (list, inspect, replay and skip need the operator secret)");
    }
    if !missing.is_empty() {
        ctx.push(
            ctx.diag(
                Code::EventsUnauthenticated,
                format!("`[events]` needs {}", missing.join(" and ")),
            )
            .at(raw.route.span, "events are accepted here")
            .help("add the missing table; docs/policy.md shows `[identity]` and `[admin]`"),
        );
    }
    let key = ev.encryption_key_secret.as_str();
    let identity = match &m.identity {
        Opt::Ok(i) => Some(i.secret.as_str()),
        _ => None,
    };
    let admin = match &m.admin {
        Opt::Ok((a, _)) => Some(a.secret.as_str()),
        _ => None,
    };
    let others = [
        ("[identity].secret", identity),
        ("[admin].secret", admin),
        (
            "[origin].credential_secret",
            m.origin
                .as_ref()
                .and_then(|(o, _)| o.credential_secret.as_deref()),
        ),
        (
            "[events.delivery].credential_secret",
            ev.delivery.credential_secret.as_deref(),
        ),
    ];
    if let Some((name, _)) = others.iter().find(|(_, v)| *v == Some(key)) {
        ctx.push(
            ctx.diag(
                Code::EventsUnauthenticated,
                format!("the events encryption key `{key}` is also {name}"),
            )
            .at(raw.encryption_key_secret.span, "shared secret")
            .help("give the encryption key a secret binding of its own: whoever holds the other secret must not be able to read stored events"),
        );
    }
}

/// The ingest route is its own path.
fn routes(ctx: &mut Ctx, m: &Model<'_>, ev: &Events, raw: &RawEvents) {
    let r = ev.route.as_str();
    let clash = if m.service.as_ref().is_some_and(|(s, _)| s.route == r) {
        Some("the service route".to_string())
    } else if matches!(&m.admin, Opt::Ok((a, _)) if a.path == r) {
        Some("the admin path".to_string())
    } else if r == OPS_PATH || r.starts_with(&format!("{OPS_PATH}/")) {
        Some(format!("the operators' events endpoints ({OPS_PATH})"))
    } else {
        None
    };
    if let Some(what) = clash {
        ctx.push(
            ctx.diag(
                Code::InvalidValue,
                format!("`events.route` `{r}` is {what}"),
            )
            .at(raw.route.span, "taken")
            .help("give events their own path, e.g. \"/v1/events\""),
        );
    }
}
