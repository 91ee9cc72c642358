//! [E-STORM] The Workers Rate Limiting binding, as `simulate` models it: a fixed window of
//! `period` aligned to the clock (as Miniflare's local binding counts), `limit` requests per
//! key per window.

use std::collections::HashMap;

use understudy_core::Millis;

pub struct Limiter {
    limit: u32,
    period_ms: u64,
    counts: HashMap<String, (u64, u32)>,
}

impl Limiter {
    pub fn new(limit: u32, period_ms: u64) -> Limiter {
        Limiter {
            limit,
            period_ms: period_ms.max(1),
            counts: HashMap::new(),
        }
    }

    /// Counts one request for `key` at `now`; `true` while within the limit.
    pub fn allow(&mut self, key: &str, now: Millis) -> bool {
        let window = now.0 / self.period_ms;
        let e = self.counts.entry(key.to_string()).or_insert((window, 0));
        if e.0 != window {
            *e = (window, 0);
        }
        e.1 += 1;
        e.1 <= self.limit
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_gets_limit_requests_per_aligned_window() {
        let mut l = Limiter::new(3, 10_000);
        let t = |s: u64| Millis(s * 1000);
        assert!(l.allow("a", t(0)) && l.allow("a", t(1)) && l.allow("a", t(2)));
        assert!(!l.allow("a", t(3)));
        assert!(l.allow("b", t(3)), "keys are counted apart");
        assert!(l.allow("a", t(10)), "a new window");
    }
}
