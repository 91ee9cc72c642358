//! The `[events]` rules that need the whole policy [V-*]: the retry schedule fits its window
//! (with the arithmetic), schema versions N and N−1, callers authenticated and operators
//! behind a secret, a key of its own, routes that do not collide, and a warning when a dead
//! letter does not hold its aggregate.

use std::collections::BTreeMap;

use understudy_core::events::flow::OPS_PATH;
use understudy_core::events::policy::{DeadLetter, Events};
use understudy_core::policy::Policy;
use understudy_core::time::format_duration as fmt;

use crate::codes;
use crate::diag::{Diagnostic, Label, Severity};
use crate::parse::node::{Ctx, Span};

pub fn check(ctx: &mut Ctx, p: &Policy) {
    let Some(ev) = &p.events else {
        return;
    };
    window(ctx, ev);
    versions(ctx, ev);
    authenticated(ctx, p, ev);
    routes(ctx, p, ev);
    if ev.dead_letter == DeadLetter::Continue {
        let sp = span(ctx, "events.dead_letter");
        push(
            ctx,
            codes::EVENTS_ORDER_RELAXED,
            Severity::Warning,
            sp,
            "a dead letter does not hold its aggregate: later events go on, and a replayed dead letter arrives out of order".into(),
            "dead_letter = \"continue\"",
            vec![],
            "keep `dead_letter = \"hold\"` unless the consumer does not depend on per-aggregate order".into(),
        );
    }
}

fn span(ctx: &Ctx, path: &str) -> Span {
    ctx.span_of(path)
        .or_else(|| ctx.span_of("events"))
        .unwrap_or((0, 0))
}

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

/// [V-DELIVER] Every attempt can start within the window.
fn window(ctx: &mut Ctx, ev: &Events) {
    let r = &ev.retry;
    let (worst, mut notes) = r.worst_case(ev.delivery.attempt_timeout_ms);
    notes.push(format!(
        "worst case: {} against the window {}",
        fmt(worst),
        fmt(r.window_ms)
    ));
    if worst > r.window_ms {
        let sp = ctx
            .span_of("events.retry.window")
            .or_else(|| ctx.span_of("events.retry"))
            .unwrap_or_else(|| span(ctx, "events"));
        push(
            ctx,
            codes::EVENTS_RETRY_WINDOW,
            Severity::Error,
            sp,
            format!(
                "the retry schedule takes up to {}, over its {} window by {}",
                fmt(worst),
                fmt(r.window_ms),
                fmt(worst - r.window_ms)
            ),
            "the window",
            notes,
            format!(
                "lower `attempts`, `backoff.max` or `[events.delivery] attempt_timeout` by {} in total, or widen `window`",
                fmt(worst - r.window_ms)
            ),
        );
    }
}

/// [V-INGEST] Each type declares its current version N and N−1, each version once.
fn versions(ctx: &mut Ctx, ev: &Events) {
    let mut seen: BTreeMap<(&str, u32), usize> = BTreeMap::new();
    for (i, t) in ev.types.iter().enumerate() {
        if let Some(first) = seen.insert((t.name.as_str(), t.version), i) {
            let sp = span(ctx, &format!("events.types[{i}].version"));
            let first_sp = span(ctx, &format!("events.types[{first}].version"));
            ctx.diags.push(Diagnostic {
                code: codes::EVENTS_SCHEMA_VERSIONS,
                severity: Severity::Error,
                message: format!("version {} of `{}` is declared twice", t.version, t.name),
                file: ctx.file.clone(),
                span: Some(sp),
                label: "second declaration".into(),
                secondary: vec![Label {
                    span: first_sp,
                    message: "first declared here".into(),
                }],
                notes: vec![],
                help: "declare each (name, version) once, with the fields that version requires"
                    .into(),
            });
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
            let sp = span(ctx, &format!("events.types[{i}].version"));
            let declared: Vec<String> = versions.iter().map(|t| t.version.to_string()).collect();
            push(
                ctx,
                codes::EVENTS_SCHEMA_VERSIONS,
                Severity::Error,
                sp,
                format!(
                    "`{name}` accepts version {n} but not the version before it, {}",
                    n - 1
                ),
                "current version",
                vec![format!("declared versions of `{name}`: {}", declared.join(", "))],
                format!(
                    "add `[[events.types]]` with `name = \"{name}\"`, `version = {}` and the fields it requires, so producers still on it are not refused",
                    n - 1
                ),
            );
        }
    }
}

/// [V-INGEST] [V-OPS] Callers are authenticated, operators hold a secret, the key is its own.
fn authenticated(ctx: &mut Ctx, p: &Policy, ev: &Events) {
    let sp = span(ctx, "events.route");
    let mut missing = Vec::new();
    if p.identity.is_none() {
        missing.push("`[identity]` (callers' tokens carry their tenant)");
    }
    if p.admin.is_none() {
        missing.push("`[admin]` (list, inspect, replay and skip need the operator secret)");
    }
    if !missing.is_empty() {
        push(
            ctx,
            codes::EVENTS_UNAUTHENTICATED,
            Severity::Error,
            sp,
            format!("`[events]` needs {}", missing.join(" and ")),
            "events are accepted here",
            vec![],
            "add the missing table; docs/policy.md shows `[identity]` and `[admin]`".into(),
        );
    }
    let key = ev.encryption_key_secret.as_str();
    let others = [
        (
            "[identity].secret",
            p.identity.as_ref().map(|i| i.secret.as_str()),
        ),
        (
            "[admin].secret",
            p.admin.as_ref().map(|a| a.secret.as_str()),
        ),
        (
            "[origin].credential_secret",
            p.origin.credential_secret.as_deref(),
        ),
        (
            "[events.delivery].credential_secret",
            ev.delivery.credential_secret.as_deref(),
        ),
    ];
    if let Some((name, _)) = others.iter().find(|(_, v)| *v == Some(key)) {
        let sp = span(ctx, "events.encryption_key_secret");
        push(
            ctx,
            codes::EVENTS_UNAUTHENTICATED,
            Severity::Error,
            sp,
            format!("the events encryption key `{key}` is also {name}"),
            "shared secret",
            vec![],
            "give the encryption key a secret binding of its own: whoever holds the other secret must not be able to read stored events".into(),
        );
    }
}

/// The ingest route is its own path.
fn routes(ctx: &mut Ctx, p: &Policy, ev: &Events) {
    let r = ev.route.as_str();
    let clash = if r == p.service.route {
        Some("the service route".to_string())
    } else if p.admin.as_ref().is_some_and(|a| a.path == r) {
        Some("the admin path".to_string())
    } else if r == OPS_PATH || r.starts_with(&format!("{OPS_PATH}/")) {
        Some(format!("the operators' events endpoints ({OPS_PATH})"))
    } else {
        None
    };
    if let Some(what) = clash {
        let sp = span(ctx, "events.route");
        push(
            ctx,
            codes::INVALID_VALUE,
            Severity::Error,
            sp,
            format!("`events.route` `{r}` is {what}"),
            "taken",
            vec![],
            "give events their own path, e.g. \"/v1/events\"".into(),
        );
    }
}
