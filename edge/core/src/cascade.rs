//! [E-CASCADE] [E-VERSION] When the origin cannot answer, the policy's tiers are tried in
//! order, each under its own timeout and only when that timeout fits what is left of the
//! budget; each tier skipped or missed leaves a note with its reason for the log line.
//!
//! The walk is sans-IO: [`Walker::next`] says which read to perform (or answers from the
//! baked catalog directly, which needs no I/O) and [`Walker::on_kv`] / [`Walker::on_http`]
//! take what the read returned.

use crate::catalog::Catalog;
use crate::classify::{Failure, FailureReason, Items};
use crate::deadline::Deadline;
use crate::entry;
use crate::http::Outbound;
pub use crate::io::KvRead;
use crate::io::Op;
use crate::policy::{EmbeddedTier, HttpTier, NoMatch, OnExpired, Policy, TierKind};
use crate::request::Params;
use crate::staleness;
use crate::time::Millis;

/// A Worker invocation holds at most six simultaneous connections (origin fetches and KV
/// reads count; an aborted fetch frees its slot, a KV read we stopped waiting for does not).
pub const MAX_CONNECTIONS: u32 = 6;

/// What the request knows that every tier decision needs.
#[derive(Debug, Clone)]
pub struct Ctx<'p> {
    pub policy: &'p Policy,
    pub catalog: Option<&'p Catalog>,
    pub params: Params,
    pub deadline: Deadline,
}

/// A tier skipped or missed, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    pub tier: String,
    pub code: &'static str,
    pub detail: String,
}

/// A fallback answer. It has no field that could call it live or personalised: that is
/// the [E-DISCLOSE] invariant, held by the type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fallback {
    pub items: Items,
    pub tier: String,
    pub reason: FailureReason,
    pub age_ms: u64,
    /// The tier is keyed by user identity: its answers are `private`.
    pub per_user: bool,
    pub cache_control: Option<String>,
    /// Served from baked stubs past their validation ceiling (`on_expired = disclose`).
    pub catalog_expired: bool,
}

/// The next thing the walk needs.
#[derive(Debug, Clone, PartialEq)]
pub enum TierStep<'p> {
    /// Perform `op` (a KV read, an HTTP tier's fetch) for tier `tier`, waiting at most
    /// `timeout_ms`; hand its result to [`Walker::on_kv`] or [`Walker::on_http`].
    Read {
        tier: usize,
        timeout_ms: u64,
        op: Op<'p>,
    },
    Answer(Fallback),
    /// No tier answered.
    Exhausted,
}

/// The walk through the cascade after the origin failed with `failure`.
#[derive(Debug, Clone)]
pub struct Walker {
    pub failure: Failure,
    next: usize,
    pending: Option<usize>,
    pub notes: Vec<Note>,
}

impl Walker {
    pub fn new(failure: Failure) -> Walker {
        Walker {
            failure,
            next: 0,
            pending: None,
            notes: Vec::new(),
        }
    }

    fn note(&mut self, ctx: &Ctx<'_>, tier: usize, code: &'static str, detail: impl Into<String>) {
        let name = ctx
            .policy
            .cascade
            .tiers
            .get(tier)
            .map(|t| t.name.clone())
            .unwrap_or_default();
        // Details come from KV errors and origin bodies among others: one bounded line,
        // never a JavaScript stack.
        self.notes.push(Note {
            tier: name,
            code,
            detail: crate::classify::bounded(&detail.into()),
        });
    }

    /// The timeout an I/O tier gets, or `None` (noted) when it cannot run: the budget left
    /// does not fit its timeout, or the request already holds every connection it may.
    fn io_slot(
        &mut self,
        ctx: &Ctx<'_>,
        i: usize,
        fits: Option<u64>,
        timeout: u64,
        open: u32,
        now: Millis,
    ) -> Option<u64> {
        let Some(timeout_ms) = fits else {
            let left = ctx.deadline.remaining(now);
            self.note(
                ctx,
                i,
                "NO_BUDGET",
                format!("needs {timeout} ms, {left} ms left"),
            );
            return None;
        };
        if open >= MAX_CONNECTIONS {
            self.note(
                ctx,
                i,
                "CONNECTION_LIMIT",
                format!("{open} connections still open"),
            );
            return None;
        }
        Some(timeout_ms)
    }

