//! The outbox in virtual time: a shard in memory, a scripted consumer, and a clock that
//! jumps to the next wake-up — never a sleep.

use super::*;
use crate::events::testing::{events_policy, record, test_key, MemShard};

fn ok() -> Observed {
    Observed::Response {
        status: 200,
        retry_after: None,
        body: Vec::new(),
    }
}

fn status(code: u16) -> Observed {
    Observed::Response {
        status: code,
        retry_after: None,
        body: Vec::new(),
    }
}

/// Runs the shard until nothing is due or `until`; the consumer answers `(event, attempt)`.
/// Returns the deliveries in the order the consumer acknowledged them, with their times.
fn run(
    shard: &mut MemShard,
    events: &Events,
    start: Millis,
    until: Millis,
    mut consumer: impl FnMut(&Record) -> Observed,
) -> (Vec<(String, u64)>, Millis) {
    let mut now = start;
    let mut acked = Vec::new();
    let mut unit = 0.37;
    for _ in 0..10_000 {
        let plan = shard.plan(now, events, 4);
        if !plan.deliver.is_empty() {
            for id in &plan.deliver {
                let leased = shard.lease(now, id, events);
                let answer = consumer(&leased);
                let s = shard.settle(now.plus(5), id, &answer, events, unit);
                unit = (unit * 7.3 + 0.11) % 1.0;
                if s.verdict == Verdict::Delivered {
                    acked.push((id.clone(), now.0));
                }
            }
            now = now.plus(5);
            continue;
        }
        match plan.wake_at {
            Some(w) if w <= until => now = w.max(now),
            _ => break,
        }
    }
    (acked, now)
}

fn ids(acked: &[(String, u64)]) -> Vec<&str> {
    acked.iter().map(|(i, _)| i.as_str()).collect()
}

#[test]
fn out_of_order_arrivals_are_delivered_in_sequence_order() {
    let ev = events_policy();
    let mut s = MemShard::default();
    for (id, seq) in [("e3", 3), ("e1", 1), ("e2", 2)] {
        assert_eq!(s.ingest(record(id, "order-1", seq)), Arrival::Store);
    }
    let (acked, _) = run(&mut s, &ev, Millis(1_000), Millis(10_000_000), |_| ok());
    assert_eq!(ids(&acked), ["e1", "e2", "e3"]);
}

#[test]
fn a_missing_predecessor_holds_its_successors_and_is_reported() {
    let ev = events_policy();
    let mut s = MemShard::default();
    s.ingest(record("e1", "a", 1));
    s.ingest(record("e3", "a", 3));
    let (acked, now) = run(&mut s, &ev, Millis(1_000), Millis(10_000_000), |_| ok());
    assert_eq!(ids(&acked), ["e1"]);
    let plan = s.plan(now, &ev, 4);
    assert!(plan.deliver.is_empty());
    assert_eq!(
        plan.held,
        [Held::Gap {
            tenant: "acme".into(),
            aggregate: "a".into(),
            missing: 2,
            waiting: 3,
            since: 1_000
        }]
    );
    s.ingest(record("e2", "a", 2));
    let (acked, _) = run(&mut s, &ev, now, Millis(10_000_000), |_| ok());
    assert_eq!(ids(&acked), ["e2", "e3"]);
}

#[test]
fn duplicates_are_acknowledged_and_conflicts_refused() {
    let mut s = MemShard::default();
    assert_eq!(s.ingest(record("e1", "a", 1)), Arrival::Store);
    assert_eq!(s.ingest(record("e1", "a", 1)), Arrival::Duplicate);
    let mut other_tenant = record("e1", "a", 1);
    other_tenant.tenant = "globex".into();
    assert!(matches!(
        s.ingest(other_tenant),
        Arrival::Conflict("EVENT_ID_REUSED", _)
    ));
    assert!(matches!(
        s.ingest(record("e9", "a", 1)),
        Arrival::Conflict("SEQUENCE_TAKEN", _)
    ));
    assert_eq!(s.rows.len(), 1, "nothing was stored twice");
    // Once the aggregate moved past a sequence, a new event there is refused.
    let ev = events_policy();
    run(&mut s, &ev, Millis(1_000), Millis(10_000_000), |_| ok());
    s.rows.clear();
    assert!(matches!(
        s.ingest(record("e7", "a", 1)),
        Arrival::Conflict("SEQUENCE_PASSED", _)
    ));
}

