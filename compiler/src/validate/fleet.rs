//! [F-SCOPE] The fleet scope's keys against the rest of the breaker and the Worker's other
//! bindings (docs/adr/011-fleet-scoped-breaker.md).

use crate::diag::Span;
use understudy_core::policy::{Breaker, RateBreaker, Scope};
use understudy_core::time::format_duration as fmt;

use super::model::{Model, Opt};
use super::Ctx;
use crate::codes::Code;
use crate::parse::breaker::RawBreaker;

pub fn check(ctx: &mut Ctx, m: &Model<'_>) {
    let (Some(Breaker::Rate(r)), Some(RawBreaker::Rate(raw))) = (&m.breaker, m.raw_breaker) else {
        return;
    };
    let Scope::Fleet(fleet) = &r.scope else {
        if let Some(scope) = raw.scope {
            isolate_scope(ctx, m, r, scope.span);
        }
        let set = [
            raw.coordinator.as_ref().map(|s| ("coordinator", s.span)),
            raw.report_interval.map(|s| ("report_interval", s.span)),
            raw.verdict_ttl.map(|s| ("verdict_ttl", s.span)),
        ];
        if let Some((key, span)) = set.into_iter().flatten().next() {
            ctx.push(
                ctx.diag(
                    Code::FleetSettingsUnused,
                    format!("`breaker.{key}` has no effect: the breaker's scope is \"isolate\""),
                )
                .at(span, "read only in fleet scope")
                .help("set `breaker.scope = \"fleet\"`, or remove the fleet settings"),
            );
        }
        return;
    };
    let interval = fleet.report_interval_ms;
    if interval * 10 > r.window_ms {
        let span = raw.report_interval.map_or(raw.window.span, |s| s.span);
        ctx.push(
            ctx.diag(
                Code::FleetReportInterval,
                format!(
                    "isolates report every {} but the window is {}: the fleet would decide later than one isolate",
                    fmt(interval),
                    fmt(r.window_ms)
                ),
            )
            .at(span, "over a tenth of the window")
            .note(format!(
                "the fleet's verdict reaches an isolate up to two intervals ({}) after the evidence; a tenth of the window is {}",
                fmt(2 * interval),
                fmt(r.window_ms / 10)
            ))
            .help("shorten `breaker.report_interval` or lengthen `breaker.window`"),
        );
    }
    if fleet.verdict_ttl_ms < 2 * interval {
        let span = raw
            .verdict_ttl
            .map(|s| s.span)
            .or(raw.report_interval.map(|s| s.span))
            .unwrap_or(raw.window.span);
        ctx.push(
            ctx.diag(
                Code::FleetVerdictTtl,
                format!(
                    "a verdict holds {} but isolates report every {}: one late report drops the fleet's verdict",
                    fmt(fleet.verdict_ttl_ms),
                    fmt(interval)
                ),
            )
            .at(span, "under two report intervals")
            .help(format!(
                "set `breaker.verdict_ttl` to at least {} (the default is three intervals)",
                fmt(2 * interval)
            )),
        );
    }
    let span = raw
        .coordinator
        .as_ref()
        .map(|s| s.span)
        .or(raw.scope.map(|s| s.span))
        .unwrap_or(raw.window.span);
    if let Some(secret) = secret_named(m, &fleet.coordinator) {
        ctx.push(
            ctx.diag(
                Code::FleetCoordinatorSecret,
                format!(
                    "the coordinator's binding `{}` is also {secret}: bound as the coordinator, it would hide that secret",
                    fleet.coordinator
                ),
            )
            .at(span, "a secret's name")
            .note("the Worker would read the coordinator where it expects the secret, and what the secret guards would fail closed")
            .help("set `breaker.coordinator` to a name no secret of the Worker uses (the default is BREAKER_COORDINATOR)"),
        );
    } else if let Some(other) = taken(m, &fleet.coordinator) {
        ctx.push(
            ctx.diag(
                Code::FleetCoordinatorBinding,
                format!(
                    "the coordinator's binding `{}` is also {other}",
                    fleet.coordinator
                ),
            )
            .at(span, "binding name taken")
            .help("set `breaker.coordinator` to a name no other binding of the Worker uses"),
        );
    }
}

