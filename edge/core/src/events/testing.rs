//! Test fixtures for the events modules: seed 004's `[events]` numbers, a record, and an
//! in-memory shard that applies the outbox's decisions the way the Durable Object does —
//! so the ordering and retry rules run end to end in virtual time.

use std::collections::BTreeMap;

use super::envelope::Envelope;
use super::outbox::{self, Arrival, Head, Plan, Record, Settled, State};
use super::seal::SealKey;
use crate::classify::Observed;
use crate::policy::events::*;
use crate::policy::RetryOn;
use crate::time::Millis;

pub fn events_policy() -> Events {
    Events {
        route: "/v1/events".into(),
        tenant_claim: "tenant".into(),
        max_body_bytes: 64 * 1024,
        shards: 4,
        types: vec![
            EventType {
                name: "order.placed".into(),
                version: 2,
                required: vec!["orderId".into(), "total".into(), "currency".into()],
            },
            EventType {
                name: "order.placed".into(),
                version: 1,
                required: vec!["orderId".into(), "total".into()],
            },
        ],
        delivery: Delivery {
            url: "https://orders.internal.example/v1/events".into(),
            credential_secret: Some("EVENTS_CONSUMER_KEY".into()),
            credential_header: "Authorization".into(),
            attempt_timeout_ms: 10_000,
            concurrency: 4,
        },
        retry: RetrySchedule {
            attempts: 8,
            backoff_base_ms: 7_000,
            backoff_max_ms: 300_000,
            window_ms: 900_000,
            retry_on: RetryOn {
                timeout: true,
                connect: true,
                status_408: true,
                status_429: true,
                status_5xx: true,
            },
            honor_retry_after: true,
        },
        dead_letter: DeadLetter::Hold,
        encryption_key_secret: "EVENTS_KEY".into(),
        redact: vec!["card.number".into(), "email".into()],
        alerts: Alerts {
            oldest_pending_ms: 60_000,
            dead_letters: 0,
            gap_ms: 60_000,
        },
        replay: true,
        retention_ms: 7 * 86_400_000,
    }
}

pub fn envelope(id: &str, aggregate: &str, sequence: u64) -> Envelope {
    Envelope {
        event_id: id.into(),
        event_type: "order.placed".into(),
        schema_version: 2,
        aggregate_id: aggregate.into(),
        sequence,
        occurred_at: "2026-11-30T12:00:00Z".into(),
        correlation_id: format!("c-{id}"),
        payload: r#"{"orderId":"o","total":1,"currency":"EUR"}"#.into(),
    }
}

/// The key the tests' records are digested with.
pub fn test_key() -> SealKey {
    SealKey::from_secret("test-events-key").expect("a non-empty secret")
}

pub fn record(id: &str, aggregate: &str, sequence: u64) -> Record {
    Record::new(
        &envelope(id, aggregate, sequence),
        "acme",
        &test_key(),
        Millis(1_000),
    )
}

/// One shard's rows in memory, changed only through the outbox's decisions.
#[derive(Default)]
pub struct MemShard {
    pub rows: BTreeMap<String, Record>,
    pub cursors: BTreeMap<(String, String), u64>,
}

impl MemShard {
    pub fn ingest(&mut self, rec: Record) -> Arrival {
        let key = (rec.tenant.clone(), rec.aggregate.clone());
        let cursor = self.cursors.get(&key).copied().unwrap_or(0);
        let same_place = self.rows.values().find(|r| {
            r.tenant == rec.tenant && r.aggregate == rec.aggregate && r.sequence == rec.sequence
        });
        let a = outbox::arrival(&rec, self.rows.get(&rec.event_id), same_place, cursor);
        if a == Arrival::Store {
            self.cursors.entry(key).or_insert(0);
            self.rows.insert(rec.event_id.clone(), rec);
        }
        a
    }

    pub fn heads(&self) -> (Vec<Head>, Vec<Record>) {
        let mut heads = Vec::new();
        let mut loose = Vec::new();
        for ((t, a), &cursor) in &self.cursors {
            let mine = || {
                self.rows
                    .values()
                    .filter(move |r| &r.tenant == t && &r.aggregate == a)
            };
            loose.extend(
                mine()
                    .filter(|r| r.sequence <= cursor && r.state == State::Pending)
                    .cloned(),
            );
            if !mine().any(|r| r.sequence > cursor) {
                continue;
            }
            let next = mine().find(|r| r.sequence == cursor + 1).cloned();
            let waiting = if next.is_none() {
                mine()
                    .filter(|r| r.sequence > cursor)
                    .min_by_key(|r| r.sequence)
                    .map(|r| (r.sequence, r.stored_at))
            } else {
                None
            };
            heads.push(Head {
                tenant: t.clone(),
                aggregate: a.clone(),
                cursor,
                next,
                waiting,
            });
        }
        (heads, loose)
    }

    pub fn plan(&mut self, now: Millis, events: &Events, max: usize) -> Plan {
        let (heads, loose) = self.heads();
        let plan = outbox::select(now, &heads, &loose, events.dead_letter, max);
        for (t, a, to) in &plan.advance {
            self.cursors.insert((t.clone(), a.clone()), *to);
        }
        plan
    }

    pub fn lease(&mut self, now: Millis, id: &str, events: &Events) -> Record {
        let leased = outbox::lease(now, &self.rows[id], events.delivery.attempt_timeout_ms);
        self.rows.insert(id.to_string(), leased.clone());
        leased
    }

    pub fn settle(
        &mut self,
        now: Millis,
        id: &str,
        o: &Observed,
        events: &Events,
        unit: f64,
    ) -> Settled {
        let rec = self.rows[id].clone();
        let key = (rec.tenant.clone(), rec.aggregate.clone());
        let cursor = self.cursors.get(&key).copied().unwrap_or(0);
        let s = outbox::settle(now, &rec, o, events, cursor, unit);
        self.rows.insert(id.to_string(), s.record.clone());
        if let Some(to) = s.advance_to {
            self.cursors.insert(key, to);
        }
        s
    }

    pub fn state(&self, id: &str) -> State {
        self.rows[id].state
    }
}