/// A reused event ID with other contents was acknowledged "duplicate" and its payload
/// dropped; ADR 006 refuses it. A row stored before digests were kept matches any resend.
#[test]
fn an_event_id_reused_with_other_contents_is_refused_naming_what_differs() {
    let mut s = MemShard::default();
    assert_eq!(s.ingest(record("e1", "a", 1)), Arrival::Store);
    let mut env = crate::events::testing::envelope("e1", "a", 1);
    env.payload = r#"{"orderId":"o","total":2,"currency":"EUR"}"#.into();
    let other = Record::new(&env, "acme", &test_key(), Millis(2_000));
    match s.ingest(other) {
        Arrival::Conflict(EVENT_ID_REUSED, why) => assert!(why.contains("`payload`"), "{why}"),
        a => panic!("{a:?}"),
    }
    env = crate::events::testing::envelope("e1", "a", 1);
    env.occurred_at = "2026-11-30T12:00:01Z".into();
    match s.ingest(Record::new(&env, "acme", &test_key(), Millis(2_000))) {
        Arrival::Conflict(EVENT_ID_REUSED, why) => assert!(why.contains("`occurredAt`"), "{why}"),
        a => panic!("{a:?}"),
    }
    assert_eq!(
        s.rows["e1"].digest,
        record("e1", "a", 1).digest,
        "the first stays"
    );
    assert_eq!(conflict_field(EVENT_ID_REUSED), "eventId");
    assert_eq!(conflict_field("SEQUENCE_TAKEN"), "sequence");
    // Rows from before digests: the identity decides, as it did when they were stored.
    s.rows.get_mut("e1").unwrap().digest = None;
    let mut env = crate::events::testing::envelope("e1", "a", 1);
    env.payload = "{}".into();
    assert_eq!(
        s.ingest(Record::new(&env, "acme", &test_key(), Millis(3_000))),
        Arrival::Duplicate
    );
}

#[test]
fn claims_are_unique_across_tenants() {
    let c = Claim {
        event_id: "e1".into(),
        tenant: "acme".into(),
        aggregate: "a".into(),
        sequence: 1,
    };
    assert_eq!(claim(&c, None), Arrival::Store);
    assert_eq!(claim(&c, Some(&c)), Arrival::Duplicate);
    let other = Claim {
        tenant: "globex".into(),
        ..c.clone()
    };
    assert!(matches!(
        claim(&other, Some(&c)),
        Arrival::Conflict("EVENT_ID_REUSED", _)
    ));
}

#[test]
fn retryable_failures_are_retried_within_the_backoff_ceilings() {
    let ev = events_policy();
    for failure in [
        status(503),
        status(408),
        status(429),
        Observed::TimedOut,
        Observed::Connect("reset".into()),
    ] {
        let mut s = MemShard::default();
        s.ingest(record("e1", "a", 1));
        let mut times = Vec::new();
        let (acked, _) = run(&mut s, &ev, Millis(1_000), Millis(10_000_000), |r| {
            times.push(r.first_attempt_at.unwrap_or(0));
            if r.attempts < 3 {
                failure.clone()
            } else {
                ok()
            }
        });
        assert_eq!(ids(&acked), ["e1"], "{failure:?}");
        let r = &s.rows["e1"];
        assert_eq!((r.attempts, r.state), (3, State::Delivered));
        assert_eq!(r.last_error_class.as_deref(), Some("dependency"));
    }
}

#[test]
fn retry_after_is_honoured() {
    let ev = events_policy();
    let mut s = MemShard::default();
    s.ingest(record("e1", "a", 1));
    let mut attempts_at = Vec::new();
    let mut now_seen = Millis(1_000);
    run(&mut s, &ev, Millis(1_000), Millis(10_000_000), |r| {
        attempts_at.push(r.next_attempt_at);
        if r.attempts == 1 {
            Observed::Response {
                status: 429,
                retry_after: Some("42".into()),
                body: Vec::new(),
            }
        } else {
            ok()
        }
    });
    let r = &s.rows["e1"];
    assert_eq!(r.state, State::Delivered);
    now_seen = now_seen.plus(5);
    // The second attempt was leased no earlier than 42 s after the first settled.
    assert!(r.delivered_at.unwrap() >= now_seen.0 + 42_000, "{r:?}");
}

