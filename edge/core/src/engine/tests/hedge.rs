//! Hedging in virtual time: the delay follows the origin's p95, within a token bucket, for
//! repeatable requests only; the engine sends the hedge when its timer fires, the first good
//! answer wins and the other request is aborted; won hedges do not push the delay later.

use super::*;
use serde_json::json;

/// Starts a request at `t`; returns its flight, its first fetch and the hedge's delay (the
/// request's first wake-up before the race's 45 ms end).
fn start_hedged<'p>(e: &mut Engine<'p>, t: u64, seed: u64) -> (Flight<'p>, IoId, Option<u64>) {
    let (f, out) = begin(e, t, seed);
    let io = fetch(&out);
    let wake = out.wake_at.expect("a timer").since(at(t));
    (f, io, (wake < 45).then_some(wake))
}

/// Fires the hedge's timer at `t`: the hedge's fetch.
fn send_hedge<'p>(e: &mut Engine<'p>, f: &mut Flight<'p>, t: u64) -> IoId {
    let out = e.step(f, at(t), Input::Timer);
    assert_eq!(out.wake_at, Some(at(t - 20 + 45)), "then the race's end");
    fetch(&out)
}

fn hedging(after_ms: Option<u64>, max_share: f64, burst: u32) -> crate::policy::Policy {
    let mut p = seed_policy();
    p.origin.hedge = Some(crate::policy::Hedge {
        after_ms,
        max_share,
        burst,
        min_calls: 5,
    });
    p
}

#[test]
fn hedges_follow_the_p95_within_a_token_bucket_and_only_for_repeatable_requests() {
    let mut p = hedging(None, 0.1, 2);
    let b = bake(p.clone());
    let mut e = Engine::new(&b).unwrap();
    warm(&mut e);
    // Until five calls were seen there is no p95 to hedge after.
    for i in 1..=5 {
        let (mut f, io, h) = start_hedged(&mut e, i * 100, i);
        assert_eq!(h, None, "call {i}");
        let _ = e.step(&mut f, at(i * 100 + 20), fetched(io, ok()));
    }
    // Then the hedge comes after the observed p95 (20 ms), while tokens last (a burst of 2).
    let (mut f1, first, h1) = start_hedged(&mut e, 1_000, 11);
    assert_eq!(h1, Some(20));
    let hedge = send_hedge(&mut e, &mut f1, 1_020);
    let out = e.step(&mut f1, at(1_030), fetched(hedge, ok()));
    assert!(
        out.commands.contains(&Command::Abort { io: first }),
        "the first request lost and is aborted: {out:?}"
    );
    let r = reply(out);
    assert_eq!(r.status, 200);
    // The log line says a hedge went out and won (docs/policy.md, `[origin.hedge]`).
    let notes = log(&r)["notes"].to_string();
    assert!(
        notes.contains("HEDGE_SENT") && notes.contains("HEDGE_WON"),
        "{notes}"
    );
    // Each call of the pair, as a replay reads them: the first abandoned when the hedge
    // answered (censored: slower than 30 ms), the hedge's answer.
    let calls = &log(&r)["calls"];
    assert_eq!(
        (&calls[0]["end"], &calls[0]["end_ms"], &calls[0]["hedge"]),
        (&json!("abandoned"), &json!(30), &json!(false))
    );
    assert_eq!(
        (&calls[1]["start_ms"], &calls[1]["end"], &calls[1]["hedge"]),
        (&json!(20), &json!("ok"), &json!(true))
    );
    // Answered before the hedge was due: no hedge goes out, the token is refunded.
    let (mut f2, io, h2) = start_hedged(&mut e, 1_100, 12);
    assert_eq!(h2, Some(20));
    let out = e.step(&mut f2, at(1_115), fetched(io, ok()));
    assert_eq!(out.wake_at, None, "no hedge timer left");
    let (mut f3, first, h3) = start_hedged(&mut e, 1_200, 13);
    assert_eq!(h3, Some(20), "the refunded token");
    let _hedge = send_hedge(&mut e, &mut f3, 1_220);
    let _ = e.step(&mut f3, at(1_225), fetched(first, ok()));
    let (mut f4, io, h4) = start_hedged(&mut e, 1_300, 14);
    assert_eq!(h4, None, "the bucket is empty");
    let _ = e.step(&mut f4, at(1_320), fetched(io, ok()));
    assert_eq!((e.counters().hedges_sent, e.counters().hedges_won), (2, 1));

    // A POST that is not idempotent, without the client's key, is never hedged.
    p.origin.method = crate::policy::Method::Post;
    p.origin.idempotent = false;
    p.origin.hedge.as_mut().unwrap().after_ms = Some(10);
    let b = bake(p);
    let mut e = Engine::new(&b).unwrap();
    let (_, _, h) = start_hedged(&mut e, 0, 1);
    assert_eq!(h, None);
}

