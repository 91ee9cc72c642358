//! Durations as policies write them — a whole number and one unit (`45ms`, `5s`, `30m`,
//! `4h`, `1d`) — and the JSON Schema pattern that accepts exactly the durations a key's
//! range allows.
//!
//! The grammar is deliberately small: one unit, no leading zero, at most nine digits. A
//! duration then reads at a glance, cannot overflow, and its valid range is a regular
//! language, so the schema an editor validates with and the checker accept the same
//! strings: [`pattern`] is generated from the same `(min, max)` the checker compares with.

use understudy_core::time::format_duration;

/// The units, largest first, with their length in milliseconds.
pub const UNITS: [(&str, u64); 5] = [
    ("d", 86_400_000),
    ("h", 3_600_000),
    ("m", 60_000),
    ("s", 1_000),
    ("ms", 1),
];

/// The largest number a duration may have (nine digits).
pub const MAX_NUMBER: u64 = 999_999_999;

/// The longest duration the grammar can write (`999999999d`): the upper end of a key that
/// has no limit of its own.
pub const LONGEST_MS: u64 = MAX_NUMBER * 86_400_000;

/// Parses `text` in the policy grammar; the error names the problem and the fix.
pub fn parse(text: &str) -> Result<u64, String> {
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    let (number, unit) = text.split_at(digits);
    if let Some(factor) = UNITS.iter().find(|(u, _)| *u == unit).map(|(_, f)| *f) {
        if number.is_empty() {
            return Err(format!(
                "`{text}` has no number; write a whole number before the unit, e.g. `45{unit}`"
            ));
        }
        if number.len() > 1 && number.starts_with('0') {
            let n = number.trim_start_matches('0');
            let n = if n.is_empty() { "0" } else { n };
            return Err(format!("`{text}` has a leading zero; write `{n}{unit}`"));
        }
        if number.len() > 9 {
            return Err(format!(
                "`{text}` is too long a duration (at most nine digits); use a larger unit"
            ));
        }
        let n: u64 = number
            .parse()
            .map_err(|_| format!("`{text}` is not a number"))?;
        return Ok(n * factor);
    }
    Err(explain(text))
}

/// Why `text` is not a duration, with the fix when one can be computed.
fn explain(text: &str) -> String {
    let t = text.trim();
    if t.is_empty() {
        return "the duration is empty; write a whole number and a unit, e.g. `45ms` or `4h`"
            .into();
    }
    if t.bytes().all(|b| b.is_ascii_digit()) {
        return format!("`{t}` has no unit; durations need one of ms, s, m, h, d (e.g. `{t}ms`)");
    }
    if t != text {
        return format!("`{text}` has spaces around it; write `{t}`");
    }
    if t.contains(char::is_whitespace) {
        let joined: String = t.split_whitespace().collect();
        return match understudy_core::time::parse_duration(&joined) {
            Ok(ms) => format!(
                "`{t}` has a space inside; write `{joined}`{}",
                single(ms, &joined)
            ),
            Err(_) => format!(
                "`{t}` is not a duration; write a whole number and a unit without a space, e.g. `45ms`"
            ),
        };
    }
    if t.starts_with('-') {
        return format!("`{t}` is negative; durations are zero or more");
    }
    if let Some(unsigned) = t.strip_prefix('+') {
        return format!("`{t}` has a sign; write `{unsigned}`");
    }
    if let Some(ms) = fraction(t) {
        return format!(
            "`{t}` is not a whole number; write `{}`",
            format_duration(ms)
        );
    }
    if let Ok(ms) = understudy_core::time::parse_duration(t) {
        // Several parts (`1m30s`): one unit reads at a glance.
        return format!(
            "`{t}` combines several units; write it with one: `{}`",
            format_duration(ms)
        );
    }
    let unit: String = t
        .trim_start_matches(|c: char| c.is_ascii_digit())
        .chars()
        .take_while(|c| c.is_alphabetic())
        .collect();
    if !unit.is_empty() && t.starts_with(|c: char| c.is_ascii_digit()) {
        return format!("`{unit}` is not a duration unit (in `{t}`); use ms, s, m, h or d");
    }
    format!(
        "`{t}` is not a duration; write a whole number and a unit (ms, s, m, h, d), e.g. `45ms`"
    )
}

/// ` (or `Xs`)` when a combined duration reads better in one unit.
fn single(ms: u64, written: &str) -> String {
    let one = format_duration(ms);
    if one == written {
        String::new()
    } else {
        format!(" (one unit: `{one}`)")
    }
}

/// `1.5s` → 1500 when the fraction is a whole number of milliseconds.
fn fraction(t: &str) -> Option<u64> {
    let (whole, rest) = t.split_once('.')?;
    let frac: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let unit = &rest[frac.len()..];
    let factor = UNITS.iter().find(|(u, _)| *u == unit)?.1;
    let whole: u64 = if whole.is_empty() {
        0
    } else {
        whole.parse().ok()?
    };
    let scale = 10u64.checked_pow(u32::try_from(frac.len()).ok()?)?;
    let frac_n: u64 = if frac.is_empty() {
        0
    } else {
        frac.parse().ok()?
    };
    let num = frac_n.checked_mul(factor)?;
    if num % scale != 0 {
        return None;
    }
    whole.checked_mul(factor)?.checked_add(num / scale)
}

