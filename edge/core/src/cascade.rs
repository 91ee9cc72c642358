//! [E-CASCADE] [E-VERSION] When the origin cannot answer, the policy's tiers are tried in
//! order, each under its own timeout and only when that timeout fits what is left of the
//! budget; each tier skipped or missed leaves a note with its reason for the log line.
//!
//! The walk is sans-IO and knows no tier kind: [`Walker::next`] asks the next tier's kind
//! ([`crate::tier::Kind`]) to start — it answers from memory, names the read it needs, or
//! cannot run — and [`Walker::on_done`] hands it what the read returned. The walk keeps the
//! order, the budget, the connection limit and the notes.

use crate::catalog::Catalog;
use crate::classify::{Failure, FailureReason, Items};
use crate::deadline::Deadline;
use crate::http::Outbound;
pub use crate::io::KvRead;
use crate::io::{Done, Op};
use crate::params::Params;
use crate::policy::Policy;
use crate::tier::{Consult, Env, Found, Read, Start};
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

impl Ctx<'_> {
    /// What a tier reads of the request at `now`.
    fn env(&self, now: Millis) -> Env<'_> {
        Env {
            now,
            params: &self.params,
            catalog: self.catalog,
            catalog_rules: self.policy.catalog.as_ref(),
            max_body_bytes: self.policy.origin.max_body_bytes,
        }
    }
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
    /// `timeout_ms`; hand its result to [`Walker::on_done`].
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
    /// The tier whose read is out, and when it started.
    pending: Option<(usize, Millis)>,
    pub notes: Vec<Note>,
    /// Every tier consulted, in order: what it found (the log line's `tiers`).
    pub consulted: Vec<Consult>,
}

impl Walker {
    pub fn new(failure: Failure) -> Walker {
        Walker {
            failure,
            next: 0,
            pending: None,
            notes: Vec::new(),
            consulted: Vec::new(),
        }
    }

    fn consult(
        &mut self,
        ctx: &Ctx<'_>,
        i: usize,
        started: Millis,
        now: Millis,
        read: Read,
        age_ms: Option<u64>,
    ) {
        let tier = ctx
            .policy
            .cascade
            .tiers
            .get(i)
            .map(|t| t.name.clone())
            .unwrap_or_default();
        self.consulted.push(Consult {
            tier,
            started,
            ended: now,
            read,
            age_ms,
        });
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
    /// `fetch` builds a request to a URL for a tier (the engine knows its headers and the
    /// tier's credential).
    pub fn next<'p>(
        &mut self,
        ctx: &Ctx<'p>,
        now: Millis,
        open: u32,
        fetch: impl Fn(usize, &str) -> Outbound,
    ) -> TierStep<'p> {
        let tiers = &ctx.policy.cascade.tiers;
        while let Some(tier) = tiers.get(self.next) {
            let i = self.next;
            self.next += 1;
            match tier.kind.start(&ctx.env(now), &|url| fetch(i, url)) {
                Start::Answer(found) => {
                    self.consult(ctx, i, now, now, Read::Hit, Some(found.age_ms));
                    return TierStep::Answer(self.answer(ctx, i, found));
                }
                Start::Skip(miss) => {
                    // A tier that answers from memory was consulted; one that cannot even
                    // name its read (a key parameter missing) was not.
                    if tier.kind.local() {
                        self.consult(ctx, i, now, now, miss.read, miss.age_ms);
                    }
                    self.note(ctx, i, miss.code, miss.detail)
                }
                Start::Read(op) => {
                    let timeout = tier.kind.timeout_ms();
                    let fits = ctx.deadline.step_timeout(now, timeout);
                    let Some(timeout_ms) = self.io_slot(ctx, i, fits, timeout, open, now) else {
                        continue;
                    };
                    self.pending = Some((i, now));
                    return TierStep::Read {
                        tier: i,
                        timeout_ms,
                        op,
                    };
                }
            }
        }
        TierStep::Exhausted
    }

    fn answer(&self, ctx: &Ctx<'_>, i: usize, found: Found) -> Fallback {
        let tier = &ctx.policy.cascade.tiers[i];
        Fallback {
            items: found.items,
            tier: tier.name.clone(),
            reason: self.failure.reason,
            age_ms: found.age_ms,
            per_user: ctx.policy.tier_is_per_user(tier),
            cache_control: ctx.policy.tier_cache_control(tier).map(str::to_string),
            catalog_expired: found.catalog_expired,
        }
    }

    /// The pending tier's read ended at `now` with `done`: the answer, or `None` (with a
    /// note) on a miss.
    pub fn on_done(&mut self, ctx: &Ctx<'_>, now: Millis, done: Done) -> Option<Fallback> {
        let (i, started) = self.pending.take()?;
        let tier = ctx.policy.cascade.tiers.get(i)?;
        match tier.kind.finish(&ctx.env(now), done) {
            Ok(found) => {
                self.consult(ctx, i, started, now, Read::Hit, Some(found.age_ms));
                Some(self.answer(ctx, i, found))
            }
            Err(miss) => {
                self.consult(ctx, i, started, now, miss.read, miss.age_ms);
                self.note(ctx, i, miss.code, miss.detail);
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{EmbeddedTier, NoMatch, OnExpired, TierKind};
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

    fn no_http(_: usize, _: &str) -> Outbound {
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
        assert_eq!(
            w.on_done(&cx, now.plus(8), Done::Kv(KvRead::TimedOut)),
            None
        );
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
            w.on_done(
                &cx,
                now.plus(13),
                Done::Kv(KvRead::Value {
                    value: None,
                    metadata: None
                })
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
        assert_eq!(
            w.on_done(&cx, now.plus(8), Done::Kv(KvRead::TimedOut)),
            None
        );
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
        let f = w
            .on_done(&cx, now.plus(2), Done::Kv(hit(NOW - HOUR)))
            .unwrap();
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
            w.on_done(&cx, now.plus(1), Done::Kv(hit(NOW - 4 * HOUR - 60_000))),
            None
        );
        w.next(&cx, now.plus(1), 0, no_http);
        let f = w
            .on_done(&cx, now.plus(2), Done::Kv(hit(NOW - HOUR)))
            .unwrap();
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
        assert_eq!(w.on_done(&cx, now, Done::Kv(hit(NOW + HOUR))), None);
        w.next(&cx, now, 0, no_http);
        let garbage = KvRead::Value {
            value: Some("not json".into()),
            metadata: None,
        };
        assert_eq!(w.on_done(&cx, now, Done::Kv(garbage)), None);
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
