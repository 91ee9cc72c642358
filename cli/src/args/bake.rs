//! `understudy bake …`: the catalog owner's nightly re-bake.

use std::path::PathBuf;

use super::values::{parse_publish, parse_wait};
use super::SizeArgs;

#[derive(Debug, clap::Args)]
pub struct BakeArgs {
    /// The build to re-bake: a directory written by `understudy build` (or a release
    /// directory), or with --registry a release ID (default: the active release).
    #[arg(long, value_name = "DIR|ID")]
    pub from: Option<String>,
    /// The new stub catalog (JSON, see docs/policy.md "Catalog files").
    #[arg(long)]
    pub catalog: PathBuf,
    /// The inventory snapshot to validate it against (JSON).
    #[arg(long)]
    pub inventory: PathBuf,
    /// Validate as of this instant (RFC 3339) instead of now; also the recorded validation time.
    #[arg(long)]
    pub now: Option<String>,
    /// Write the re-baked directory here (default, without --registry: the --from directory).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Publish the re-bake as a release of this registry (see docs/releases.md).
    #[arg(long, value_name = "DIR")]
    pub registry: Option<PathBuf>,
    /// Make the new release the active one.
    #[arg(long, requires = "registry")]
    pub promote: bool,
    /// Wait this long (e.g. 30s) for another understudy holding the registry's lock.
    #[arg(long, value_name = "DURATION", requires = "registry", value_parser = parse_wait)]
    pub wait: Option<std::time::Duration>,
    #[command(flatten)]
    pub size: SizeArgs,
    /// Publish a KV tier with the release: its per-key lists, validated against the same
    /// inventory (docs/publish.md); the release's deploy.sh loads them. Repeatable.
    #[arg(long = "publish", value_name = "TIER=LISTS", value_parser = parse_publish)]
    pub publish: Vec<(String, PathBuf)>,
}
