//! Speculative tier reads: once the model has gone silent, a request's KV tier reads start
//! with its origin call, and the cascade's read of the key at the deadline joins them
//! (docs/adr/009-io-in-js.md, docs/adr/010-the-engine-owns-time.md).

use super::*;

/// Starts a request for `user`'s recommendations at `t`.
fn begin_for<'p>(e: &mut Engine<'p>, t: u64, user: &str) -> (Flight<'p>, Output<'p>) {
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
fn kv_misses<'p>(e: &mut Engine<'p>, f: &mut Flight<'p>, t: u64, mut out: Output<'p>) -> Reply {
    for _ in 0..10 {
        if let Some(r) = out.reply() {
            return r.clone();
        }
        let io = kv_read(&out).unwrap_or_else(|| panic!("a KV read expected: {out:?}"));
        out = e.step(f, at(t), kv_done(io, miss()));
    }
    panic!("no answer")
}

/// The KV reads `out` starts alongside its fetch: (binding, key).
fn prefetched(out: &Output<'_>) -> Vec<(String, String)> {
    assert_eq!(fetches(out).len(), 1, "expected the origin call: {out:?}");
    out.starts()
        .filter_map(|(_, op)| match op {
            Op::ReadKv { binding, key } => Some((binding.to_string(), key.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn once_the_model_has_gone_silent_calls_start_their_tier_reads_alongside() {
    let b = bake(seed_policy());
    let mut e = Engine::new(&b).unwrap();
    warm(&mut e);
    // While the model answers, no speculative read.
    let (mut f, out) = begin_for(&mut e, 100, "ann");
    assert_eq!(prefetched(&out), vec![]);
    let out = e.step(&mut f, at(145), Input::Timer);
    assert_eq!(
        kv_misses(&mut e, &mut f, 146, out).header("X-Degraded"),
        Some("true")
    );

    // The model let that call time out and has answered no one since: the next call starts
    // the reads of its KV tiers (not the category's, which this isolate has just read) with
    // the fetch.
    let (mut f, out) = begin_for(&mut e, 200, "bob");
    let p = prefetched(&out);
    assert_eq!(p.len(), 1, "{p:?}");
    let (binding, user_key) = &p[0];
    assert_eq!(binding, "RECS_KV");
    assert!(user_key.starts_with("user_rec:"), "{user_key}");
    let read = kv_read(&out).unwrap();
    // It times out too, and the cascade waits for that read rather than starting another…
    let out = e.step(&mut f, at(245), Input::Timer);
    assert!(
        kv_keys(&out).is_empty(),
        "no second read of the key: {out:?}"
    );
    // …whose miss comes at 246: the category tier (read lately) misses, the stubs answer.
    let r = reply(e.step(&mut f, at(246), kv_done(read, miss())));
    assert_eq!(r.header("X-Fallback-Tier"), Some("stubs"));
    assert_eq!(
        (e.counters().kv_prefetched, e.counters().kv_prefetch_unused),
        (1, 0)
    );

    // The model answers the next one after all: its speculative read was one KV read more.
    let (mut f, out) = begin_for(&mut e, 300, "cat");
    assert_eq!(prefetched(&out).len(), 1);
    let r = reply(e.step(&mut f, at(310), fetched(fetch(&out), ok())));
    assert_eq!(r.header("X-Degraded"), Some("false"));
    assert_eq!(
        (e.counters().kv_prefetched, e.counters().kv_prefetch_unused),
        (2, 1)
    );
    // Its read ends after the answer: the isolate still keeps what it found.
    e.settle(at(320), kv_done(kv_read(&out).unwrap(), miss()));
    // The model is heard from again: no more speculative reads.
    let (_, out) = begin_for(&mut e, 400, "dan");
    assert_eq!(prefetched(&out), vec![]);
}

/// Issue 23: a request that needs a key another request is reading does not await that
/// request's promise (in workerd a cross-request promise lost wake-ups, and requests with
/// their answer ready were cancelled as hung): it finds the result in the isolate's cache
/// when its own timer fires, every millisecond, and starts no read of its own.
#[test]
fn a_request_waiting_on_another_requests_read_finds_its_result_when_its_timer_fires() {
    let b = bake(seed_policy());
    let mut e = Engine::new(&b).unwrap();
    warm(&mut e);
    let (mut fa, _) = begin_for(&mut e, 100, "ann");
    let (mut fb, _) = begin_for(&mut e, 101, "bob");
    // Both calls time out; each reads its own user tier, which misses.
    let a = e.step(&mut fa, at(145), Input::Timer);
    let b_out = e.step(&mut fb, at(146), Input::Timer);
    let a = e.step(&mut fa, at(147), kv_done(kv_read(&a).unwrap(), miss()));
    let category = kv_read(&a).expect("ann starts the category tier's read");
    assert_eq!(kv_keys(&a), ["cat_rec:general"]);
    let b_out = e.step(&mut fb, at(148), kv_done(kv_read(&b_out).unwrap(), miss()));
    assert!(
        kv_keys(&b_out).is_empty(),
        "bob waits for ann's read: {b_out:?}"
    );
    assert_eq!(
        b_out.wake_at,
        Some(at(149)),
        "and looks for it in a millisecond"
    );
    let b_out = e.step(&mut fb, at(149), Input::Timer);
    assert_eq!(b_out.wake_at, Some(at(150)), "not there yet: looks again");
    assert!(b_out.commands.is_empty());
    // Ann's read ends: her answer, and the isolate keeps the value…
    let hit = KvRead::Value {
        value: Some(r#"{"items":[{"sku":"CAT-1"}]}"#.into()),
        metadata: Some(serde_json::json!({"written_at": NOW + 100})),
    };
    let r = reply(e.step(&mut fa, at(149), kv_done(category, hit)));
    assert_eq!(r.header("X-Fallback-Tier"), Some("category"));
    // …where Bob finds it when his timer fires.
    let r = reply(e.step(&mut fb, at(150), Input::Timer));
    assert_eq!(r.header("X-Fallback-Tier"), Some("category"));
    assert!(r.body.contains("CAT-1"));
}

#[test]
fn no_speculative_read_behind_a_tier_the_isolate_holds_a_value_of() {
    let b = bake(seed_policy());
    let mut e = Engine::new(&b).unwrap();
    warm(&mut e);
    // Eve's live answer is written through: the isolate holds her user-tier value.
    let (mut f, out) = begin_for(&mut e, 100, "eve");
    let r = reply(e.step(&mut f, at(110), fetched(fetch(&out), ok())));
    assert!(
        !r.writes.is_empty(),
        "the seed policy writes the user tier through"
    );
    // Then the model goes silent (and KV with it: no read completes, none is kept).
    let (mut f, _) = begin_for(&mut e, 200, "ann");
    let mut out = e.step(&mut f, at(245), Input::Timer);
    let mut t = 245;
    while out.reply().is_none() {
        t = out.wake_at.expect("a tier's timeout").since(at(0));
        out = e.step(&mut f, at(t), Input::Timer);
    }
    assert!(t <= 260, "inside the budget");
    // Eve's user tier will answer from memory: nothing to read ahead for her.
    let (_, out) = begin_for(&mut e, 300, "eve");
    assert_eq!(prefetched(&out), vec![]);
    assert_eq!(e.counters().kv_prefetched, 0);
}
