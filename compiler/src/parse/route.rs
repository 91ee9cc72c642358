//! `[service]`, `[params.*]` and `[identity]`: what the endpoint is and what it reads [P-ROUTE].

use understudy_core::policy::*;

use super::node::{as_choice, Ctx, Table};
use crate::codes;

use super::MAX_COUNT;

pub(super) fn service(ctx: &mut Ctx, mut t: Table) -> Option<Service> {
    let name = t.req_str(ctx, "name", "\"recommendation-service\"");
    let route = t.req_str(ctx, "route", "\"/v1/recommendations\"");
    if let (Some(r), Some(span)) = (&route, ctx.span_of("service.route")) {
        if !r.starts_with('/') {
            ctx.error(
                codes::INVALID_VALUE,
                span,
                format!("route `{r}` does not start with `/`"),
                "not a path",
                "write the route as a path, e.g. \"/v1/recommendations\"",
            );
        }
    }
    let methods = match t.opt_str_array(ctx, "methods") {
        Some(list) => {
            let mut out = Vec::new();
            for (m, span) in list {
                match Method::parse(&m) {
                    Some(m) => out.push(m),
                    None => ctx.error(
                        codes::INVALID_VALUE,
                        span,
                        format!("`{m}` is not an HTTP method"),
                        "unknown method",
                        "use GET, HEAD, POST, PUT, PATCH or DELETE",
                    ),
                }
            }
            if out.is_empty() {
                let span = ctx.span_of("service.methods").unwrap_or(t.span);
                ctx.error(
                    codes::INVALID_VALUE,
                    span,
                    "`service.methods` is empty",
                    "no method",
                    "list at least one method, e.g. [\"GET\"]",
                );
            }
            out
        }
        None => vec![Method::Get],
    };
    let expected_rps = t.opt_uint(ctx, "expected_rps", MAX_COUNT).map(|v| v as u32);
    t.finish(ctx);
    Some(Service {
        name: name?,
        route: route?,
        methods,
        expected_rps,
    })
}

pub(super) fn params(ctx: &mut Ctx, mut t: Table) -> Vec<Param> {
    let mut out = Vec::new();
    for (name, key_span, node) in t.drain_entries() {
        let path = format!("params.{name}");
        ctx.spans.insert(path.clone(), node.span);
        if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            ctx.error(
                codes::INVALID_VALUE,
                key_span,
                format!("`{name}` is not a parameter name"),
                "letters, digits and `_` only",
                "rename the parameter",
            );
            continue;
        }
        if let Some(p) = Table::new(ctx, &path, node).and_then(|pt| param(ctx, &name, pt)) {
            out.push(p);
        }
    }
    t.finish(ctx);
    out
}

fn param(ctx: &mut Ctx, name: &str, mut t: Table) -> Option<Param> {
    let source = match t.req(ctx, "source", "\"query\"") {
        Some(n) => as_choice(ctx, &format!("params.{name}.source"), n, &ParamSource::ALL),
        None => None,
    };
    let from = t.opt_str(ctx, "from").unwrap_or_else(|| name.to_string());
    let ty = t
        .opt_choice(
            ctx,
            "type",
            &[
                ("string", ParamType::String),
                ("integer", ParamType::Integer),
            ],
        )
        .unwrap_or(ParamType::String);
    let pattern = t.opt_str(ctx, "pattern");
    if let (Some(p), Some(span)) = (&pattern, ctx.span_of(&format!("params.{name}.pattern"))) {
        if let Err(e) = regex_lite::Regex::new(p) {
            ctx.error(
                codes::INVALID_VALUE,
                span,
                format!("`params.{name}.pattern` is not a valid regular expression: {e}"),
                "does not compile",
                "fix the regular expression (regex-lite syntax, anchored with ^…$)",
            );
        }
    }
    let max_len = t.opt_uint(ctx, "max_len", 8192).unwrap_or(256) as u32;
    let required = t.opt_bool(ctx, "required").unwrap_or(false);
    let default = t.opt_str(ctx, "default");
    let identity = t.opt_bool(ctx, "identity").unwrap_or(false);
    let allow_unverified = t
        .opt_bool(ctx, "allow_unverified_identity")
        .unwrap_or(false);
    t.finish(ctx);
    Some(Param {
        name: name.to_string(),
        source: source?,
        from,
        ty,
        pattern,
        max_len,
        required,
        default,
        identity,
        allow_unverified,
    })
}

pub(super) fn identity(ctx: &mut Ctx, mut t: Table) -> Option<IdentityRules> {
    let secret = t.req_str(ctx, "secret", "\"TOKEN_HMAC_KEY\"");
    let issuer = t.req_str(ctx, "issuer", "\"https://auth.example\"");
    let audience = t.req_str(ctx, "audience", "\"recommendations\"");
    let leeway_ms = t.opt_duration(ctx, "leeway").unwrap_or(30_000);
    t.finish(ctx);
    Some(IdentityRules {
        secret: secret?,
        issuer: issuer?,
        audience: audience?,
        leeway_ms,
    })
}
