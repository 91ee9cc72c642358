//! The isolate's capacity for origin calls ([`Capacity`], docs/adr/010, "The engine's
//! components"): the bulkhead's slots ([`super::bulkhead`]) and the hedging budget with the
//! origin's recent answer times ([`super::hedge`]).

use crate::policy::Hedge;
use crate::time::Millis;

use super::bulkhead::{Bulkhead, Lease};
use super::hedge::Hedger;

/// Origin attempts in flight in this isolate, and its hedging budget.
#[derive(Debug)]
pub(super) struct Capacity {
    /// Origin attempts in flight in this isolate ([`super::bulkhead`]).
    bulkhead: Bulkhead,
    /// The hedging budget and the origin's recent answer times ([`super::hedge`]).
    hedger: Hedger,
}

impl Capacity {
    /// For a policy that hedges with `hedge` (or does not).
    pub(super) fn new(hedge: Option<&Hedge>) -> Capacity {
        Capacity {
            bulkhead: Bulkhead::default(),
            hedger: Hedger::new(hedge),
        }
    }

    /// A slot for an attempt, unless `cap` attempts are already in flight.
    pub(super) fn lease(&self, cap: Option<u32>) -> Option<Lease> {
        self.bulkhead.lease(cap)
    }

    /// A slot for a timed-out attempt's requests the isolate still listens to: the origin
    /// still has them, whatever the cap.
    pub(super) fn listen_lease(&self) -> Option<Lease> {
        self.bulkhead.lease(None)
    }

    /// Origin attempts in flight.
    pub(super) fn in_flight(&self) -> u32 {
        self.bulkhead.in_flight()
    }

    /// When to hedge an attempt starting at `now` with `timeout_ms`, taking a token
    /// ([`Hedger::plan`]).
    pub(super) fn hedge_after(
        &mut self,
        hedge: Option<&Hedge>,
        now: Millis,
        timeout_ms: u64,
        repeatable: bool,
    ) -> Option<u64> {
        self.hedger.plan(hedge, now, timeout_ms, repeatable)
    }

    /// A token taken for an attempt that sent no hedge goes back.
    pub(super) fn refund(&mut self, hedge: Option<&Hedge>) {
        self.hedger.refund(hedge);
    }

    /// A successful origin answer took `latency_ms` from when its request went out: the
    /// hedge's delay follows it.
    pub(super) fn answered(&mut self, now: Millis, latency_ms: u64) {
        self.hedger.answered(now, latency_ms);
    }
}
