//! How old a release's catalog is, against its policy's ceiling (`catalog.max_age`).
//!
//! The age counts from the inventory snapshot, not from the bake: re-baking Monday's
//! snapshot on Wednesday does not make its stock figures any younger. This is what
//! `releases list` shows and what promote and rollback refuse on (seed 000: no stubs that
//! were not validated within 24 hours).

use understudy_core::time::format_duration;
use understudy_core::Millis;

use super::record::Record;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Freshness {
    pub snapshot_age_ms: u64,
    pub max_age_ms: u64,
}

impl Freshness {
    pub fn of(record: &Record, now: Millis) -> Option<Freshness> {
        let c = record.catalog.as_ref()?;
        Some(Freshness {
            snapshot_age_ms: now.since(Millis(c.snapshot_at_ms)),
            max_age_ms: c.max_age_ms,
        })
    }

    /// When the baked stubs stop counting as validated — the moment the edge stops
    /// answering from them (or, under `on_expired = "disclose"`, starts saying so): the
    /// evidence (the earlier of the snapshot and the validation) plus the policy's ceiling.
    pub fn stubs_expire_at_ms(record: &Record) -> Option<u64> {
        let c = record.catalog.as_ref()?;
        Some(
            c.snapshot_at_ms
                .min(record.validated_at_ms)
                .saturating_add(c.max_age_ms),
        )
    }

    pub fn stale(self) -> bool {
        self.snapshot_age_ms > self.max_age_ms
    }

    /// `3h12m old (ceiling 24h)` / `26h old, past the 24h ceiling`.
    pub fn describe(self) -> String {
        let age = age(self.snapshot_age_ms);
        if self.stale() {
            format!(
                "{age} old, past the {} ceiling",
                format_duration(self.max_age_ms)
            )
        } else {
            format!("{age} old (ceiling {})", format_duration(self.max_age_ms))
        }
    }
}

/// A rough, readable age: `45s`, `12m`, `3h12m`, `2d4h`.
pub fn age(ms: u64) -> String {
    let s = ms / 1000;
    let (d, h, m) = (s / 86_400, (s % 86_400) / 3600, (s % 3600) / 60);
    if d > 0 {
        format!("{d}d{h}h")
    } else if h > 0 {
        format!("{h}h{m}m")
    } else if m > 0 {
        format!("{m}m")
    } else {
        format!("{s}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_read_like_people_write_them() {
        assert_eq!(age(45_000), "45s");
        assert_eq!(age(12 * 60_000 + 5_000), "12m");
        assert_eq!(age(3 * 3_600_000 + 12 * 60_000), "3h12m");
        assert_eq!(age(2 * 86_400_000 + 4 * 3_600_000), "2d4h");
    }

    #[test]
    fn stale_only_past_the_ceiling() {
        let f = |a| Freshness {
            snapshot_age_ms: a,
            max_age_ms: 86_400_000,
        };
        assert!(!f(86_400_000).stale());
        assert!(f(86_400_001).stale());
        assert!(f(90_000_000).describe().contains("past the 1d ceiling"));
    }
}
