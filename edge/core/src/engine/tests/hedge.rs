//! Hedging in virtual time: the delay follows the origin's p95, within a token bucket, for
//! repeatable requests only, and won hedges do not push it later.

use super::*;

/// Starts a request; returns its flight and the hedge delay of its origin race.
fn fetch<'p>(e: &mut Engine<'p>, t: u64, seed: u64) -> (Flight<'p>, Option<u64>) {
    let (f, a) = begin(e, t, seed);
    match a {
        Action::FetchOrigin { hedge_after_ms, .. } => (f, hedge_after_ms),
        other => panic!("{other:?}"),
    }
}

#[test]
fn hedges_follow_the_p95_within_a_token_bucket_and_only_for_repeatable_requests() {
    let mut p = seed_policy();
    p.origin.hedge = Some(crate::policy::Hedge {
        after_ms: None,
        max_share: 0.1,
        burst: 2,
        min_calls: 5,
    });
    let b = bake(p.clone());
    let mut e = Engine::new(&b).unwrap();
    warm(&mut e);
    // Until five calls were seen there is no p95 to hedge after.
    for i in 1..=5 {
        let (mut f, h) = fetch(&mut e, i * 100, i);
        assert_eq!(h, None, "call {i}");
        let _ = e.step(&mut f, at(i * 100 + 20), Event::Origin(ok()));
    }
    // Then the hedge comes after the observed p95 (20 ms), while tokens last (a burst of 2).
    let (mut f1, h1) = fetch(&mut e, 1_000, 11);
    assert_eq!(h1, Some(20));
    let _ = e.step(
        &mut f1,
        at(1_020),
        Event::OriginHedged {
            observed: ok(),
            sent: true,
            won: true,
        },
    );
    let (mut f2, h2) = fetch(&mut e, 1_100, 12);
    assert_eq!(h2, Some(20));
    // Not sent (the first answer came in time): the token is refunded.
    let _ = e.step(
        &mut f2,
        at(1_115),
        Event::OriginHedged {
            observed: ok(),
            sent: false,
            won: false,
        },
    );
    let (mut f3, h3) = fetch(&mut e, 1_200, 13);
    assert_eq!(h3, Some(20), "the refunded token");
    let _ = e.step(
        &mut f3,
        at(1_220),
        Event::OriginHedged {
            observed: ok(),
            sent: true,
            won: false,
        },
    );
    let (mut f4, h4) = fetch(&mut e, 1_300, 14);
    assert_eq!(h4, None, "the bucket is empty");
    let _ = e.step(&mut f4, at(1_320), Event::Origin(ok()));
    assert_eq!((e.counters().hedges_sent, e.counters().hedges_won), (2, 1));

    // A POST that is not idempotent, without the client's key, is never hedged.
    p.origin.method = crate::policy::Method::Post;
    p.origin.idempotent = false;
    p.origin.hedge.as_mut().unwrap().after_ms = Some(10);
    let b = bake(p);
    let mut e = Engine::new(&b).unwrap();
    let (_, h) = fetch(&mut e, 0, 1);
    assert_eq!(h, None);
}

#[test]
fn won_hedges_do_not_push_the_hedges_delay_later() {
    // A long-tail model: calls answer in 15 ms, a few never. Each hedge goes out at the p95
    // (15 ms) and its answer takes 15 ms more: 30 ms from the first request's start. Those
    // wins must not raise the p95 the next hedge waits for.
    let mut p = seed_policy();
    p.origin.hedge = Some(crate::policy::Hedge {
        after_ms: None,
        max_share: 1.0,
        burst: 100,
        min_calls: 5,
    });
    let b = bake(p);
    let mut e = Engine::new(&b).unwrap();
    warm(&mut e);
    let mut t = 1_000;
    for _ in 0..5 {
        let (mut f, _) = fetch(&mut e, t, t);
        let _ = e.step(&mut f, at(t + 15), Event::Origin(ok()));
        t += 100;
    }
    for i in 0..40 {
        let (mut f, h) = fetch(&mut e, t, t);
        assert_eq!(h, Some(15), "hedge {i} after the origin's own p95");
        let won = Event::OriginHedged {
            observed: ok(),
            sent: true,
            won: true,
        };
        let _ = e.step(&mut f, at(t + 30), won);
        t += 100;
    }
    assert_eq!(e.counters().hedges_won, 40);
}
