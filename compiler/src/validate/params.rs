//! [C-PARAMS] Parameters agree with themselves and with what reads them: every parameter a
//! tier names is declared, defaults pass their own validation, path parameters and route
//! segments match both ways, and KV keys provably fit Workers KV's 512-byte limit. And the
//! admin path stays out of the service's route.

use understudy_core::policy::{Param, ParamSource, ParamType, TierKind};
use understudy_core::template::Part as TemplatePart;

use super::model::Model;
use super::Ctx;
use crate::codes::Code;
use crate::parse::cascade::RawTier;
use crate::parse::leaf::shown;

/// Workers KV's key size limit, in bytes.
pub const KV_KEY_LIMIT: usize = 512;
/// The length of an identity value in a key (the first 32 hex digits of its SHA-256).
const IDENTITY_KEY_LEN: usize = 32;
/// A hashed key's digest (SHA-256, hex).
const HASH_LEN: usize = 64;

pub fn check(ctx: &mut Ctx, m: &Model<'_>) {
    templates(ctx, m);
    defaults(ctx, m);
    route(ctx, m);
    key_length(ctx, m);
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
        let (span, names): (_, Vec<&str>) = match t.raw {
            RawTier::Kv(kv) => (kv.key.span, t.template_params()),
            RawTier::Embedded(e) => match (&e.by, &e.query) {
                (Some(b), _) => (b.span, vec![b.value.as_str()]),
                (_, Some(q)) => (q.span, vec![q.value.as_str()]),
                _ => continue,
            },
            RawTier::Http(_) => continue,
        };
        for name in names {
            if m.params.iter().any(|p| p.model.name == name) {
                continue;
            }
            // Point at `{name}` inside the string when it can be found.
            let sp = match t.raw {
                RawTier::Kv(kv) => kv
                    .key
                    .value
                    .as_str()
                    .find(&format!("{{{name}}}"))
                    .map(|at| (span.0 + at, span.0 + at + name.len() + 2))
                    .unwrap_or(span),
                _ => span,
            };
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

impl super::model::TierPart<'_> {
    fn template_params(&self) -> Vec<&str> {
        match &self.model.kind {
            TierKind::Kv(kv) => kv.key.params().collect(),
            _ => Vec::new(),
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

/// The longest key a template can render, with the arithmetic.
fn longest_key(
    template: &understudy_core::template::Template,
    params: &[Param],
) -> (usize, Vec<String>) {
    if template.hashed {
        let n = template.prefix().len() + HASH_LEN;
        return (
            n,
            vec![format!(
                "hashed: prefix `{}` ({} bytes) + SHA-256 ({HASH_LEN} hex digits) = {n} bytes",
                template.prefix(),
                template.prefix().len()
            )],
        );
    }
    let mut total = 0;
    let mut notes = Vec::new();
    for part in &template.parts {
        match part {
            TemplatePart::Lit(l) => {
                total += l.len();
                notes.push(format!("literal `{l}`: {} bytes", l.len()));
            }
            TemplatePart::Param(name) => {
                let Some(p) = params.iter().find(|p| &p.name == name) else {
                    continue;
                };
                let (n, why) = if p.identity {
                    (IDENTITY_KEY_LEN, "identity, hashed".to_string())
                } else if p.ty == ParamType::Integer {
                    (
                        p.max_len as usize,
                        format!("integer, max_len {}", p.max_len),
                    )
                } else {
                    (
                        3 * p.max_len as usize,
                        format!("max_len {} × 3 (percent-encoding)", p.max_len),
                    )
                };
                total += n;
                notes.push(format!("`{{{name}}}` ({why}): up to {n} bytes"));
            }
        }
    }
    notes.push(format!(
        "longest key: {total} bytes; Workers KV allows {KV_KEY_LIMIT}"
    ));
    (total, notes)
}

fn key_length(ctx: &mut Ctx, m: &Model<'_>) {
    let Some(params) = m.params() else { return };
    for (_, t) in m.tiers() {
        let (TierKind::Kv(kv), RawTier::Kv(raw)) = (&t.model.kind, t.raw) else {
            continue;
        };
        let (n, notes) = longest_key(&kv.key, &params);
        if n <= KV_KEY_LIMIT {
            continue;
        }
        let help = if kv.key.hashed {
            "shorten the key's literal prefix".to_string()
        } else {
            "lower the `max_len` of the parameters above, or set `hash_key = true` on the tier (the edge then stores the prefix and a SHA-256 of the key)".to_string()
        };
        ctx.push(
            ctx.diag(
                Code::KvKeyTooLong,
                format!(
                    "tier `{}`'s keys can be {n} bytes, over Workers KV's {KV_KEY_LIMIT}-byte key limit",
                    t.model.name
                ),
            )
            .at(raw.key.span, "can render too long a key")
            .notes(notes)
            .help(help),
        );
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
