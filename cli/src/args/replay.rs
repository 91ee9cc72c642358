//! `understudy replay`'s arguments.

use std::path::PathBuf;

use super::Format;

#[derive(Debug, clap::Args)]
pub struct ReplayArgs {
    /// The candidate policy: what would it have done?
    pub policy: PathBuf,
    /// The edge's log lines: plain NDJSON, `wrangler tail --format json` output, or Workers
    /// Trace Events (Logpush) / Workers Logs exports; gzip accepted (docs/replay.md).
    #[arg(long, required = true, num_args = 1.., value_name = "FILE")]
    pub logs: Vec<PathBuf>,
    /// The policy the logs were written under (the "logged policy" column).
    #[arg(long, value_name = "FILE", conflicts_with = "registry")]
    pub logged_policy: Option<PathBuf>,
    /// A release registry holding the release the logs were written under (their
    /// `policy_version`), instead of `--logged-policy`.
    #[arg(long, value_name = "DIR")]
    pub registry: Option<PathBuf>,
    /// Replay the lines of this service only (required when the logs mix services).
    #[arg(long, value_name = "NAME")]
    pub service: Option<String>,
    /// Replay the lines of this release only (required when the logs mix releases).
    #[arg(long, value_name = "ID")]
    pub release: Option<String>,
    /// Judge the policies' catalogs (and run the virtual clock) as of this instant (RFC 3339)
    /// instead of the first logged arrival.
    #[arg(long)]
    pub now: Option<String>,
    /// The logs come from a drill run at `--time-scale F`: scale the policies' breaker
    /// clocks the same way (0 < F ≤ 1).
    #[arg(long, value_name = "F", default_value_t = 1.0)]
    pub time_scale: f64,
    /// The length of the time windows (e.g. 1s, 1m; default: about a hundred over the logs).
    #[arg(long, value_name = "DURATION")]
    pub window: Option<String>,
    /// Write the per-window picture (SVG) here.
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "human")]
    pub format: Format,
}
