//! One module per subcommand.
pub mod bake;
pub mod bench;
pub mod build;
pub mod check;
pub mod dev;
pub mod drill;
pub mod events;
pub mod explain;
pub mod origin;
pub mod publish;
pub mod releases;
pub mod schema;
pub mod simulate;
pub mod token;

use understudy_core::Millis;

/// `--now` as milliseconds since the epoch; the system clock when absent.
pub fn parse_now(now: Option<&str>) -> anyhow::Result<Millis> {
    match now {
        Some(s) => {
            let t = time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339)
                .map_err(|e| anyhow::anyhow!("--now `{s}` is not an RFC 3339 time ({e}); write e.g. 2026-11-30T12:00:00Z"))?;
            let ms = t.unix_timestamp_nanos() / 1_000_000;
            Ok(Millis(u64::try_from(ms).map_err(|_| {
                anyhow::anyhow!("--now `{s}` is before 1970")
            })?))
        }
        None => {
            let ms = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)?
                .as_millis();
            Ok(Millis(ms as u64))
        }
    }
}
