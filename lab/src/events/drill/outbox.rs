//! The drill's window on the edge: every event its outbox holds, its status endpoint, and
//! the wait for quiescence.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use serde_json::Value;
use understudy_core::policy::events::Events;
use understudy_core::policy::Policy;

use super::state;
use crate::events::client::Edge as Client;
use crate::events::produce::Address;

pub(super) struct Outbox<'a> {
    pub admin: &'a Client,
    pub addr: Address,
    pub policy: &'a Policy,
    pub events: &'a Events,
}

impl Outbox<'_> {
    /// An admin client for where the edge is now.
    pub fn client(&self) -> Client {
        let at = *self.addr.lock().unwrap_or_else(|p| p.into_inner());
        Client::from_addr(at, self.admin.token.clone())
    }

    /// Every event the edge holds, from every shard, page by page.
    pub async fn all_events(&self) -> Result<BTreeMap<String, Value>> {
        let mut out = BTreeMap::new();
        let c = self.client();
        for k in 0..self.events.shards {
            let mut offset = 0;
            loop {
                let a = c
                    .list(
                        &format!("shard={k}&offset={offset}&limit=5000"),
                        Duration::from_secs(30),
                    )
                    .await?;
                if a.status != 200 {
                    bail!("listing shard {k} answered {}: {}", a.status, a.text);
                }
                let rows = a.body["events"].as_array().cloned().unwrap_or_default();
                offset += rows.len();
                for r in rows {
                    if let Some(id) = r["event_id"].as_str() {
                        out.insert(id.to_string(), r.clone());
                    }
                }
                if a.body["more"] != Value::Bool(true) {
                    break;
                }
            }
        }
        Ok(out)
    }

    /// The status endpoint's answer, if the policy has one and it answers 200.
    pub async fn status(&self) -> Option<Value> {
        let path = self.policy.admin.as_ref()?.path.clone();
        let a = self
            .client()
            .call("GET", &path, None, None, Duration::from_secs(30))
            .await
            .ok()?;
        (a.status == 200).then_some(a.body)
    }

    /// Waits until every acknowledged event is delivered, a dead letter, or held behind
    /// one; returns the final listing (or the last one when `limit` passes).
    pub async fn quiesce(
        &self,
        acked: &BTreeSet<String>,
        limit: Duration,
    ) -> Result<(BTreeMap<String, Value>, bool)> {
        let start = Instant::now();
        loop {
            let all = match self.all_events().await {
                Ok(a) => a,
                Err(e) if start.elapsed() < limit => {
                    eprintln!("events drill: listing failed ({e}); retrying");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    continue;
                }
                Err(e) => return Err(e),
            };
            if settled(&all, acked) {
                return Ok((all, true));
            }
            if start.elapsed() > limit {
                return Ok((all, false));
            }
            tokio::time::sleep(Duration::from_millis(400)).await;
        }
    }
}

/// Every acknowledged event is delivered, dead, or pending behind its aggregate's dead
/// letter.
fn settled(all: &BTreeMap<String, Value>, acked: &BTreeSet<String>) -> bool {
    let mut blocked: BTreeMap<(String, String), u64> = BTreeMap::new();
    for v in all.values() {
        if state(v) == "DEAD_LETTER" && v["skipped"] != Value::Bool(true) {
            let key = (
                v["tenant"].as_str().unwrap_or("").to_string(),
                v["aggregate"].as_str().unwrap_or("").to_string(),
            );
            let seq = v["sequence"].as_u64().unwrap_or(0);
            let e = blocked.entry(key).or_insert(seq);
            *e = (*e).min(seq);
        }
    }
    acked.iter().all(|id| match all.get(id) {
        None => false,
        Some(v) => match state(v) {
            "DELIVERED" | "DEAD_LETTER" => true,
            _ => {
                let key = (
                    v["tenant"].as_str().unwrap_or("").to_string(),
                    v["aggregate"].as_str().unwrap_or("").to_string(),
                );
                blocked
                    .get(&key)
                    .is_some_and(|d| v["sequence"].as_u64().unwrap_or(0) > *d)
            }
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn row(state: &str, aggregate: &str, sequence: u64) -> Value {
        json!({"state": state, "tenant": "t", "aggregate": aggregate, "sequence": sequence, "skipped": false})
    }

    #[test]
    fn pending_events_count_as_settled_only_behind_a_dead_letter() {
        let acked: BTreeSet<String> = ["a1", "a2", "b1"].iter().map(|s| s.to_string()).collect();
        let mut all = BTreeMap::from([
            ("a1".to_string(), row("DEAD_LETTER", "a", 1)),
            ("a2".to_string(), row("PENDING", "a", 2)),
            ("b1".to_string(), row("DELIVERED", "b", 1)),
        ]);
        assert!(settled(&all, &acked));
        all.insert("a1".into(), row("DELIVERED", "a", 1));
        assert!(
            !settled(&all, &acked),
            "a2 is pending with nothing holding it"
        );
        all.remove("b1");
        all.insert("a2".into(), row("DELIVERED", "a", 2));
        assert!(
            !settled(&all, &acked),
            "an acked event missing from the edge is not settled"
        );
    }
}
