//! The bulkhead (`origin.max_in_flight`): most origin attempts an isolate has in flight.
//!
//! Why: a hung origin holds every call until its timeout, and a Worker invocation has six
//! connections. Without a cap, one outage ties up every request's connections in the
//! isolate; with one, a request that finds the cap reached goes straight to its cascade
//! (`BULKHEAD_FULL`) and answers at once. A hedge rides on its attempt's slot: the cap
//! counts attempts, each of which sends at most two requests.
//!
//! A slot is a [`Lease`]: given back when the attempt ends, or when its request is dropped
//! without ending it (a client that went away), so a lost request cannot leak a slot.

use std::cell::Cell;
use std::rc::Rc;

#[derive(Debug, Default)]
pub struct Bulkhead {
    in_flight: Rc<Cell<u32>>,
}

impl Bulkhead {
    /// A slot for an attempt, unless `cap` attempts are already in flight.
    pub fn lease(&self, cap: Option<u32>) -> Option<Lease> {
        if cap.is_some_and(|cap| self.in_flight.get() >= cap) {
            return None;
        }
        self.in_flight.set(self.in_flight.get().saturating_add(1));
        Some(Lease(Rc::clone(&self.in_flight)))
    }

    /// Attempts in flight.
    pub fn in_flight(&self) -> u32 {
        self.in_flight.get()
    }
}

/// One attempt's slot.
#[derive(Debug)]
pub struct Lease(Rc<Cell<u32>>);

impl Drop for Lease {
    fn drop(&mut self) {
        self.0.set(self.0.get().saturating_sub(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_capped_and_come_back_when_dropped() {
        let b = Bulkhead::default();
        let one = b.lease(Some(2)).expect("first");
        let two = b.lease(Some(2)).expect("second");
        assert!(b.lease(Some(2)).is_none(), "the cap is reached");
        assert_eq!(b.in_flight(), 2);
        drop(one);
        let three = b.lease(Some(2)).expect("a slot came back");
        drop((two, three));
        assert_eq!(b.in_flight(), 0);
        let many: Vec<_> = (0..50).filter_map(|_| b.lease(None)).collect();
        assert_eq!(many.len(), 50, "no cap: every attempt gets a slot");
    }
}
