//! `[disclosure]`, `[storm]`, `[catalog]` and `[admin]`: how degraded answers say so and
//! are throttled, the stub catalog, the status endpoint [P-DISCLOSE] [P-STORM] [P-CATALOG].

use understudy_core::policy::*;

use super::node::{Ctx, Table};
use crate::codes;

use super::node::Span;

pub(super) fn default_disclosure() -> Disclosure {
    Disclosure {
        cache_control: None,
        private_cache_control: "private, max-age=30".into(),
        live_cache_control: "private, no-store".into(),
        retry_after_s: None,
        body_fields: true,
    }
}

pub(super) fn disclosure(ctx: &mut Ctx, mut t: Table) -> Option<Disclosure> {
    let d = default_disclosure();
    let cache_control = t.opt_str(ctx, "cache_control");
    let private_cache_control = t
        .opt_str(ctx, "private_cache_control")
        .unwrap_or(d.private_cache_control);
    let live_cache_control = t
        .opt_str(ctx, "live_cache_control")
        .unwrap_or(d.live_cache_control);
    let retry_after_s = t
        .opt_duration(ctx, "retry_after")
        .map(|ms| ms.div_ceil(1000) as u32);
    let body_fields = t.opt_bool(ctx, "body_fields").unwrap_or(true);
    t.finish(ctx);
    for key in [
        "cache_control",
        "private_cache_control",
        "live_cache_control",
    ] {
        let path = format!("disclosure.{key}");
        if let Some(span) = ctx.span_of(&path) {
            let v = match key {
                "cache_control" => cache_control.clone().unwrap_or_default(),
                "private_cache_control" => private_cache_control.clone(),
                _ => live_cache_control.clone(),
            };
            check_header_value(ctx, &path, span, &v);
        }
    }
    Some(Disclosure {
        cache_control,
        private_cache_control,
        live_cache_control,
        retry_after_s,
        body_fields,
    })
}

fn check_header_value(ctx: &mut Ctx, path: &str, span: Span, v: &str) {
    if v.chars().any(|c| c.is_control() || !c.is_ascii()) {
        ctx.error(
            codes::INVALID_VALUE,
            span,
            format!("`{path}` contains characters a header value cannot hold"),
            "control or non-ASCII characters",
            "use printable ASCII only",
        );
    }
}

pub(super) fn storm(ctx: &mut Ctx, mut t: Table) -> Option<Storm> {
    let binding = t.req_str(ctx, "binding", "\"STORM_LIMITER\"");
    let max_retries = t.opt_uint(ctx, "max_retries", 1000).unwrap_or(2) as u32;
    let window_ms = t.opt_duration(ctx, "window").unwrap_or(10_000);
    if window_ms != 10_000 && window_ms != 60_000 {
        let span = ctx.span_of("storm.window").unwrap_or(t.span);
        ctx.error(
            codes::INVALID_VALUE,
            span,
            "the Workers Rate Limiting binding counts over 10 s or 60 s windows only",
            "not 10s or 60s",
            "set `window = \"10s\"` (seed 000) or \"60s\"",
        );
    }
    t.finish(ctx);
    Some(Storm {
        binding: binding?,
        max_retries,
        window_ms,
    })
}

pub(super) fn catalog(ctx: &mut Ctx, mut t: Table) -> Option<CatalogRules> {
    let stubs = t.req_str(ctx, "stubs", "\"recommendations.catalog.json\"");
    let inventory = t.req_str(ctx, "inventory", "\"recommendations.inventory.json\"");
    let max_age_ms = t.opt_duration(ctx, "max_age").unwrap_or(86_400_000);
    let min_stock = t.opt_uint(ctx, "min_stock", u32::MAX as u64).unwrap_or(50);
    let on_expired = t
        .opt_choice(
            ctx,
            "on_expired",
            &[
                ("refuse", OnExpired::Refuse),
                ("disclose", OnExpired::Disclose),
            ],
        )
        .unwrap_or(OnExpired::Refuse);
    t.finish(ctx);
    Some(CatalogRules {
        stubs: stubs?,
        inventory: inventory?,
        max_age_ms,
        min_stock,
        on_expired,
    })
}

pub(super) fn admin(ctx: &mut Ctx, mut t: Table) -> Option<Admin> {
    let path = t
        .opt_str(ctx, "path")
        .unwrap_or_else(|| "/__understudy/status".into());
    let secret = t.req_str(ctx, "secret", "\"ADMIN_TOKEN\"");
    t.finish(ctx);
    Some(Admin {
        path,
        secret: secret?,
    })
}