    /// The next tier to try at `now`, with `open` connections still held by this request.
    /// `fetch` builds an HTTP tier's request (the engine knows its headers and credential).
    pub fn next<'p>(
        &mut self,
        ctx: &Ctx<'p>,
        now: Millis,
        open: u32,
        fetch: impl Fn(usize, &HttpTier) -> Outbound,
    ) -> TierStep<'p> {
        let tiers = &ctx.policy.cascade.tiers;
        while let Some(tier) = tiers.get(self.next) {
            let i = self.next;
            self.next += 1;
            let timeout = tier.kind.timeout_ms();
            let fits = ctx.deadline.step_timeout(now, timeout);
            match &tier.kind {
                TierKind::Kv(kv) => {
                    let Some(key) = kv.key.render(|n| ctx.params.lookup(n)) else {
                        self.note(
                            ctx,
                            i,
                            "KEY_PARAM_MISSING",
                            format!("no value for a parameter of `{}`", kv.key.source),
                        );
                        continue;
                    };
                    let Some(timeout_ms) = self.io_slot(ctx, i, fits, timeout, open, now) else {
                        continue;
                    };
                    self.pending = Some(i);
                    return TierStep::Read {
                        tier: i,
                        timeout_ms,
                        op: Op::ReadKv {
                            binding: &kv.binding,
                            key,
                        },
                    };
                }
                TierKind::Http(h) => {
                    let Some(timeout_ms) = self.io_slot(ctx, i, fits, timeout, open, now) else {
                        continue;
                    };
                    self.pending = Some(i);
                    return TierStep::Read {
                        tier: i,
                        timeout_ms,
                        op: Op::Fetch(fetch(i, h)),
                    };
                }
                TierKind::Embedded(e) => match embedded(ctx, e, now) {
                    Ok((items, age_ms, catalog_expired)) => {
                        return TierStep::Answer(self.answer(
                            ctx,
                            i,
                            items,
                            age_ms,
                            catalog_expired,
                        ))
                    }
                    Err((code, detail)) => self.note(ctx, i, code, detail),
                },
            }
        }
        TierStep::Exhausted
    }

    fn answer(
        &self,
        ctx: &Ctx<'_>,
        i: usize,
        items: Items,
        age_ms: u64,
        catalog_expired: bool,
    ) -> Fallback {
        let tier = &ctx.policy.cascade.tiers[i];
        Fallback {
            items,
            tier: tier.name.clone(),
            reason: self.failure.reason,
            age_ms,
            per_user: ctx.policy.tier_is_per_user(tier),
            cache_control: ctx.policy.tier_cache_control(tier).map(str::to_string),
            catalog_expired,
        }
    }

    /// The pending KV read's result: the answer on a fresh hit, `None` (with a note) on a miss.
    pub fn on_kv(&mut self, ctx: &Ctx<'_>, now: Millis, read: KvRead) -> Option<Fallback> {
        let i = self.pending.take()?;
        let TierKind::Kv(kv) = &ctx.policy.cascade.tiers.get(i)?.kind else {
            return None;
        };
        let (value, metadata) = match read {
            KvRead::TimedOut => {
                self.note(
                    ctx,
                    i,
                    "KV_TIMEOUT",
                    format!("no answer within {} ms", kv.read_timeout_ms),
                );
                return None;
            }
            KvRead::Error(e) => {
                self.note(ctx, i, "KV_ERROR", e);
                return None;
            }
            KvRead::Value { value, metadata } => (value, metadata),
        };
        let parsed = if kv.published {
            entry::parse_published(value.as_deref(), metadata.as_ref())
        } else {
            entry::parse(value.as_deref(), metadata.as_ref())
        };
        let e = match parsed {
            Ok(e) => e,
            Err(miss) => {
                self.note(ctx, i, miss.code(), miss.detail());
                return None;
            }
        };
        match staleness::judge(e.written_at, now, kv.max_staleness_ms) {
            Ok(age_ms) => Some(self.answer(ctx, i, e.items, age_ms, false)),
            Err(miss) => {
                self.note(ctx, i, miss.code(), miss.detail());
                None
            }
        }
    }

    /// The `result_path` of the HTTP tier being fetched.
    pub fn pending_http_path<'p>(&self, ctx: &Ctx<'p>) -> Option<&'p [String]> {
        match &ctx.policy.cascade.tiers.get(self.pending?)?.kind {
            TierKind::Http(h) => Some(&h.result_path),
            _ => None,
        }
    }

    /// The pending HTTP tier's result (already verified against its `result_path`).
    pub fn on_http(&mut self, ctx: &Ctx<'_>, result: Result<Items, Failure>) -> Option<Fallback> {
        let i = self.pending.take()?;
        match result {
            Ok(items) => Some(self.answer(ctx, i, items, 0, false)),
            Err(f) => {
                self.note(ctx, i, f.reason.code(), f.detail);
                None
            }
        }
    }
}

