//! [F-SCOPE] A coordinator's capacity in `simulate --isolates` (ADR 011, "Capacity"): one
//! Durable Object is a single thread, so each coordinator is a single server with a service
//! time per request and a FIFO queue, refused past its bound as the platform refuses an
//! overloaded object.

use serde::Serialize;

/// The fleet's first heartbeat, in s: its first reports are spread over it.
const HEARTBEAT_S: u64 = 10;

/// A coordinator as a server: what it can do, and what it did.
#[derive(Debug, Clone)]
pub struct Server {
    pub name: String,
    capacity_rps: u64,
    service_us: u64,
    /// Most requests waiting before an arrival is refused.
    queue: u64,
    busy_until_us: u64,
    /// Arrivals (served or refused) per second since the start.
    per_second: Vec<u32>,
    waits_us: Vec<u32>,
    refused: u64,
    start_us: u64,
}

impl Server {
    pub fn new(name: &str, capacity_rps: u64, queue: u64, start_us: u64) -> Server {
        Server {
            name: name.to_string(),
            capacity_rps: capacity_rps.max(1),
            service_us: (1_000_000 / capacity_rps.max(1)).max(1),
            queue,
            busy_until_us: 0,
            per_second: Vec::new(),
            waits_us: Vec::new(),
            refused: 0,
            start_us,
        }
    }

    /// A request arrives at `at_us`: when it has been served (it waits for the ones before
    /// it), or `None` when the queue is full and it is refused at once.
    pub fn admit(&mut self, at_us: u64) -> Option<u64> {
        let s = (at_us.saturating_sub(self.start_us) / 1_000_000) as usize;
        if self.per_second.len() <= s {
            self.per_second.resize(s + 1, 0);
        }
        self.per_second[s] += 1;
        let wait = self.busy_until_us.saturating_sub(at_us);
        if wait > self.queue * self.service_us {
            self.refused += 1;
            return None;
        }
        self.waits_us.push(wait.min(u64::from(u32::MAX)) as u32);
        self.busy_until_us = at_us.max(self.busy_until_us) + self.service_us;
        Some(self.busy_until_us)
    }

    /// Requests that reached it, served or refused.
    pub fn admitted(&self) -> u64 {
        self.per_second.iter().map(|&n| u64::from(n)).sum()
    }

    /// What it did over a run of `run_s` seconds whose fault spans `fault_s` (seconds
    /// after the start, end excluded).
    pub fn load(&self, run_s: f64, fault_s: (u64, u64)) -> Load {
        let requests: u64 = self.per_second.iter().map(|n| u64::from(*n)).sum();
        let mean = |from: u64, to: u64| {
            let (from, to) = (from as usize, (to as usize).max(from as usize));
            let n: u64 = (from..to)
                .map(|s| u64::from(self.per_second.get(s).copied().unwrap_or(0)))
                .sum();
            n as f64 / (to - from).max(1) as f64
        };
        let (busiest_at, busiest) = self
            .per_second
            .iter()
            .enumerate()
            .max_by_key(|(s, n)| (**n, std::cmp::Reverse(*s)))
            .map_or((0, 0), |(s, n)| (s as u64, u64::from(*n)));
        let mut waits = self.waits_us.clone();
        waits.sort_unstable();
        let p99 = waits
            .get(((waits.len() as f64 * 0.99).ceil() as usize).saturating_sub(1))
            .map_or(0.0, |w| f64::from(*w) / 1000.0);
        Load {
            coordinator: self.name.clone(),
            capacity_rps: self.capacity_rps,
            requests,
            mean_rps: requests as f64 / run_s.max(1.0),
            // Healthy: after the first heartbeat (the fleet's first reports) until the fault.
            healthy_rps: mean(
                if fault_s.0 > HEARTBEAT_S {
                    HEARTBEAT_S
                } else {
                    0
                },
                fault_s.0,
            ),
            incident_rps: mean(fault_s.0, fault_s.1),
            busiest_second_rps: busiest,
            busiest_second_at_s: busiest_at,
            queue_wait_p99_ms: p99,
            refused: self.refused,
        }
    }
}

/// One coordinator's load over a run (`simulate`'s JSON, per coordinator).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Load {
    pub coordinator: String,
    pub capacity_rps: u64,
    pub requests: u64,
    pub mean_rps: f64,
    /// Mean requests a second while healthy (from the fleet's first heartbeat to the
    /// fault) and during the fault.
    pub healthy_rps: f64,
    pub incident_rps: f64,
    pub busiest_second_rps: u64,
    /// The busiest second, in s after the start.
    pub busiest_second_at_s: u64,
    pub queue_wait_p99_ms: f64,
    pub refused: u64,
}

impl Load {
    /// Why this load breaks the run, if it does: a second over the capacity, or a refusal.
    pub fn over(&self) -> Option<String> {
        if self.busiest_second_rps > self.capacity_rps || self.refused > 0 {
            return Some(format!(
                "coordinator {}: busiest second {} requests (at {} s) against a capacity of {} a second, {} refused",
                self.coordinator,
                self.busiest_second_rps,
                self.busiest_second_at_s,
                self.capacity_rps,
                self.refused
            ));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_queues_then_refuses_and_counts_its_busiest_second() {
        // 1,000 a second: 1 ms each; two requests may wait.
        let mut s = Server::new("r", 1_000, 2, 0);
        assert_eq!(s.admit(0), Some(1_000));
        assert_eq!(s.admit(0), Some(2_000), "waits 1 ms");
        assert_eq!(s.admit(0), Some(3_000), "waits 2 ms");
        assert_eq!(s.admit(0), None, "three would wait: refused");
        assert_eq!(s.admit(5_000), Some(6_000), "idle again");
        assert_eq!(s.admit(1_500_000), Some(1_501_000));
        let l = s.load(2.0, (1, 2));
        assert_eq!((l.requests, l.busiest_second_rps, l.refused), (6, 5, 1));
        assert_eq!(l.queue_wait_p99_ms, 2.0);
        assert_eq!(l.mean_rps, 3.0);
        assert_eq!((l.healthy_rps, l.incident_rps), (5.0, 1.0));
        assert!(l.over().is_some_and(|w| w.contains("1 refused")));
        let calm = Server::new("g", 1_000, 2, 0).load(1.0, (0, 1));
        assert_eq!(calm.over(), None);
    }
}