#[test]
fn a_failure_before_the_hedge_is_due_is_the_answer_and_after_it_waits_for_the_hedge() {
    let b = bake(hedging(Some(10), 1.0, 10));
    let mut e = Engine::new(&b).unwrap();
    warm(&mut e);
    // A 503 before the hedge is due: the attempt's answer; no hedge goes out.
    let (mut f, io, h) = start_hedged(&mut e, 100, 2);
    assert_eq!(h, Some(10));
    let out = e.step(&mut f, at(105), fetched(io, status(503)));
    assert_eq!(
        out.wake_at,
        Some(at(113)),
        "the user tier's 8 ms read timeout"
    );
    let r = finish(&mut e, &mut f, 105, out, &status(503));
    assert_eq!(r.header("X-Degraded-Reason"), Some("ML_5XX"));
    assert_eq!(e.counters().hedges_sent, 0);
    // After the hedge went out, the first request's 503 waits for the hedge, whose good
    // answer is the request's.
    let (mut f, first, _) = start_hedged(&mut e, 200, 3);
    let out = e.step(&mut f, at(210), Input::Timer);
    let hedge = fetch(&out);
    let out = e.step(&mut f, at(212), fetched(first, status(503)));
    assert!(out.reply().is_none(), "waits for the hedge: {out:?}");
    assert_eq!(out.wake_at, Some(at(245)));
    let r = reply(e.step(&mut f, at(230), fetched(hedge, ok())));
    assert_eq!(r.header("X-Degraded"), Some("false"));
    assert_eq!(e.counters().hedges_won, 1);
}

#[test]
fn at_the_race_deadline_both_requests_are_aborted() {
    let b = bake(hedging(Some(10), 1.0, 10));
    let mut e = Engine::new(&b).unwrap();
    warm(&mut e);
    let (mut f, first, _) = start_hedged(&mut e, 100, 2);
    let hedge = fetch(&e.step(&mut f, at(110), Input::Timer));
    let out = e.step(&mut f, at(145), Input::Timer);
    for io in [first, hedge] {
        assert!(out.commands.contains(&Command::Abort { io }), "{out:?}");
    }
    // The cascade starts at once: the user tier's read.
    assert!(kv_read(&out).is_some(), "{out:?}");
    // A late answer of an aborted request changes nothing.
    let late = e.step(&mut f, at(146), fetched(first, ok()));
    assert!(late.reply().is_none());
}

#[test]
fn a_timer_late_past_the_race_deadline_cuts_the_attempt_and_sends_no_hedge() {
    // A stalled isolate: the hedge's and the attempt's timers expire together. The
    // attempt's is handled first — it is cut (listened to: the isolate was busy) — and its
    // hedge never goes out (its token goes back).
    let b = bake(hedging(Some(10), 1.0, 1));
    let mut e = Engine::new(&b).unwrap();
    warm(&mut e);
    let (mut f, first, h) = start_hedged(&mut e, 100, 2);
    assert_eq!(h, Some(10));
    let out = e.step(&mut f, at(150), Input::Timer);
    assert!(
        out.commands
            .iter()
            .any(|c| matches!(c, Command::Hear { io, .. } if *io == first)),
        "{out:?}"
    );
    assert!(fetches(&out).is_empty(), "no hedge went out: {out:?}");
    assert!(
        kv_read(&out).is_some(),
        "the cascade starts at once: {out:?}"
    );
    assert_eq!(e.counters().hedges_sent, 0);
    let (_, _, h) = start_hedged(&mut e, 300, 3);
    assert_eq!(h, Some(10), "the token came back");
}

#[test]
fn won_hedges_do_not_push_the_hedges_delay_later() {
    // A long-tail model: calls answer in 15 ms, a few never. Each hedge goes out at the p95
    // (15 ms) and its answer takes 15 ms more: 30 ms from the first request's start. Those
    // wins must not raise the p95 the next hedge waits for.
    let b = bake(hedging(None, 1.0, 100));
    let mut e = Engine::new(&b).unwrap();
    warm(&mut e);
    let mut t = 1_000;
    for _ in 0..5 {
        let (mut f, io, _) = start_hedged(&mut e, t, t);
        let _ = e.step(&mut f, at(t + 15), fetched(io, ok()));
        t += 100;
    }
    for i in 0..40 {
        let (mut f, _first, h) = start_hedged(&mut e, t, t);
        assert_eq!(h, Some(15), "hedge {i} after the origin's own p95");
        let out = e.step(&mut f, at(t + 15), Input::Timer);
        let hedge = fetch(&out);
        let _ = e.step(&mut f, at(t + 30), fetched(hedge, ok()));
        t += 100;
    }
    assert_eq!(e.counters().hedges_won, 40);
}
