//! [C-PARAMS] Parameters agree with themselves and with what reads them: every parameter a
//! tier names is declared (each kind says which it reads), defaults pass their own
//! validation, and path parameters and route segments match both ways. And the admin path
//! stays out of the service's route. (A KV tier's keys fitting Workers KV's 512-byte limit
//! is the KV kind's own rule: `parse::tier::kv`.)

use understudy_core::policy::{Param, ParamSource, ParamType};

use super::model::Model;
use super::Ctx;
use crate::codes::Code;
use crate::parse::leaf::shown;

pub fn check(ctx: &mut Ctx, m: &Model<'_>) {
    templates(ctx, m);
    defaults(ctx, m);
    route(ctx, m);
    admin(ctx, m);
}

/// Every parameter a tier refers to exists.
fn templates(ctx: &mut Ctx, m: &Model<'_>) {
    if !m.params_complete {
        return;
    }
    let declared = m
        .params
        .iter()
        .map(|p| p.model.name.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    for (_, t) in m.tiers() {
        for used in t.model.kind.params() {
            let name = used.value;
            if m.params.iter().any(|p| p.model.name == name) {
                continue;
            }
            // Point at `{name}` inside the string when it can be found.
            let sp = t
                .raw
                .span_within(used.key, &format!("{{{name}}}"))
                .unwrap_or(t.raw.name().span);
            let help = if declared.is_empty() {
                format!("declare it: add a `[params.{name}]` table with its `source`")
            } else {
                format!(
                    "declare `[params.{name}]`, or use one of the declared parameters: {declared}"
                )
            };
            ctx.push(
                ctx.diag(
                    Code::UnknownTemplateParam,
                    format!(
                        "tier `{}` refers to the parameter `{name}`, which is not declared",
                        t.model.name
                    ),
                )
                .at(sp, "unknown parameter")
                .help(help),
            );
        }
    }
}

/// Why `value` fails `p`'s own validation, as the edge would judge it.
pub fn default_problem(p: &Param, value: &str) -> Option<String> {
    if value.len() > p.max_len as usize {
        return Some(format!(
            "it is {} bytes, over the parameter's `max_len` of {}",
            value.len(),
            p.max_len
        ));
    }
    if value.is_empty() {
        return Some("it is empty, which the edge treats as absent".into());
    }
    if p.ty == ParamType::Integer && value.parse::<i64>().is_err() {
        return Some("the parameter is an `integer` and it is not a whole number".into());
    }
    if let Some(pat) = &p.pattern {
        let re = regex_lite::Regex::new(&format!("^(?:{pat})$")).ok()?;
        if !re.is_match(value) {
            return Some(format!("it does not match the parameter's pattern `{pat}`"));
        }
    }
    None
}

fn defaults(ctx: &mut Ctx, m: &Model<'_>) {
    for p in &m.params {
        let (Some(value), Some(raw)) = (&p.model.default, &p.raw.default) else {
            continue;
        };
        if let Some(why) = default_problem(&p.model, value) {
            ctx.push(
                ctx.diag(
                    Code::ParamDefaultInvalid,
                    format!(
                        "the default {} of parameter `{}` fails its own validation: {why}",
                        shown(value),
                        p.model.name
                    ),
                )
                .at(
                    raw.span,
                    "every request without the parameter would get a 400",
                )
                .help(format!(
                    "change `params.{}.default`, or the rule it breaks",
                    p.model.name
                )),
            );
        }
    }
}

/// The `{name}` segments of a route.
fn route_params(route: &str) -> Vec<&str> {
    route
        .split('/')
        .filter_map(|s| s.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
        .collect()
}

fn route(ctx: &mut Ctx, m: &Model<'_>) {
    let (Some((service, raw)), true) = (&m.service, m.params_complete) else {
        return;
    };
    let segments = route_params(&service.route);
    let path_params: Vec<_> = m
        .params
        .iter()
        .filter(|p| p.model.source == ParamSource::Path)
        .collect();
    for seg in &segments {
        if !path_params.iter().any(|p| p.model.from == *seg) {
            ctx.push(
                ctx.diag(
                    Code::RouteParamMismatch,
                    format!(
                        "the route segment `{{{seg}}}` is read by no parameter with `source = \"path\"`"
                    ),
                )
                .at(raw.route.span, "this segment is matched but never validated")
                .help(format!(
                    "declare `[params.{seg}]` with `source = \"path\"` (and a `pattern`), or make the segment literal"
                )),
            );
        }
    }
    for p in path_params {
        if !segments.contains(&p.model.from.as_str()) {
            let span = p.raw.from.as_ref().map_or(p.raw.source.span, |f| f.span);
            ctx.push(
                ctx.diag(
                    Code::RouteParamMismatch,
                    format!(
                        "path parameter `{}` reads the segment `{{{}}}`, which the route `{}` does not have",
                        p.model.name, p.model.from, service.route
                    ),
                )
                .at(span, "no such route segment")
                .also(raw.route.span, "the route")
                .help(format!(
                    "add `{{{}}}` to `service.route`, or read the parameter from elsewhere",
                    p.model.from
                )),
            );
        }
    }
}

/// Path segments, with `{param}` segments as wildcards.
fn segments(path: &str) -> Vec<&str> {
    path.split('/').filter(|s| !s.is_empty()).collect()
}

/// Whether `path` is `route` or lies under it (`{…}` route segments match any segment).
pub fn under_route(path: &str, route: &str) -> bool {
    let (p, r) = (segments(path), segments(route));
    p.len() >= r.len()
        && r.iter()
            .zip(&p)
            .all(|(r, p)| r == p || (r.starts_with('{') && r.ends_with('}')))
}

fn admin(ctx: &mut Ctx, m: &Model<'_>) {
    let (Some((service, raw_service)), super::model::Opt::Ok((admin, raw))) =
        (&m.service, &m.admin)
    else {
        return;
    };
    if under_route(&admin.path, &service.route) {
        let span = raw.path.as_ref().map_or(raw.span, |p| p.span);
        ctx.push(
            ctx.diag(
                Code::AdminPathOverlap,
                format!(
                    "the admin path `{}` is inside the service route `{}`: clients calling it would get 401",
                    admin.path, service.route
                ),
            )
            .at(span, "overlaps the route")
            .also(raw_service.route.span, "the service route")
            .help("move `admin.path` outside the route, e.g. \"/__understudy/status\""),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admin_paths_under_a_route_overlap() {
        assert!(under_route("/v1/orders", "/v1/orders"));
        assert!(under_route("/v1/orders/status", "/v1/orders/{id}"));
        assert!(under_route(
            "/v1/recommendations/admin",
            "/v1/recommendations"
        ));
        assert!(!under_route("/__understudy/status", "/v1/recommendations"));
        assert!(!under_route("/v1", "/v1/orders/{id}"));
    }
}
