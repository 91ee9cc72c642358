//! A scenario's `[drill]` table: the limits a drill against the real edge must meet, beyond
//! the invariants every drill checks (docs/scenarios.md, "Drill limits").
//!
//! ```toml
//! [drill]
//! degrade_within = "3s"      # breaker degraded this soon after the fault's onset
//! recover_within = "45s"     # healthy again, user tier rewritten, this soon after its end
//! stalled_after = "60s"      # ALERT_RECOVERY_PROBE_STALLED past this (default 60s)
//! p95_max = "55ms"           # p95 of every answer's latency, as the client measures it
//! ```
//!
//! `--time-scale` shrinks the durations that follow the breaker's clocks (`recover_within`,
//! `stalled_after`: hold-downs and probe holds scale with it). `degrade_within` does not: how
//! soon the breaker trips is set by its minimum calls at the arrival rate and by the
//! deadline, neither of which the time scale changes; nor does the host's settling after the
//! breaker's close (`Context::unscaled_ms`, `Context::unscaled_settle_ms` add both back).
//! `p95_max` is one request's latency.

use serde::Deserialize;
use understudy_compiler::simulate::fleet::spec::{WITHIN_MS, WITHIN_WHY};
use understudy_core::time::{format_duration, parse_duration};

/// Seed 000: "If recovery duration exceeds 60 seconds post fault removal, emit alert".
pub const DEFAULT_STALLED_MS: u64 = 60_000;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLimits {
    degrade_within: Option<String>,
    recover_within: Option<String>,
    stalled_after: Option<String>,
    p95_max: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct Limits {
    pub degrade_within_ms: Option<u64>,
    pub recover_within_ms: Option<u64>,
    pub stalled_after_ms: u64,
    pub p95_max_ms: Option<u64>,
}

impl Limits {
    /// Reads `[drill]` (absent: no extra limits, the default stall alert).
    pub fn parse(table: Option<&toml::Table>) -> Result<Limits, String> {
        let raw: RawLimits = match table {
            Some(t) => t.clone().try_into().map_err(|e| format!("[drill]: {e}"))?,
            None => RawLimits::default(),
        };
        let d = |key: &str, v: &Option<String>| -> Result<Option<u64>, String> {
            v.as_deref()
                .map(|s| parse_duration(s).map_err(|e| format!("[drill] {key}: {e}")))
                .transpose()
        };
        // The fleet table's range for the same keys (`[fleet] degrade_within`).
        let within = |key: &str, v: &Option<String>| -> Result<Option<u64>, String> {
            let ms = d(key, v)?;
            let (lo, hi) = WITHIN_MS;
            match (ms, v) {
                (Some(ms), Some(s)) if !(lo..=hi).contains(&ms) => Err(format!(
                    "[drill] {key}: `{s}` is outside its valid range {}..={} ({WITHIN_WHY})",
                    format_duration(lo),
                    format_duration(hi)
                )),
                _ => Ok(ms),
            }
        };
        Ok(Limits {
            degrade_within_ms: within("degrade_within", &raw.degrade_within)?,
            recover_within_ms: within("recover_within", &raw.recover_within)?,
            stalled_after_ms: d("stalled_after", &raw.stalled_after)?.unwrap_or(DEFAULT_STALLED_MS),
            p95_max_ms: d("p95_max", &raw.p95_max)?,
        })
    }

    /// The breaker-clock limits times `f` (`--time-scale`).
    pub fn scaled(self, f: f64) -> Limits {
        let s = |x: u64| ((x as f64 * f).round() as u64).max(1);
        Limits {
            degrade_within_ms: self.degrade_within_ms,
            recover_within_ms: self.recover_within_ms.map(s),
            stalled_after_ms: s(self.stalled_after_ms),
            p95_max_ms: self.p95_max_ms,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(s: &str) -> toml::Table {
        toml::from_str(s).expect("toml")
    }

    #[test]
    fn reads_seed_000_limits_and_scales_only_the_incident_clock() {
        let t = table("degrade_within = \"3s\"\nrecover_within = \"45s\"\np95_max = \"55ms\"");
        let l = Limits::parse(Some(&t)).expect("valid");
        assert_eq!(
            l,
            Limits {
                degrade_within_ms: Some(3000),
                recover_within_ms: Some(45_000),
                stalled_after_ms: 60_000,
                p95_max_ms: Some(55)
            }
        );
        let s = l.scaled(0.05);
        assert_eq!(
            (
                s.degrade_within_ms,
                s.recover_within_ms,
                s.stalled_after_ms,
                s.p95_max_ms
            ),
            (Some(3000), Some(2250), 3000, Some(55))
        );
    }

    #[test]
    fn unknown_keys_and_bad_durations_are_named() {
        let e = Limits::parse(Some(&table("recover_in = \"45s\""))).unwrap_err();
        assert!(e.contains("recover_in"), "{e}");
        let e = Limits::parse(Some(&table("p95_max = \"fast\""))).unwrap_err();
        assert!(e.contains("p95_max"), "{e}");
        assert_eq!(
            Limits::parse(None).expect("none").stalled_after_ms,
            DEFAULT_STALLED_MS
        );
    }

    /// `degrade_within` and `recover_within` took any duration, `0ms` and a billion days
    /// included; they share the `[fleet]` table's range.
    #[test]
    fn degrade_and_recover_within_are_held_to_the_fleet_tables_range() {
        for (t, says) in [
            (
                "degrade_within = \"0ms\"",
                "[drill] degrade_within: `0ms` is outside its valid range 1ms..=1d",
            ),
            (
                "recover_within = \"1000000000d\"",
                "[drill] recover_within: `1000000000d` is outside its valid range 1ms..=1d",
            ),
        ] {
            let e = Limits::parse(Some(&table(t))).unwrap_err();
            assert!(e.starts_with(says), "{t}: {e}");
        }
        let l = Limits::parse(Some(&table(
            "degrade_within = \"1ms\"\nrecover_within = \"1d\"",
        )))
        .expect("the edges are valid");
        assert_eq!(
            (l.degrade_within_ms, l.recover_within_ms),
            (Some(1), Some(86_400_000))
        );
    }
}
