//! [F-SCOPE] The fleet's events in `simulate --isolates`, in time order.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use understudy_core::breaker::member::FleetReport;
use understudy_core::Millis;

use super::super::Sent;

pub enum Ev {
    /// A report reaches isolate k's coordinator (asked with request i's first call: i) —
    /// the global one standing in for its region's: true.
    Deliver(usize, String, Option<u64>, bool),
    /// Its answer (or failure) reaches isolate k (and then the request that asked it).
    Answer(usize, Result<String, String>, Option<u64>),
    /// A watch reaches isolate k's coordinator.
    Watch(usize, String),
    /// The coordinator answers isolate k's held watch `token` with the verdict as it
    /// stands (the watch's hold passed).
    WatchDue(usize, u64),
    /// A watch's answer (or failure) reaches isolate k.
    Pushed(usize, Result<String, String>),
    /// Isolate k wakes for its first report, as request i's answer asked (`fleet_wake`), at
    /// the instant it named.
    Wake(usize, u64, Millis),
    /// The struck coordinators restart empty.
    Reset,
    /// Every region sends its window to the global coordinator (once per interval).
    Tick,
    /// Region r's window reaches the global coordinator…
    Merge(usize, String),
    /// …and the global verdict reaches region r.
    Heed(usize, String),
}

/// The fleet's events in time order (ties in the order pushed).
#[derive(Default)]
pub struct Queue {
    q: BinaryHeap<Reverse<(u64, u64)>>,
    evs: HashMap<u64, Ev>,
    pub seq: u64,
}

impl Queue {
    pub fn push(&mut self, at_us: u64, e: Ev) {
        self.seq += 1;
        self.q.push(Reverse((at_us, self.seq)));
        self.evs.insert(self.seq, e);
    }

    pub fn next_at(&self) -> Option<u64> {
        self.q.peek().map(|Reverse((t, _))| *t)
    }

    pub fn pop(&mut self) -> Option<(u64, Ev)> {
        let Reverse((at, id)) = self.q.pop()?;
        Some((at, self.evs.remove(&id)?))
    }
}

/// Isolate `k`'s call sent again at `now`, from a failed one's callback (no request carries
/// it: its loss draw is seeded by the isolate).
pub fn sent_again(k: usize, now: Millis, call: FleetReport) -> (usize, Sent) {
    let request = k as u64 | 1 << 40;
    let ask = false;
    (
        k,
        Sent {
            request,
            at: now,
            call,
            ask,
        },
    )
}
