//! [E-CASCADE] A fallback answer is only worth serving while it is fresh enough: an entry
//! older than its tier's ceiling, or stamped in the future, is a miss with a reason.
//!
//! Why a future timestamp is a miss: it means the writer's clock or code is wrong, and an
//! entry we cannot date we cannot promise is fresh. A little skew is tolerated
//! ([`FUTURE_SKEW_MS`]): inside a Worker `Date.now()` only advances across I/O, so the reading
//! isolate's clock can lag a writer's by up to one request's duration (the budget, tens of
//! ms), and Cloudflare's hosts are NTP-synchronised to well under a second. Two seconds covers
//! both with room; a timestamp minutes or hours ahead is still refused.

use crate::time::Millis;

/// How far in the future a write time may be before the entry is refused.
pub const FUTURE_SKEW_MS: u64 = 2_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StaleMiss {
    TooOld { age_ms: u64, ceiling_ms: u64 },
    InFuture { ahead_ms: u64 },
}

impl StaleMiss {
    pub fn code(self) -> &'static str {
        match self {
            StaleMiss::TooOld { .. } => "KV_STALE",
            StaleMiss::InFuture { .. } => "KV_FUTURE_TIMESTAMP",
        }
    }

    pub fn detail(self) -> String {
        match self {
            StaleMiss::TooOld { age_ms, ceiling_ms } => {
                format!("written {age_ms} ms ago, older than the {ceiling_ms} ms ceiling")
            }
            StaleMiss::InFuture { ahead_ms } => {
                format!("written_at is {ahead_ms} ms in the future (tolerance {FUTURE_SKEW_MS} ms)")
            }
        }
    }
}

/// The entry's age in ms when it may be served (0 for a write within the skew ahead of
/// `now`), or why not. An entry exactly at the ceiling is still fresh.
pub fn judge(written_at: Millis, now: Millis, ceiling_ms: u64) -> Result<u64, StaleMiss> {
    if written_at > now {
        let ahead_ms = written_at.since(now);
        return if ahead_ms > FUTURE_SKEW_MS {
            Err(StaleMiss::InFuture { ahead_ms })
        } else {
            Ok(0)
        };
    }
    let age_ms = now.since(written_at);
    if age_ms > ceiling_ms {
        Err(StaleMiss::TooOld { age_ms, ceiling_ms })
    } else {
        Ok(age_ms)
    }
}

/// How long an answer whose evidence dates from `evidence_at` may still be served under a
/// `ceiling_ms` staleness ceiling, as of `now` (0 once past it). For the baked stubs the
/// evidence is `Catalog::evidence_at_ms`, for a published KV entry the earlier of its
/// `snapshot_at` and `validated_at`: what the status endpoint and the metrics report, and
/// what the alert rule of docs/observability.md ("Curated data running out") watches.
pub fn time_left(evidence_at: Millis, now: Millis, ceiling_ms: u64) -> u64 {
    evidence_at
        .0
        .saturating_add(ceiling_ms)
        .saturating_sub(now.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: u64 = 60_000;
    const HOUR: u64 = 60 * MIN;
    const NOW: Millis = Millis(1_795_996_800_000);

    fn ago(ms: u64) -> Millis {
        Millis(NOW.0 - ms)
    }

    #[test]
    fn four_hour_ceiling() {
        assert_eq!(
            judge(ago(3 * HOUR + 59 * MIN), NOW, 4 * HOUR),
            Ok(3 * HOUR + 59 * MIN)
        );
        assert_eq!(judge(ago(4 * HOUR), NOW, 4 * HOUR), Ok(4 * HOUR));
        let miss = judge(ago(4 * HOUR + MIN), NOW, 4 * HOUR).unwrap_err();
        assert_eq!(
            miss,
            StaleMiss::TooOld {
                age_ms: 4 * HOUR + MIN,
                ceiling_ms: 4 * HOUR
            }
        );
        assert_eq!(miss.code(), "KV_STALE");
    }

    #[test]
    fn future_timestamps_are_misses_beyond_the_skew() {
        let miss = judge(NOW.plus(HOUR), NOW, 4 * HOUR).unwrap_err();
        assert_eq!(miss, StaleMiss::InFuture { ahead_ms: HOUR });
        assert_eq!(miss.code(), "KV_FUTURE_TIMESTAMP");
        assert!(judge(NOW.plus(FUTURE_SKEW_MS + 1), NOW, 4 * HOUR).is_err());
        assert_eq!(judge(NOW.plus(FUTURE_SKEW_MS), NOW, 4 * HOUR), Ok(0));
        assert_eq!(judge(NOW.plus(40), NOW, 4 * HOUR), Ok(0));
    }

    #[test]
    fn time_left_runs_down_to_zero_at_the_ceiling() {
        let day = 24 * HOUR;
        assert_eq!(time_left(ago(HOUR), NOW, day), 23 * HOUR);
        assert_eq!(time_left(ago(day), NOW, day), 0);
        assert_eq!(time_left(ago(day + 1), NOW, day), 0);
        assert_eq!(time_left(NOW.plus(HOUR), NOW, day), day + HOUR);
        // Agrees with judge: time left > 0 exactly while the answer may be served.
        for age in [0, HOUR, day - 1, day, day + 1] {
            let served = judge(ago(age), NOW, day).is_ok();
            assert_eq!(
                time_left(ago(age), NOW, day) > 0 || age == day,
                served,
                "{age}"
            );
        }
    }

    #[test]
    fn a_zero_ceiling_only_serves_this_instant() {
        assert_eq!(judge(NOW, NOW, 0), Ok(0));
        assert!(judge(ago(1), NOW, 0).is_err());
    }
}
