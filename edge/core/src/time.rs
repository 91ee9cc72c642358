//! Time as plain milliseconds since the Unix epoch.
//!
//! `std::time::Instant` does not exist on `wasm32-unknown-unknown`, and the decision core
//! must never read a clock itself: the Worker adapter feeds `Date::now()`, tests and
//! `understudy simulate` feed virtual time. Inside a Worker the clock only advances across
//! I/O, which is exactly when the core is consulted.

use serde::{Deserialize, Serialize};

/// A point in time, in milliseconds since the Unix epoch.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
pub struct Millis(pub u64);

impl Millis {
    /// Milliseconds elapsed from `earlier` to `self`, saturating at zero.
    pub fn since(self, earlier: Millis) -> u64 {
        self.0.saturating_sub(earlier.0)
    }

    /// `self` moved forward by `ms`, saturating.
    pub fn plus(self, ms: u64) -> Millis {
        Millis(self.0.saturating_add(ms))
    }
}

/// Renders a duration in milliseconds the way humans write it in policies (`45ms`, `4h`).
pub fn format_duration(ms: u64) -> String {
    const UNITS: [(u64, &str); 4] = [
        (86_400_000, "d"),
        (3_600_000, "h"),
        (60_000, "m"),
        (1_000, "s"),
    ];
    for (unit, suffix) in UNITS {
        if ms >= unit && ms.is_multiple_of(unit) {
            return format!("{}{}", ms / unit, suffix);
        }
    }
    format!("{ms}ms")
}

/// Parses a human duration: an integer followed by `ms`, `s`, `m`, `h` or `d` (`45ms`,
/// `4h`, `1500ms`). Several parts may be combined (`1m30s`). Returns a message naming the
/// problem on failure.
pub fn parse_duration(text: &str) -> Result<u64, String> {
    let t = text.trim();
    if t.is_empty() {
        return Err("empty duration; write a number and a unit, e.g. `45ms` or `4h`".into());
    }
    let bytes = t.as_bytes();
    let mut total: u64 = 0;
    let mut i = 0;
    while i < bytes.len() {
        let start = i;
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            i += 1;
        }
        if start == i {
            return Err(format!(
                "`{t}` is not a duration; write a whole number followed by a unit (ms, s, m, h, d), e.g. `45ms`"
            ));
        }
        let n: u64 = t[start..i]
            .parse()
            .map_err(|_| format!("`{t}`: the number is too large"))?;
        let ustart = i;
        while i < bytes.len() && bytes[i].is_ascii_alphabetic() {
            i += 1;
        }
        let factor = match &t[ustart..i] {
            "ms" => 1,
            "s" => 1_000,
            "m" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            "" => {
                return Err(format!(
                    "`{t}` has no unit; durations need one of ms, s, m, h, d (e.g. `{n}ms`)"
                ))
            }
            other => {
                return Err(format!(
                    "`{other}` is not a duration unit in `{t}`; use ms, s, m, h or d"
                ))
            }
        };
        total = n
            .checked_mul(factor)
            .and_then(|v| total.checked_add(v))
            .ok_or_else(|| format!("`{t}` is too long a duration"))?;
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_units_policies_use() {
        assert_eq!(parse_duration("45ms"), Ok(45));
        assert_eq!(parse_duration("4h"), Ok(14_400_000));
        assert_eq!(parse_duration("24h"), Ok(86_400_000));
        assert_eq!(parse_duration("1m30s"), Ok(90_000));
        assert_eq!(parse_duration("2d"), Ok(172_800_000));
    }

    #[test]
    fn rejects_what_is_not_a_duration() {
        assert!(parse_duration("").is_err());
        assert!(parse_duration("45").unwrap_err().contains("no unit"));
        assert!(parse_duration("45 ms").is_err());
        assert!(parse_duration("4 hours").is_err());
        assert!(parse_duration("ms").is_err());
        assert!(parse_duration("-5ms").is_err());
        assert!(parse_duration("99999999999999999999ms").is_err());
        assert!(parse_duration("9999999999999999d").is_err());
    }

    #[test]
    fn formats_back_to_the_largest_whole_unit() {
        assert_eq!(format_duration(45), "45ms");
        assert_eq!(format_duration(14_400_000), "4h");
        assert_eq!(format_duration(1_500), "1500ms");
        assert_eq!(format_duration(0), "0ms");
    }

    #[test]
    fn millis_arithmetic_saturates() {
        assert_eq!(Millis(5).since(Millis(10)), 0);
        assert_eq!(Millis(u64::MAX).plus(1), Millis(u64::MAX));
    }
}