/// Answers from the baked catalog: the items, their age (since the inventory snapshot the
/// stubs were validated against) and whether they are past the catalog's ceiling.
fn embedded(
    ctx: &Ctx<'_>,
    tier: &EmbeddedTier,
    now: Millis,
) -> Result<(Items, u64, bool), (&'static str, String)> {
    let catalog = ctx
        .catalog
        .ok_or(("NO_CATALOG", "the bake carries no catalog".to_string()))?;
    let age_ms = now.since(Millis(catalog.evidence_at_ms()));
    let mut expired = false;
    if let Some(rules) = &ctx.policy.catalog {
        if age_ms > rules.max_age_ms {
            match rules.on_expired {
                OnExpired::Refuse => {
                    return Err((
                        "CATALOG_EXPIRED",
                        format!(
                            "stubs checked against an inventory snapshot {age_ms} ms old, past the {} ms ceiling; re-bake",
                            rules.max_age_ms
                        ),
                    ))
                }
                OnExpired::Disclose => expired = true,
            }
        }
    }
    let items: Items = match tier {
        EmbeddedTier::Curated { by, limit } => {
            let category = by.as_deref().and_then(|p| ctx.params.get(p));
            catalog
                .curated(category, *limit as usize)
                .into_iter()
                .map(|i| i.json.clone())
                .collect()
        }
        EmbeddedTier::Keyword {
            query,
            limit,
            no_match,
        } => {
            let hits = ctx
                .params
                .get(query)
                .map(|q| catalog.search(q, *limit as usize))
                .unwrap_or_default();
            if hits.is_empty() {
                match no_match {
                    NoMatch::Curated => catalog.curated(None, *limit as usize),
                    NoMatch::Empty => return Ok((Vec::new(), age_ms, expired)),
                    NoMatch::NextTier => {
                        return Err(("NO_MATCH", "no catalog title matches the query".into()))
                    }
                }
            } else {
                hits
            }
            .into_iter()
            .map(|i| i.json.clone())
            .collect()
        }
    };
    if items.is_empty() {
        return Err(("EMBEDDED_EMPTY", "no stub matches".to_string()));
    }
    Ok((items, age_ms, expired))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::ParamValue;
    use crate::template::identity_hash;
    use crate::testing::{seed_catalog, seed_policy, HOUR, NOW};
    use serde_json::json;

    fn params() -> Params {
        Params {
            values: vec![
                ParamValue {
                    name: "user_id".into(),
                    value: "alice".into(),
                    identity: true,
                },
                ParamValue {
                    name: "category".into(),
                    value: "audio".into(),
                    identity: false,
                },
            ],
        }
    }

    /// The request arrived at `NOW - spent`.
    fn ctx<'a>(
        policy: &'a Policy,
        catalog: &'a Catalog,
        params: &'a Params,
        spent: u64,
    ) -> Ctx<'a> {
        Ctx {
            policy,
            catalog: Some(catalog),
            params: params.clone(),
            deadline: Deadline::new(Millis(NOW - spent), policy.budget),
        }
    }

    fn no_http(_: usize, _: &HttpTier) -> Outbound {
        unreachable!("no HTTP tier in these policies")
    }

    fn timeout() -> Failure {
        Failure::new(FailureReason::MlTimeout, "t")
    }

    fn hit(written_at: u64) -> KvRead {
        KvRead::Value {
            value: Some(r#"{"items":[{"sku":"kv"}]}"#.into()),
            metadata: Some(json!({"written_at": written_at})),
        }
    }

    #[test]
    fn seed_000_all_tiers_fit_after_the_race() {
        let (p, c, q) = (seed_policy(), seed_catalog(), params());
        let cx = ctx(&p, &c, &q, 45);
        let mut w = Walker::new(timeout());
        let now = Millis(NOW);
        let TierStep::Read {
            timeout_ms,
            op: Op::ReadKv { binding, key },
            ..
        } = w.next(&cx, now, 0, no_http)
        else {
            panic!()
        };
        assert_eq!((binding, timeout_ms), ("RECS_KV", 8));
        assert_eq!(key, format!("user_rec:{}", identity_hash("alice")));
        assert_eq!(w.on_kv(&cx, now.plus(8), KvRead::TimedOut), None);
        let TierStep::Read {
            timeout_ms,
            op: Op::ReadKv { key, .. },
            ..
        } = w.next(&cx, now.plus(8), 1, no_http)
        else {
            panic!()
        };
        assert_eq!((key.as_str(), timeout_ms), ("cat_rec:audio", 5));
        assert_eq!(
            w.on_kv(
                &cx,
                now.plus(13),
                KvRead::Value {
                    value: None,
                    metadata: None
                }
            ),
            None
        );
        let TierStep::Answer(f) = w.next(&cx, now.plus(13), 1, no_http) else {
            panic!()
        };
        assert_eq!(f.tier, "stubs");
        assert_eq!(
            f.items,
            vec![c.items[0].json.clone(), c.items[4].json.clone()]
        );
        // Age counts from the inventory snapshot (2 h before NOW), not the bake (1 h).
        assert_eq!(f.age_ms, 2 * HOUR + 13);
        let codes: Vec<_> = w.notes.iter().map(|n| (n.tier.as_str(), n.code)).collect();
        assert_eq!(codes, [("user", "KV_TIMEOUT"), ("category", "KV_ABSENT")]);
    }

    #[test]
    fn seed_000_with_56_ms_spent_only_the_embedded_tier_fits() {
        let (p, c, q) = (seed_policy(), seed_catalog(), params());
        let cx = ctx(&p, &c, &q, 56);
        let mut w = Walker::new(timeout());
        let TierStep::Answer(f) = w.next(&cx, Millis(NOW), 0, no_http) else {
            panic!()
        };
        assert_eq!(f.tier, "stubs");
        let codes: Vec<_> = w.notes.iter().map(|n| n.code).collect();
        assert_eq!(codes, ["NO_BUDGET", "NO_BUDGET"]);
        assert_eq!(w.notes[0].detail, "needs 8 ms, 4 ms left");
    }

    #[test]
    fn seed_000_with_50_ms_spent_a_user_miss_leaves_only_the_embedded_tier() {
        let (p, c, q) = (seed_policy(), seed_catalog(), params());
        let cx = ctx(&p, &c, &q, 50);
        let mut w = Walker::new(timeout());
        let now = Millis(NOW);
        assert!(matches!(
            w.next(&cx, now, 0, no_http),
            TierStep::Read { timeout_ms: 8, .. }
        ));
        assert_eq!(w.on_kv(&cx, now.plus(8), KvRead::TimedOut), None);
        let TierStep::Answer(f) = w.next(&cx, now.plus(8), 1, no_http) else {
            panic!()
        };
        assert_eq!(f.tier, "stubs");
        assert_eq!(w.notes[1].code, "NO_BUDGET");
    }

    #[test]
    fn fresh_user_tier_answers_privately() {
        let (p, c, q) = (seed_policy(), seed_catalog(), params());
        let cx = ctx(&p, &c, &q, 45);
        let mut w = Walker::new(timeout());
        let now = Millis(NOW);
        w.next(&cx, now, 0, no_http);
        let f = w.on_kv(&cx, now.plus(2), hit(NOW - HOUR)).unwrap();
        assert_eq!(
            (f.tier.as_str(), f.per_user, f.age_ms),
            ("user", true, HOUR + 2)
        );
        assert_eq!(f.cache_control.as_deref(), Some("private, max-age=30"));
        assert_eq!(f.items, vec![r#"{"sku":"kv"}"#]);
    }

    #[test]
    fn stale_user_tier_falls_to_the_category_tier() {
        let (p, c, q) = (seed_policy(), seed_catalog(), params());
        let cx = ctx(&p, &c, &q, 45);
        let mut w = Walker::new(timeout());
        let now = Millis(NOW);
        w.next(&cx, now, 0, no_http);
        assert_eq!(
            w.on_kv(&cx, now.plus(1), hit(NOW - 4 * HOUR - 60_000)),
            None
        );
        w.next(&cx, now.plus(1), 0, no_http);
        let f = w.on_kv(&cx, now.plus(2), hit(NOW - HOUR)).unwrap();
        assert_eq!((f.tier.as_str(), f.per_user), ("category", false));
        assert_eq!(f.cache_control.as_deref(), Some("public, max-age=30"));
        assert_eq!(w.notes[0].code, "KV_STALE");
    }

    #[test]
    fn future_timestamp_and_garbage_are_misses() {
        let (p, c, q) = (seed_policy(), seed_catalog(), params());
        let cx = ctx(&p, &c, &q, 45);
        let mut w = Walker::new(timeout());
        let now = Millis(NOW);
        w.next(&cx, now, 0, no_http);
        assert_eq!(w.on_kv(&cx, now, hit(NOW + HOUR)), None);
        w.next(&cx, now, 0, no_http);
        let garbage = KvRead::Value {
            value: Some("not json".into()),
            metadata: None,
        };
        assert_eq!(w.on_kv(&cx, now, garbage), None);
        let codes: Vec<_> = w.notes.iter().map(|n| n.code).collect();
        assert_eq!(codes, ["KV_FUTURE_TIMESTAMP", "KV_NOT_JSON"]);
    }

    #[test]
    fn kv_tiers_respect_the_connection_limit() {
        let (p, c, q) = (seed_policy(), seed_catalog(), params());
        let cx = ctx(&p, &c, &q, 45);
        let mut w = Walker::new(timeout());
        let TierStep::Answer(_) = w.next(&cx, Millis(NOW), MAX_CONNECTIONS, no_http) else {
            panic!()
        };
        assert_eq!(w.notes[0].code, "CONNECTION_LIMIT");
    }

    #[test]
    fn expired_catalog_is_refused_or_disclosed_per_policy() {
        let (mut p, mut c, q) = (seed_policy(), seed_catalog(), params());
        p.cascade.tiers.drain(0..2);
        c.validated_at_ms = NOW - 25 * HOUR;
        let cx = ctx(&p, &c, &q, 45);
        let mut w = Walker::new(timeout());
        assert_eq!(w.next(&cx, Millis(NOW), 0, no_http), TierStep::Exhausted);
        assert_eq!(w.notes[0].code, "CATALOG_EXPIRED");
        p.catalog.as_mut().unwrap().on_expired = OnExpired::Disclose;
        let cx = ctx(&p, &c, &q, 45);
        let TierStep::Answer(f) = Walker::new(timeout()).next(&cx, Millis(NOW), 0, no_http) else {
            panic!()
        };
        assert!(f.catalog_expired);
    }

    #[test]
    fn stub_age_counts_from_the_inventory_snapshot_not_the_bake() {
        // Baked 5 h ago from a snapshot that was already 20 h old: 25 h of evidence age.
        let (mut p, mut c, q) = (seed_policy(), seed_catalog(), params());
        p.cascade.tiers.drain(0..2);
        c.validated_at_ms = NOW - 5 * HOUR;
        c.snapshot_at_ms = NOW - 25 * HOUR;
        let cx = ctx(&p, &c, &q, 45);
        let mut w = Walker::new(timeout());
        assert_eq!(w.next(&cx, Millis(NOW), 0, no_http), TierStep::Exhausted);
        assert_eq!(w.notes[0].code, "CATALOG_EXPIRED");
        c.snapshot_at_ms = NOW - 23 * HOUR;
        let cx = ctx(&p, &c, &q, 45);
        assert!(matches!(
            Walker::new(timeout()).next(&cx, Millis(NOW), 0, no_http),
            TierStep::Answer(_)
        ));
    }

    fn keyword_policy(no_match: NoMatch) -> Policy {
        let mut p = seed_policy();
        p.cascade.tiers = vec![crate::policy::Tier {
            name: "shell".into(),
            kind: TierKind::Embedded(EmbeddedTier::Keyword {
                query: "q".into(),
                limit: 3,
                no_match,
            }),
            cache_control: None,
        }];
        p
    }

    fn query(q: &str) -> Params {
        Params {
            values: vec![ParamValue {
                name: "q".into(),
                value: q.into(),
                identity: false,
            }],
        }
    }

    #[test]
    fn keyword_tier_searches_by_the_query_parameter() {
        let (p, c) = (keyword_policy(NoMatch::NextTier), seed_catalog());
        let q = query("headphones");
        let cx = ctx(&p, &c, &q, 45);
        let TierStep::Answer(f) = Walker::new(timeout()).next(&cx, Millis(NOW), 0, no_http) else {
            panic!()
        };
        assert_eq!(f.items.len(), 2);
    }

    /// Issue 10: a final keyword tier that matched nothing answered 503 under a policy that
    /// promised an answer. What it answers is now the policy's choice.
    #[test]
    fn a_query_matching_nothing_gets_the_policys_no_match_answer() {
        let c = seed_catalog();
        let (zebra, absent) = (query("zebra"), Params { values: vec![] });
        for q in [&zebra, &absent] {
            let p = keyword_policy(NoMatch::Curated);
            let TierStep::Answer(f) =
                Walker::new(timeout()).next(&ctx(&p, &c, q, 45), Millis(NOW), 0, no_http)
            else {
                panic!("curated answers")
            };
            assert_eq!(f.items.len(), 3, "the curated head, up to the limit");

            let p = keyword_policy(NoMatch::Empty);
            let TierStep::Answer(f) =
                Walker::new(timeout()).next(&ctx(&p, &c, q, 45), Millis(NOW), 0, no_http)
            else {
                panic!("empty answers")
            };
            assert!(f.items.is_empty());

            let p = keyword_policy(NoMatch::NextTier);
            let mut w = Walker::new(timeout());
            assert_eq!(
                w.next(&ctx(&p, &c, q, 45), Millis(NOW), 0, no_http),
                TierStep::Exhausted
            );
            assert_eq!(w.notes[0].code, "NO_MATCH");
        }
    }
}