#[test]
fn permanent_failures_dead_letter_at_once_and_hold_the_aggregate() {
    let ev = events_policy();
    for (code, class) in [
        (400, "caller"),
        (422, "caller"),
        (401, "credential"),
        (403, "credential"),
    ] {
        let mut s = MemShard::default();
        s.ingest(record("e1", "a", 1));
        s.ingest(record("e2", "a", 2));
        s.ingest(record("x1", "b", 1));
        let (acked, now) = run(&mut s, &ev, Millis(1_000), Millis(10_000_000), |r| {
            if r.event_id == "e1" {
                status(code)
            } else {
                ok()
            }
        });
        assert_eq!(ids(&acked), ["x1"], "the other aggregate goes on ({code})");
        let e1 = &s.rows["e1"];
        assert_eq!((e1.state, e1.attempts), (State::DeadLetter, 1));
        assert_eq!(e1.last_error_class.as_deref(), Some(class));
        assert_eq!(e1.last_status, Some(code));
        assert_eq!(s.state("e2"), State::Pending, "held behind its dead letter");
        let plan = s.plan(now, &ev, 4);
        assert!(matches!(&plan.held[..], [Held::DeadLetter { event_id, .. }] if event_id == "e1"));
        assert_eq!(plan.wake_at, None, "nothing to wake for while held");
    }
}

#[test]
fn exhausted_events_dead_letter_after_the_eighth_attempt_inside_the_window() {
    let ev = events_policy();
    let mut s = MemShard::default();
    s.ingest(record("e1", "a", 1));
    let (acked, _) = run(&mut s, &ev, Millis(1_000), Millis(100_000_000), |_| {
        status(503)
    });
    assert!(acked.is_empty());
    let r = &s.rows["e1"];
    assert_eq!((r.state, r.attempts), (State::DeadLetter, 8));
    assert_eq!(
        r.last_error.as_deref(),
        Some("HTTP_5XX: consumer answered 503")
    );
    let first = r.first_attempt_at.unwrap();
    assert!(first == 1_000);
}

#[test]
fn replay_keeps_the_event_id_and_releases_the_aggregate_in_order() {
    let ev = events_policy();
    let mut s = MemShard::default();
    s.ingest(record("e1", "a", 1));
    s.ingest(record("e2", "a", 2));
    let mut broken = true;
    let (_, now) = run(&mut s, &ev, Millis(1_000), Millis(10_000_000), |_| {
        status(400)
    });
    assert_eq!(s.state("e1"), State::DeadLetter);
    let replayed = replay(now, &s.rows["e1"], &ev).unwrap();
    assert_eq!(
        (
            replayed.event_id.as_str(),
            replayed.attempts,
            replayed.replays
        ),
        ("e1", 0, 1)
    );
    s.rows.insert("e1".into(), replayed);
    let (acked, _) = run(&mut s, &ev, now, Millis(10_000_000), |_| {
        broken = false;
        ok()
    });
    assert!(!broken);
    assert_eq!(ids(&acked), ["e1", "e2"]);
    // Only dead letters replay, and only with the switch on.
    assert_eq!(
        replay(now, &s.rows["e1"], &ev).unwrap_err().code,
        "NOT_A_DEAD_LETTER"
    );
    let mut off = ev.clone();
    off.replay = false;
    let mut dead = s.rows["e1"].clone();
    dead.state = State::DeadLetter;
    let r = replay(now, &dead, &off).unwrap_err();
    assert_eq!((r.status, r.code), (403, "REPLAY_DISABLED"));
}

