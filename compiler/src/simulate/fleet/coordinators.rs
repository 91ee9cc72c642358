//! The coordinators' side of a fleet run: each region's coordinator with the watches it holds
//! and its stored snapshot, and the verdict's moves broadcast to the watches.

use std::collections::HashMap;

use understudy_core::breaker::fleet::{settings_hash, Coordinator, FleetMode, Snapshot, Verdict};
use understudy_core::policy::{Breaker, Policy, RateBreaker, Scope};
use understudy_core::Millis;

use super::capacity::Server;
use super::queue::{Ev, Queue};

/// The watches a coordinator holds: the watch's token → its isolate.
pub type Held = HashMap<u64, usize>;

/// One region's coordinator: its state (none while it is down after a reset), its server,
/// the watches it holds, and the windows it sent the global one.
pub struct Region {
    pub coordinator: Option<Coordinator>,
    pub server: Server,
    pub held: Held,
    pub sent: u64,
    /// The snapshot in its storage (written at most once a second, `Snapshot`).
    pub stored: Option<Snapshot>,
}

/// When any region's verdict opened or closed (ms since the start, mode).
pub struct Moves {
    pub start: Millis,
    pub delay_us: u64,
    pub moves: Vec<(u64, FleetMode)>,
}

impl Moves {
    /// Answers every watch `region` holds with `v` (its JSON `text`) when its fleet just
    /// opened or closed.
    pub fn broadcast(&mut self, region: &mut Region, q: &mut Queue, at_us: u64, v: &Verdict) {
        let Some(c) = region.coordinator.as_mut() else {
            return;
        };
        if c.moved() {
            self.moves
                .push((Millis(at_us / 1000).since(self.start), v.mode));
            let text = json(v);
            for (_, k) in region.held.drain() {
                q.push(at_us + self.delay_us, Ev::Pushed(k, Ok(text.clone())));
            }
        }
    }
}

pub fn json(v: &Verdict) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// What a coordinator with nothing heard yet is made of (at the start, and after a reset).
pub struct Fresh {
    service: String,
    settings: String,
    cfg: RateBreaker,
    pub interval_ms: u64,
}

impl Fresh {
    /// None when `policy`'s breaker is not fleet-scoped.
    pub fn of(policy: &Policy, policy_hash: &str) -> Option<Fresh> {
        let Breaker::Rate(r) = &policy.breaker else {
            return None;
        };
        let Scope::Fleet(f) = &r.scope else {
            return None;
        };
        Some(Fresh {
            service: policy.service.name.clone(),
            settings: settings_hash(r, policy_hash),
            cfg: r.clone(),
            interval_ms: f.report_interval_ms.max(1),
        })
    }

    pub fn coordinator(&self) -> Coordinator {
        Coordinator::new(
            &self.service,
            &self.settings,
            self.cfg.clone(),
            self.interval_ms,
        )
    }
}
