//! The drill's producers: events generated per aggregate (sequences from 1), sent by
//! concurrent producers as a real frontend would — some before their predecessor, some
//! twice — each retried with the same `eventId` until the edge acknowledges it (a `503`, a
//! reset or a killed runtime means "not stored": try again).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;

use super::client::Edge;
use crate::drill::epoch_ms;

/// One event to send.
#[derive(Debug, Clone)]
pub struct Planned {
    pub event_id: String,
    pub tenant: String,
    pub aggregate: String,
    pub sequence: u64,
    pub body: Vec<u8>,
}

/// Markers every payload carries: the redacted fields hold `REDACTED_MARK`, the others
/// `PLAIN_MARK` — neither may appear in the runtime's logs or in its storage.
pub const REDACTED_MARK: &str = "drill-secret-";
pub const PLAIN_MARK: &str = "drill-order-";

/// Deterministic draws for the send order.
struct Draw(u64);

impl Draw {
    fn unit(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// `count` events over the shape's aggregates and tenants, in send order; also how many
/// were swapped before their predecessor and how many are sent twice.
pub fn plan(
    phase: &str,
    run: &str,
    count: u64,
    shape: &super::scenario::Shape,
    seed: u64,
) -> (Vec<Planned>, usize, usize) {
    let (aggregates, tenants) = (shape.aggregates.max(1), shape.tenants.max(1));
    let (out_of_order, duplicates) = (shape.out_of_order, shape.duplicates);
    let mut per: BTreeMap<u64, Vec<Planned>> = BTreeMap::new();
    for i in 0..count {
        let a = i % aggregates;
        let list = per.entry(a).or_default();
        let sequence = list.len() as u64 + 1;
        let tenant = format!("tenant-{}", a % tenants);
        let aggregate = format!("{phase}-agg-{a}");
        let event_id = format!("{phase}-{i}");
        let body = json!({
            "eventId": event_id, "type": "order.placed", "schemaVersion": if i % 5 == 0 { 1 } else { 2 },
            "aggregateId": aggregate, "sequence": sequence,
            "occurredAt": "2026-11-30T12:00:00Z", "correlationId": format!("{run}-{event_id}"),
            "payload": {
                "orderId": format!("{PLAIN_MARK}{i}"), "total": i as f64 / 10.0, "currency": "EUR",
                "customer": {"email": format!("{REDACTED_MARK}{i}@example.com")},
                "payment": {"card_number": format!("{REDACTED_MARK}card-{i}")}
            }
        })
        .to_string()
        .into_bytes();
        list.push(Planned {
            event_id,
            tenant,
            aggregate,
            sequence,
            body,
        });
    }
    let mut draw = Draw(seed | 1);
    let mut swapped = 0;
    for list in per.values_mut() {
        let mut i = 0;
        while i + 1 < list.len() {
            if draw.unit() < out_of_order {
                list.swap(i, i + 1);
                swapped += 1;
                i += 2;
            } else {
                i += 1;
            }
        }
    }
    // Round-robin across aggregates, so each aggregate's events spread over the run.
    let mut queues: Vec<std::collections::VecDeque<Planned>> =
        per.into_values().map(Into::into).collect();
    let mut out = Vec::with_capacity(count as usize);
    loop {
        let mut any = false;
        for q in &mut queues {
            if let Some(e) = q.pop_front() {
                out.push(e);
                any = true;
            }
        }
        if !any {
            break;
        }
    }
    let mut again = Vec::new();
    for e in &out {
        if draw.unit() < duplicates {
            again.push(e.clone());
        }
    }
    let dups = again.len();
    out.extend(again);
    (out, swapped, dups)
}

/// What producing saw.
#[derive(Debug, Default, Clone)]
pub struct Produced {
    /// Acknowledged event IDs with the time (epoch ms) of their first acknowledgement.
    pub acked: BTreeMap<String, u64>,
    /// `202 … "duplicate"` answers.
    pub duplicate_acks: u64,
    /// `503`s, resets and connection failures retried.
    pub retried: u64,
    /// Answers the drill did not expect (4xx other than duplicates), first ones kept.
    pub refused: Vec<String>,
    pub refused_count: u64,
    /// Events given up on (never acknowledged within the limit).
    pub abandoned: Vec<String>,
}

/// Where the edge is now (it moves when the runtime is restarted).
pub type Address = Arc<Mutex<SocketAddr>>;

/// Sends every event with `producers` concurrent producers; `on_ack` is told the running
/// acknowledged count after each new acknowledgement.
pub async fn produce(
    events: Vec<Planned>,
    addr: Address,
    tokens: BTreeMap<String, String>,
    producers: usize,
    route: String,
    give_up_after: Duration,
    on_ack: Arc<dyn Fn(usize) + Send + Sync>,
) -> Produced {
    let events = Arc::new(events);
    let next = Arc::new(AtomicUsize::new(0));
    let out = Arc::new(Mutex::new(Produced::default()));
    let tokens = Arc::new(tokens);
    let mut tasks = Vec::new();
    for _ in 0..producers.max(1) {
        let (events, next, out, tokens, addr, route, on_ack) = (
            Arc::clone(&events),
            Arc::clone(&next),
            Arc::clone(&out),
            Arc::clone(&tokens),
            Arc::clone(&addr),
            route.clone(),
            Arc::clone(&on_ack),
        );
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(e) = events.get(i) else { break };
                let auth = format!(
                    "Bearer {}",
                    tokens.get(&e.tenant).cloned().unwrap_or_default()
                );
                let started = Instant::now();
                let mut pause = Duration::from_millis(20);
                loop {
                    let at = *addr.lock().unwrap_or_else(|p| p.into_inner());
                    let edge = Edge::from_addr(at, None);
                    let r = edge
                        .call(
                            "POST",
                            &route,
                            Some(&auth),
                            Some(e.body.clone()),
                            Duration::from_secs(15),
                        )
                        .await;
                    // The guard lives in this block only: never across an await.
                    let (done, acked_now) = {
                        let mut o = out.lock().unwrap_or_else(|p| p.into_inner());
                        match r {
                            Ok(a) if a.status == 202 => {
                                if a.body["status"] == "duplicate" {
                                    o.duplicate_acks += 1;
                                }
                                if o.acked.contains_key(&e.event_id) {
                                    (true, None)
                                } else {
                                    o.acked.insert(e.event_id.clone(), epoch_ms());
                                    (true, Some(o.acked.len()))
                                }
                            }
                            Ok(a) if a.status < 500 => {
                                o.refused_count += 1;
                                if o.refused.len() < 10 {
                                    o.refused
                                        .push(format!("{}: {} {}", e.event_id, a.status, a.text));
                                }
                                (true, None)
                            }
                            _ => {
                                o.retried += 1;
                                if started.elapsed() > give_up_after {
                                    o.abandoned.push(e.event_id.clone());
                                    (true, None)
                                } else {
                                    (false, None)
                                }
                            }
                        }
                    };
                    if let Some(n) = acked_now {
                        on_ack(n);
                    }
                    if done {
                        break;
                    }
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_millis(500));
                }
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    let o = out.lock().unwrap_or_else(|p| p.into_inner());
    o.clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_number_each_aggregate_from_one_and_shuffle_and_repeat_some() {
        let shape: crate::events::scenario::Shape = toml::from_str(
            "count = 300\nhealthy = 0\naggregates = 10\ntenants = 3\nout_of_order = 0.2\nduplicates = 0.1",
        )
        .unwrap();
        let (events, swapped, dups) = plan("f", "r", 300, &shape, 42);
        assert_eq!(events.len(), 300 + dups);
        assert!(swapped > 0 && dups > 0);
        let mut seqs: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
        for e in events.iter().take(300) {
            seqs.entry(&e.aggregate).or_default().push(e.sequence);
        }
        for (_, mut s) in seqs {
            assert_eq!(s.len(), 30);
            s.sort_unstable();
            assert_eq!(s, (1..=30).collect::<Vec<_>>());
        }
        let body = String::from_utf8(events[0].body.clone()).unwrap();
        assert!(body.contains(REDACTED_MARK) && body.contains(PLAIN_MARK));
    }
}
