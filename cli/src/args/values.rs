//! Parsers for option values that several subcommands take (`bake` and `releases add`
//! both publish KV tiers and both wait for the registry's lock): one place, so the two
//! argument modules need not borrow from each other.

use std::path::PathBuf;
use std::time::Duration;

/// `--wait DURATION`.
pub fn parse_wait(s: &str) -> Result<Duration, String> {
    understudy_core::time::parse_duration(s).map(Duration::from_millis)
}

/// `--publish TIER=LISTS`.
pub fn parse_publish(s: &str) -> Result<(String, PathBuf), String> {
    match s.split_once('=') {
        Some((t, f)) if !t.is_empty() && !f.is_empty() => Ok((t.to_string(), PathBuf::from(f))),
        _ => Err(format!(
            "`{s}`: write TIER=LISTS, e.g. category=top-sellers.csv"
        )),
    }
}
