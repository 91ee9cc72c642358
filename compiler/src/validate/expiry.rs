//! [C-EXPIRY] Promises that lapse: baked stubs that stop answering on a known date. A
//! warning that names the date (`--deny-warnings` makes it fatal). (A final keyword tier
//! that has no answer for some requests is the embedded kind's own rule:
//! `parse::tier::embedded`.)

use understudy_core::catalog::Catalog;
use understudy_core::policy::{CatalogRules, OnExpired, Policy, Promise, Tier};
use understudy_core::time::format_duration as fmt;

use super::model::{Model, Opt};
use super::Ctx;
use crate::codes::Code;
use crate::diag::Diagnostic;

/// An instant (ms since the epoch) as RFC 3339, to the second.
pub fn rfc3339(ms: u64) -> String {
    time::OffsetDateTime::from_unix_timestamp((ms / 1000) as i64)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_else(|| format!("{ms} ms after the epoch"))
}

/// The instant the final tier's stubs expire, when the edge will refuse them then: the
/// promise is `always_answer`, the last tier answers from the catalog and `on_expired` is
/// `refuse`.
fn lapse(
    promise: Promise,
    last: &Tier,
    rules: &CatalogRules,
    catalog: &Catalog,
) -> Option<(u64, u64)> {
    let refused = promise == Promise::AlwaysAnswer
        && rules.on_expired == OnExpired::Refuse
        && last.kind.uses_catalog();
    let evidence = catalog.evidence_at_ms();
    refused.then(|| (evidence, evidence.saturating_add(rules.max_age_ms)))
}

fn warning(ctx: &Ctx, last: &Tier, rules: &CatalogRules, evidence: u64, until: u64) -> Diagnostic {
    ctx.diag(
        Code::StubsExpire,
        format!(
            "the final tier `{}` stops answering at {}: from then every model failure is a 503",
            last.name,
            rfc3339(until)
        ),
    )
    .note(format!(
        "the stubs were checked against the inventory snapshot of {}; `catalog.max_age` is {}",
        rfc3339(evidence),
        fmt(rules.max_age_ms)
    ))
    .help(format!(
        "re-bake with a fresh snapshot before {} (`understudy bake --from DIR --catalog FILE --inventory FILE`), or set `on_expired = \"disclose\"` to serve expired stubs with `X-Catalog-Expired: true`",
        rfc3339(until)
    ))
}

/// The final tier answers from the baked stubs, which the edge refuses once the snapshot
/// they were checked against is older than `max_age`.
pub fn stubs_expire(ctx: &mut Ctx, m: &Model<'_>, catalog: &Catalog) {
    let (Some(promise), Opt::Ok((rules, raw)), Some(Some(last))) =
        (m.promise(), &m.catalog, m.tiers.last())
    else {
        return;
    };
    let Some((evidence, until)) = lapse(promise, &last.model, rules, catalog) else {
        return;
    };
    let span = raw.on_expired.map_or(raw.span, |o| o.span);
    let d = warning(ctx, &last.model, rules, evidence, until)
        .at(span, "the edge refuses expired stubs")
        .also(last.raw.name().span, "the final net");
    ctx.push(d);
}

/// [`stubs_expire`] for a policy decoded from a bake (a re-bake): no spans to point at.
pub fn baked_stubs_expire(ctx: &mut Ctx, policy: &Policy, catalog: &Catalog) {
    let (Some(rules), Some(last)) = (&policy.catalog, policy.cascade.tiers.last()) else {
        return;
    };
    if let Some((evidence, until)) = lapse(policy.cascade.promise, last, rules, catalog) {
        let d = warning(ctx, last, rules, evidence, until);
        ctx.push(d);
    }
}