/// [`Code::IsolateScope`]: what an explicit `scope = "isolate"` costs — the per-isolate
/// traffic below which an isolate's own probing outlasts a window.
fn isolate_scope(ctx: &mut Ctx, m: &Model<'_>, r: &RateBreaker, span: Span) {
    // The first request after the hold-down probes, then one in 1 / probe_fraction.
    let requests = 1.0 + f64::from(r.probe_min_calls.max(1) - 1) / r.probe_fraction;
    let window_s = r.window_ms as f64 / 1000.0;
    let per_isolate = requests / window_s;
    let mut d = ctx
        .diag(
            Code::IsolateScope,
            format!(
                "in isolate scope an isolate under {per_isolate:.1} req/s recovers later than hold_down + window ({})",
                fmt(r.hold_down_ms + r.window_ms)
            ),
        )
        .at(span, "each isolate probes alone")
        .note(format!(
            "closing takes {} probes, one in {:.0} requests after the first: {requests:.0} requests; over the window {} that is {per_isolate:.1} req/s per isolate",
            r.probe_min_calls,
            1.0 / r.probe_fraction,
            fmt(r.window_ms)
        ));
    if let Some(rps) = m.service.as_ref().and_then(|(s, _)| s.expected_rps) {
        let isolates = (rps as f64 / per_isolate).floor();
        d = d.note(format!(
            "at the declared {rps} req/s (`service.expected_rps`), spread evenly over more than {isolates:.0} isolates, every isolate is under it"
        ));
    }
    ctx.push(d.help(
        "remove `breaker.scope` (fleet scope, the default, pools every isolate's probes), or keep \"isolate\" only where every isolate sees more traffic than this",
    ));
}

/// Which secret of the Worker is named `name`, if any: every secret binding the built
/// Worker reads (`dist::bindings` lists the same for `wrangler.toml`).
fn secret_named(m: &Model<'_>, name: &str) -> Option<String> {
    for (_, t) in m.tiers() {
        if t.model.kind.secret().is_some_and(|k| k.value == name) {
            return Some(format!("tier `{}`'s secret", t.model.name));
        }
    }
    if let Some((o, _)) = &m.origin {
        if o.credential_secret.as_deref() == Some(name) {
            return Some("the origin's credential secret".into());
        }
    }
    if let Some(Some((a, _))) = m.admin.read() {
        if a.secret == name {
            return Some("the admin token's secret (`admin.secret`)".into());
        }
    }
    if let Some(Some(i)) = m.identity.read() {
        if i.secret == name {
            return Some("the identity key's secret (`identity.secret`)".into());
        }
    }
    if let Some(Some((e, _))) = m.events.read() {
        if e.encryption_key_secret == name {
            return Some("the events' encryption key secret".into());
        }
        if e.delivery.credential_secret.as_deref() == Some(name) {
            return Some("the events' delivery credential secret".into());
        }
    }
    None
}

/// What other binding of the Worker is bound as `name`, if any.
fn taken(m: &Model<'_>, name: &str) -> Option<String> {
    if name.starts_with("UNDERSTUDY_") {
        return Some("reserved: names starting with UNDERSTUDY_ are the edge's own".into());
    }
    for (_, t) in m.tiers() {
        if t.model.kind.kv_binding().is_some_and(|k| k.value == name) {
            return Some(format!("tier `{}`'s KV namespace", t.model.name));
        }
    }
    if let Opt::Ok(s) = &m.storm {
        if s.binding == name {
            return Some("the retry-storm limit's Rate Limiting binding".into());
        }
    }
    None
}
