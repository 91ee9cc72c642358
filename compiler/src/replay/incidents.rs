//! The incidents the logs show: stretches of time in which the origin failed the edge — most
//! calls failing or cut, second by second — found once from the logged calls and shared by
//! every column, so each column's time to degrade and to recover is measured from the same
//! instants.
//!
//! An incident's onset is its first bad call. Its end is known only between two calls: the
//! last bad call seen (it ended then, still bad) and the first good call after it. A breaker
//! that stopped calling leaves a gap there (a hold-down), and the origin recovered somewhere
//! in it — the replay says so rather than pick an instant.

use serde::Serialize;

use super::observed::{CallWas, Timeline};

/// Calls are judged a second at a time: a second whose calls mostly failed is bad.
pub const BUCKET_MS: u64 = 1_000;

/// Fewer bad calls than this are no incident (a stray timeout on a quiet endpoint).
pub const MIN_BAD_CALLS: usize = 3;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Incident {
    /// The first bad call's start, ms after the first arrival.
    pub onset_ms: u64,
    /// When the last bad call seen ended: the origin was failing until then at least.
    pub last_bad_ms: u64,
    /// The first good call after it, if any: the origin had recovered by then.
    pub first_good_ms: Option<u64>,
    pub bad_calls: usize,
}

/// The incidents in the logged calls, in time order.
pub fn find(origin: &Timeline<CallWas>) -> Vec<Incident> {
    let calls: Vec<(u64, CallWas)> = origin.iter().copied().collect();
    let Some(last) = calls.last().map(|c| c.0) else {
        return Vec::new();
    };
    let buckets = (last / BUCKET_MS + 1) as usize;
    let mut n = vec![0usize; buckets];
    let mut bad = vec![0usize; buckets];
    for (t, c) in &calls {
        let b = (t / BUCKET_MS) as usize;
        n[b] += 1;
        bad[b] += usize::from(c.bad());
    }
    // Bad, good or unseen, second by second; an unseen second between two bad ones is bad.
    let state: Vec<Option<bool>> = (0..buckets)
        .map(|b| (n[b] > 0).then(|| bad[b] * 2 >= n[b] && bad[b] > 0))
        .collect();
    let mut out = Vec::new();
    let mut b = 0;
    while b < buckets {
        if state[b] != Some(true) {
            b += 1;
            continue;
        }
        // A run of bad seconds, through unseen ones, up to the next good one.
        let from = b;
        let mut to = b;
        let mut k = b + 1;
        while k < buckets && state[k] != Some(false) {
            if state[k] == Some(true) {
                to = k;
            }
            k += 1;
        }
        let (lo, hi) = (from as u64 * BUCKET_MS, (to as u64 + 1) * BUCKET_MS);
        let inside: Vec<&(u64, CallWas)> = calls
            .iter()
            .filter(|(t, c)| *t >= lo && *t < hi && c.bad())
            .collect();
        if inside.len() >= MIN_BAD_CALLS {
            let onset_ms = inside.first().map_or(lo, |c| c.0);
            let last_bad_ms = inside.iter().map(|(t, c)| t + took(c)).max().unwrap_or(hi);
            let first_good_ms = calls
                .iter()
                .find(|(t, c)| *t >= last_bad_ms && !c.bad())
                .map(|c| c.0);
            out.push(Incident {
                onset_ms,
                last_bad_ms,
                first_good_ms,
                bad_calls: inside.len(),
            });
        }
        b = to + 1;
    }
    out
}

fn took(c: &CallWas) -> u64 {
    match c {
        CallWas::Ok { ms } | CallWas::Failed { ms, .. } | CallWas::Late { took_ms: ms, .. } => *ms,
        CallWas::Censored { after_ms } => *after_ms,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timeline(calls: &[(u64, CallWas)]) -> Timeline<CallWas> {
        Timeline::new(calls.to_vec())
    }

    #[test]
    fn a_stretch_of_cut_calls_through_a_silent_hold_down_is_one_incident() {
        let ok = CallWas::Ok { ms: 25 };
        let cut = CallWas::Censored { after_ms: 45 };
        let mut calls = Vec::new();
        // Healthy for 2 s, every 100 ms; cut from 2 s to 2.5 s; silent (breaker open)
        // until 5 s; a cut probe at 5 s; silent; good again from 8 s.
        for t in (0..2_000).step_by(100) {
            calls.push((t, ok));
        }
        for t in (2_000..2_500).step_by(100) {
            calls.push((t, cut));
        }
        calls.push((5_000, cut));
        for t in (8_000..10_000).step_by(100) {
            calls.push((t, ok));
        }
        let found = find(&timeline(&calls));
        assert_eq!(
            found,
            [Incident {
                onset_ms: 2_000,
                last_bad_ms: 5_045,
                first_good_ms: Some(8_000),
                bad_calls: 6,
            }]
        );
    }

    #[test]
    fn a_stray_timeout_is_no_incident() {
        let calls = vec![
            (0, CallWas::Ok { ms: 25 }),
            (1_500, CallWas::Censored { after_ms: 45 }),
            (3_000, CallWas::Ok { ms: 25 }),
        ];
        assert!(find(&timeline(&calls)).is_empty());
    }
}
