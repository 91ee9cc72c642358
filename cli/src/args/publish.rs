//! `understudy publish …`: a published KV tier's lists.

use std::path::PathBuf;

use super::Format;

#[derive(Debug, clap::Args)]
pub struct PublishArgs {
    /// The policy whose KV tier is published.
    pub policy: PathBuf,
    /// The KV tier to publish (its name in the cascade, e.g. `category`).
    #[arg(long)]
    pub tier: String,
    /// The per-key lists: JSON, or CSV when the name ends in .csv (docs/publish.md).
    #[arg(long)]
    pub lists: PathBuf,
    /// The inventory snapshot to validate against (default: the one the policy names).
    #[arg(long)]
    pub inventory: Option<PathBuf>,
    /// Where to write the `wrangler kv bulk put` file.
    #[arg(long)]
    pub out: PathBuf,
    /// Validate as of this instant (RFC 3339) instead of now; also the recorded validation.
    #[arg(long)]
    pub now: Option<String>,
    /// Leave out (and name) the SKUs that fail validation instead of refusing the run.
    #[arg(long)]
    pub drop_invalid: bool,
    #[arg(long, value_enum, default_value = "human")]
    pub format: Format,
}
