//! Speculative tier reads: once the model has gone silent, a request's KV tier reads start
//! with its origin call (docs/adr/009-io-in-js.md).

use super::*;

/// Starts a request for `user`'s recommendations at `t`.
fn begin_for<'p>(e: &mut Engine<'p>, t: u64, user: &str) -> (Flight<'p>, Action<'p>) {
    let path = format!("/recommendations/{user}");
    let headers = vec![];
    let req = Incoming {
        method: "GET",
        path: &path,
        query: "",
        headers: &headers,
    };
    e.start(at(t), &req, &env(), t + 7)
}

/// Feeds KV misses at `t` until the answer.
fn kv_misses<'p>(e: &mut Engine<'p>, f: &mut Flight<'p>, t: u64, mut a: Action<'p>) -> Reply {
    loop {
        a = match a {
            Action::ReadKv { .. } => e.step(
                f,
                at(t),
                Event::Kv(KvRead::Value {
                    value: None,
                    metadata: None,
                }),
            ),
            Action::Respond(r) => return *r,
            other => panic!("unexpected {other:?}"),
        };
    }
}

fn prefetched(a: &Action<'_>) -> Vec<(String, String, u64)> {
    match a {
        Action::FetchOrigin { prefetch, .. } => prefetch
            .iter()
            .map(|p| (p.binding.to_string(), p.key.clone(), p.keep_ms))
            .collect(),
        other => panic!("expected the origin call, got {other:?}"),
    }
}

#[test]
fn once_the_model_has_gone_silent_calls_start_their_tier_reads_alongside() {
    let b = bake(seed_policy());
    let mut e = Engine::new(&b).unwrap();
    warm(&mut e);
    // While the model answers, no speculative read.
    let (mut f, a) = begin_for(&mut e, 100, "ann");
    assert_eq!(prefetched(&a), vec![]);
    let a = e.step(&mut f, at(145), Event::Origin(Observed::TimedOut));
    assert_eq!(
        kv_misses(&mut e, &mut f, 146, a).header("X-Degraded"),
        Some("true")
    );

    // The model let that call time out and has answered no one since: the next call starts
    // the reads of its KV tiers (not the category's, which this isolate has just read) with
    // the fetch, to keep for the rest of the request's budget.
    let (mut f, a) = begin_for(&mut e, 200, "bob");
    let p = prefetched(&a);
    assert_eq!(p.len(), 1, "{p:?}");
    let (binding, user_key, keep_ms) = &p[0];
    assert_eq!((binding.as_str(), *keep_ms), ("RECS_KV", 60));
    assert!(user_key.starts_with("user_rec:"), "{user_key}");
    // It times out too, and the cascade reads that key: the read was used.
    let a = e.step(&mut f, at(245), Event::Origin(Observed::TimedOut));
    let Action::ReadKv { ref key, .. } = a else {
        panic!("{a:?}")
    };
    assert_eq!(key, user_key);
    let _ = kv_misses(&mut e, &mut f, 246, a);
    assert_eq!(
        (e.counters().kv_prefetched, e.counters().kv_prefetch_unused),
        (1, 0)
    );

    // The model answers the next one after all: its speculative read was one KV read more.
    let (mut f, a) = begin_for(&mut e, 300, "cat");
    assert_eq!(prefetched(&a).len(), 1);
    let Action::Respond(r) = e.step(&mut f, at(310), Event::Origin(ok())) else {
        panic!("a live answer")
    };
    assert_eq!(r.header("X-Degraded"), Some("false"));
    assert_eq!(
        (e.counters().kv_prefetched, e.counters().kv_prefetch_unused),
        (2, 1)
    );
    // The model is heard from again: no more speculative reads.
    let (_, a) = begin_for(&mut e, 400, "dan");
    assert_eq!(prefetched(&a), vec![]);
}

#[test]
fn no_speculative_read_behind_a_tier_the_isolate_holds_a_value_of() {
    let b = bake(seed_policy());
    let mut e = Engine::new(&b).unwrap();
    warm(&mut e);
    // Eve's live answer is written through: the isolate holds her user-tier value.
    let (mut f, _) = begin_for(&mut e, 100, "eve");
    let Action::Respond(r) = e.step(&mut f, at(110), Event::Origin(ok())) else {
        panic!("a live answer")
    };
    assert!(
        !r.writes.is_empty(),
        "the seed policy writes the user tier through"
    );
    // Then the model goes silent (and KV with it: no read completes, none is kept).
    let (mut f, _) = begin_for(&mut e, 200, "ann");
    let mut a = e.step(&mut f, at(245), Event::Origin(Observed::TimedOut));
    while let Action::ReadKv { .. } = a {
        a = e.step(&mut f, at(250), Event::Kv(KvRead::TimedOut));
    }
    assert!(matches!(a, Action::Respond(_)));
    // Eve's user tier will answer from memory: nothing to read ahead for her.
    let (_, a) = begin_for(&mut e, 300, "eve");
    assert_eq!(prefetched(&a), vec![]);
    assert_eq!(e.counters().kv_prefetched, 0);
}