/// The JSON Schema pattern (ECMA-262, anchored) accepting exactly the durations in
/// `[min_ms, max_ms]`.
pub fn pattern(min_ms: u64, max_ms: u64) -> String {
    let mut alts = Vec::new();
    for (unit, factor) in UNITS {
        let lo = min_ms.div_ceil(factor);
        let hi = (max_ms / factor).min(MAX_NUMBER);
        if lo <= hi {
            alts.push(format!("(?:{}){unit}", number_range(lo, hi)));
        }
    }
    format!("^(?:{})$", alts.join("|"))
}

/// A regular expression matching the decimal numbers (no leading zeros) in `[lo, hi]`.
pub fn number_range(lo: u64, hi: u64) -> String {
    let mut alts = Vec::new();
    let mut a = lo;
    while a <= hi {
        let len = a.to_string().len() as u32;
        let top = hi.min(10u64.pow(len) - 1);
        same_length(&a.to_string(), &top.to_string(), &mut alts, "");
        a = top + 1;
    }
    alts.join("|")
}

/// Alternatives matching the numbers from `a` to `b`, strings of one length, after `prefix`.
fn same_length(a: &str, b: &str, out: &mut Vec<String>, prefix: &str) {
    if a == b {
        out.push(format!("{prefix}{a}"));
        return;
    }
    let (a0, a_rest) = a.split_at(1);
    let (b0, b_rest) = b.split_at(1);
    if a_rest.is_empty() {
        out.push(format!("{prefix}[{a0}-{b0}]"));
        return;
    }
    if a0 == b0 {
        same_length(a_rest, b_rest, out, &format!("{prefix}{a0}"));
        return;
    }
    let n = a_rest.len();
    let (da, db) = (digit(a0), digit(b0));
    let mut first = da;
    if !a_rest.bytes().all(|c| c == b'0') {
        same_length(a_rest, &"9".repeat(n), out, &format!("{prefix}{a0}"));
        first = da + 1;
    }
    let mut last = db;
    let upper_whole = b_rest.bytes().all(|c| c == b'9');
    if !upper_whole {
        last = db - 1;
    }
    if first <= last {
        let head = if first == last {
            first.to_string()
        } else {
            format!("[{first}-{last}]")
        };
        out.push(format!("{prefix}{head}[0-9]{{{n}}}"));
    }
    if !upper_whole {
        same_length(&"0".repeat(n), b_rest, out, &format!("{prefix}{b0}"));
    }
}

fn digit(s: &str) -> u8 {
    s.bytes().next().map_or(0, |b| b - b'0')
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_policy_grammar() {
        assert_eq!(parse("45ms"), Ok(45));
        assert_eq!(parse("4h"), Ok(14_400_000));
        assert_eq!(parse("0ms"), Ok(0));
        assert_eq!(parse("1d"), Ok(86_400_000));
    }

    #[test]
    fn every_refusal_names_the_fix() {
        assert!(parse("8 ms").unwrap_err().contains("write `8ms`"));
        assert!(parse("45").unwrap_err().contains("no unit"));
        assert!(parse("1m30s").unwrap_err().contains("`90s`"));
        assert!(parse("1.5s").unwrap_err().contains("`1500ms`"));
        assert!(parse("045ms").unwrap_err().contains("`45ms`"));
        assert!(parse("4hours")
            .unwrap_err()
            .contains("`hours` is not a duration unit"));
        assert!(parse("-5ms").unwrap_err().contains("negative"));
        assert!(parse("9999999999ms").unwrap_err().contains("too long"));
        assert!(parse(" 5s").unwrap_err().contains("spaces"));
        assert!(parse("").unwrap_err().contains("empty"));
    }

    fn matches(re: &str, s: &str) -> bool {
        regex_lite::Regex::new(re).unwrap().is_match(s)
    }

    proptest! {
        #[test]
        fn number_ranges_match_exactly_their_numbers(a in 0u64..200_000, w in 0u64..200_000, n in 0u64..500_000) {
            let (lo, hi) = (a, a + w);
            let re = format!("^(?:{})$", number_range(lo, hi));
            prop_assert_eq!(matches(&re, &n.to_string()), (lo..=hi).contains(&n), "{} in {}..={}: {}", n, lo, hi, re);
        }

        #[test]
        fn patterns_accept_exactly_the_parsable_durations_in_range(
            n in prop_oneof![0u64..2_000, 0u64..MAX_NUMBER],
            unit in prop::sample::select(vec!["ms", "s", "m", "h", "d"]),
            bounds in prop::sample::select(vec![(1u64, 60_000u64), (1_000, 86_400_000), (0, 300_000), (60_000, 30 * 86_400_000), (1, u64::MAX)]),
        ) {
            let text = format!("{n}{unit}");
            let ms = parse(&text).unwrap();
            let re = pattern(bounds.0, bounds.1);
            prop_assert_eq!(matches(&re, &text), (bounds.0..=bounds.1).contains(&ms), "{} = {}ms against {:?}", text, ms, bounds);
        }

        #[test]
        fn patterns_refuse_what_does_not_parse(s in "[0-9a-z .+-]{0,8}") {
            if parse(&s).is_err() {
                prop_assert!(!matches(&pattern(0, u64::MAX), &s), "{:?}", s);
            }
        }
    }
}
