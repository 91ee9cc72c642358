//! TOML → [`Policy`], reporting every problem with its span.
//!
//! Parsing only checks shape (keys, types, units, enum words). Whether the policy makes
//! sense as a whole — budget arithmetic, failure domains, privacy — is `validate`'s job.

mod breaker;
mod cascade;
mod disclose;
pub mod events;
pub mod node;
mod origin;
mod route;

pub use origin::host_of;

use understudy_core::policy::*;

use crate::codes;
use node::{Ctx, Node, Table};

const MAX_COUNT: u64 = 1_000_000;

/// Parses `text` into a policy. Returns `None` when any error was reported into `ctx`.
pub fn parse(ctx: &mut Ctx, text: &str) -> Option<Policy> {
    let root = match toml_span::parse(text) {
        Ok(v) => Node::from_toml(v),
        Err(e) => {
            let span = (e.span.start, e.span.end.max(e.span.start));
            ctx.error(
                codes::TOML_SYNTAX,
                span,
                format!("the policy is not valid TOML: {}", e.kind),
                "TOML parsing stopped here",
                "fix the TOML syntax at this point; see https://toml.io for the format",
            );
            return None;
        }
    };
    let errors_before = ctx.diags.len();
    let mut top = Table::new(ctx, "", root)?;
    let version = top
        .opt_str(ctx, "version")
        .unwrap_or_else(|| "unversioned".to_string());
    let service = top
        .opt_table(ctx, "service")
        .and_then(|t| route::service(ctx, t));
    if ctx.span_of("service").is_none() {
        missing_table(ctx, &top, "service");
    }
    let params = top
        .opt_table(ctx, "params")
        .map(|t| route::params(ctx, t))
        .unwrap_or_default();
    let identity = top
        .opt_table(ctx, "identity")
        .and_then(|t| route::identity(ctx, t));
    let budget = top
        .opt_table(ctx, "budget")
        .and_then(|t| origin::budget(ctx, t));
    if ctx.span_of("budget").is_none() {
        missing_table(ctx, &top, "budget");
    }
    let origin = top
        .opt_table(ctx, "origin")
        .and_then(|t| origin::origin(ctx, t));
    if ctx.span_of("origin").is_none() {
        missing_table(ctx, &top, "origin");
    }
    let breaker = match top.opt_table(ctx, "breaker") {
        Some(t) => breaker::breaker(ctx, t),
        None => Some(Breaker::Off),
    };
    let cascade = top
        .opt_table(ctx, "cascade")
        .and_then(|t| cascade::cascade(ctx, t));
    if ctx.span_of("cascade").is_none() {
        missing_table(ctx, &top, "cascade");
    }
    let disclosure = match top.opt_table(ctx, "disclosure") {
        Some(t) => disclose::disclosure(ctx, t),
        None => Some(disclose::default_disclosure()),
    };
    let storm = top
        .opt_table(ctx, "storm")
        .and_then(|t| disclose::storm(ctx, t));
    let catalog = top
        .opt_table(ctx, "catalog")
        .and_then(|t| disclose::catalog(ctx, t));
    let admin = top
        .opt_table(ctx, "admin")
        .and_then(|t| disclose::admin(ctx, t));
    let events = top
        .opt_table(ctx, "events")
        .and_then(|t| events::events(ctx, t));
    top.finish(ctx);

    if ctx.diags.len() > errors_before {
        return None;
    }
    Some(Policy {
        version,
        service: service?,
        params,
        budget: budget?,
        origin: origin?,
        breaker: breaker?,
        cascade: cascade?,
        disclosure: disclosure?,
        storm,
        catalog,
        identity,
        admin,
        events,
    })
}

fn missing_table(ctx: &mut Ctx, top: &Table, name: &str) {
    ctx.error(
        codes::MISSING_KEY,
        (top.span.0, top.span.0),
        format!("the policy has no `[{name}]` table"),
        format!("`[{name}]` is required"),
        format!("add a `[{name}]` table; docs/policy.md lists its keys"),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_are_extracted_for_domain_checks() {
        assert_eq!(
            host_of("https://ML.example:8443/x").as_deref(),
            Some("ml.example")
        );
        assert_eq!(
            host_of("http://user@127.0.0.1:8788").as_deref(),
            Some("127.0.0.1")
        );
        assert_eq!(host_of("ftp://x"), None);
        assert_eq!(host_of("https:///x"), None);
    }
}