#[test]
fn skip_moves_a_held_aggregate_past_its_dead_letter_or_its_gap() {
    let ev = events_policy();
    let mut s = MemShard::default();
    s.ingest(record("e1", "a", 1));
    s.ingest(record("e2", "a", 2));
    let (_, now) = run(&mut s, &ev, Millis(1_000), Millis(10_000_000), |r| {
        if r.event_id == "e1" {
            status(400)
        } else {
            ok()
        }
    });
    let (heads, _) = s.heads();
    let (what, rec) = skip(&heads[0]).unwrap();
    assert_eq!(
        what,
        Skip::DeadLetter {
            event_id: "e1".into(),
            to: 1
        }
    );
    let rec = rec.unwrap();
    assert!(rec.skipped && rec.state == State::DeadLetter);
    s.rows.insert("e1".into(), rec);
    s.cursors.insert(("acme".into(), "a".into()), 1);
    let (acked, now) = run(&mut s, &ev, now, Millis(10_000_000), |_| ok());
    assert_eq!(ids(&acked), ["e2"]);
    assert_eq!(replay(now, &s.rows["e1"], &ev).unwrap_err().code, "SKIPPED");
    // A gap: 4 waits for 3.
    s.ingest(record("e4", "a", 4));
    let (heads, _) = s.heads();
    let (what, rec) = skip(&heads[0]).unwrap();
    assert_eq!((what, rec), (Skip::Gap { from: 3, to: 3 }, None));
    s.cursors.insert(("acme".into(), "a".into()), 3);
    let (acked, _) = run(&mut s, &ev, now, Millis(10_000_000), |_| ok());
    assert_eq!(ids(&acked), ["e4"]);
    let (heads, _) = s.heads();
    assert!(heads.is_empty());
}

#[test]
fn a_pending_head_is_not_skipped() {
    let mut s = MemShard::default();
    s.ingest(record("e1", "a", 1));
    let (heads, _) = s.heads();
    assert_eq!(skip(&heads[0]).unwrap_err().code, "NOT_HELD");
}

#[test]
fn continue_mode_moves_on_and_a_replay_arrives_out_of_order() {
    let mut ev = events_policy();
    ev.dead_letter = DeadLetter::Continue;
    let mut s = MemShard::default();
    s.ingest(record("e1", "a", 1));
    s.ingest(record("e2", "a", 2));
    let (acked, now) = run(&mut s, &ev, Millis(1_000), Millis(10_000_000), |r| {
        if r.event_id == "e1" {
            status(400)
        } else {
            ok()
        }
    });
    assert_eq!(ids(&acked), ["e2"]);
    let replayed = replay(now, &s.rows["e1"], &ev).unwrap();
    s.rows.insert("e1".into(), replayed);
    let (acked, _) = run(&mut s, &ev, now, Millis(10_000_000), |_| ok());
    assert_eq!(ids(&acked), ["e1"]);
}

#[test]
fn an_attempt_lost_with_the_runtime_is_made_again_after_its_lease() {
    let ev = events_policy();
    let mut s = MemShard::default();
    s.ingest(record("e1", "a", 1));
    let plan = s.plan(Millis(1_000), &ev, 4);
    assert_eq!(plan.deliver, ["e1"]);
    // Leased, then the runtime dies: no settle.
    s.lease(Millis(1_000), "e1", &ev);
    let again = s.plan(Millis(2_000), &ev, 4);
    assert!(again.deliver.is_empty());
    let lease_end = 1_000 + 2 * ev.delivery.attempt_timeout_ms + LEASE_MARGIN_MS;
    assert_eq!(again.wake_at, Some(Millis(lease_end)));
    let (acked, _) = run(&mut s, &ev, Millis(lease_end), Millis(10_000_000), |_| ok());
    assert_eq!(ids(&acked), ["e1"]);
    assert_eq!(s.rows["e1"].attempts, 2);
}

#[test]
fn at_most_max_events_are_chosen_and_the_rest_wake_at_once() {
    let ev = events_policy();
    let mut s = MemShard::default();
    for i in 0..10 {
        s.ingest(record(&format!("e{i}"), &format!("agg-{i}"), 1));
    }
    let plan = s.plan(Millis(1_000), &ev, 4);
    assert_eq!(plan.deliver.len(), 4);
    assert_eq!(plan.wake_at, Some(Millis(1_000)));
}

#[test]
fn a_states_word_is_how_it_is_stored_and_read_back() {
    // The word table and serde's `rename_all` both spell a state: they must agree, or a
    // row written through one would not read back through the other.
    for (word, s) in State::ALL {
        assert_eq!(serde_json::to_value(s).unwrap(), *word);
        assert_eq!(State::parse(word), Some(*s));
    }
}
