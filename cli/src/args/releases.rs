//! `understudy releases …`: the registry subcommands' arguments.

use std::path::PathBuf;
use std::time::Duration;

use clap::Subcommand;

use super::values::{parse_publish, parse_wait};
use super::{Format, SizeArgs};

#[derive(Debug, clap::Args)]
pub struct ReleasesArgs {
    #[command(subcommand)]
    pub command: ReleasesCommand,
}

#[derive(Debug, Subcommand)]
pub enum ReleasesCommand {
    /// Validate and build a policy with its catalog, and publish it as a release.
    Add(AddArgs),
    /// Every release: what, when, validated when, catalog age, which is active.
    List(ListArgs),
    /// What changes if B replaces A: the policy, setting by setting, and the catalog delta.
    Diff(DiffArgs),
    /// Make a release the active one.
    Promote(PromoteArgs),
    /// Roll the policy back, keeping the current validated catalog.
    Rollback(RollbackArgs),
    /// Check the registry: every release's files and ID, the history, ACTIVE, leftovers of
    /// killed writers; exit 2 if anything is wrong (saying what `repair` would do).
    Verify(RegistryArg),
    /// Fix what the content-addressed store allows (see `verify`) and report what it did and
    /// what it could not; exit 2 if anything is left.
    Repair(RegistryArg),
}

#[derive(Debug, clap::Args)]
pub struct RegistryArg {
    /// The registry directory.
    #[arg(long, value_name = "DIR")]
    pub registry: PathBuf,
    /// Wait this long (e.g. 30s, 2m) for another understudy holding the registry's lock,
    /// instead of failing at once.
    #[arg(long, value_name = "DURATION", value_parser = parse_wait)]
    pub wait: Option<Duration>,
}

#[derive(Debug, clap::Args)]
pub struct AddArgs {
    pub policy: PathBuf,
    #[command(flatten)]
    pub registry: RegistryArg,
    /// Prebuilt edge module directory (worker-build output); built when absent.
    #[arg(long)]
    pub edge: Option<PathBuf>,
    /// Validate as of this instant (RFC 3339) instead of now.
    #[arg(long)]
    pub now: Option<String>,
    /// Make the new release the active one.
    #[arg(long)]
    pub promote: bool,
    /// Publish a KV tier with the release (TIER=LISTS, repeatable; docs/publish.md).
    #[arg(long = "publish", value_name = "TIER=LISTS", value_parser = parse_publish)]
    pub publish: Vec<(String, PathBuf)>,
    #[command(flatten)]
    pub size: SizeArgs,
}

#[derive(Debug, clap::Args)]
pub struct ListArgs {
    #[command(flatten)]
    pub registry: RegistryArg,
    /// Judge catalog ages as of this instant (RFC 3339) instead of now.
    #[arg(long)]
    pub now: Option<String>,
    #[arg(long, value_enum, default_value = "human")]
    pub format: Format,
}

#[derive(Debug, clap::Args)]
pub struct DiffArgs {
    pub a: String,
    pub b: String,
    #[command(flatten)]
    pub registry: RegistryArg,
}

#[derive(Debug, clap::Args)]
pub struct PromoteArgs {
    pub id: String,
    #[command(flatten)]
    pub registry: RegistryArg,
    /// Activate it even if its catalog is past its ceiling.
    #[arg(long)]
    pub force: bool,
    #[arg(long)]
    pub now: Option<String>,
}

#[derive(Debug, clap::Args)]
pub struct RollbackArgs {
    #[command(flatten)]
    pub registry: RegistryArg,
    /// The release whose policy to roll back to (default: the last active one with another policy).
    #[arg(long, value_name = "ID")]
    pub to: Option<String>,
    /// Roll back to the target as it was, with its own (older) catalog.
    #[arg(long)]
    pub with_its_catalog: bool,
    /// Roll back even if the catalog would be past the policy's ceiling.
    #[arg(long)]
    pub force: bool,
    #[arg(long)]
    pub now: Option<String>,
    #[command(flatten)]
    pub size: SizeArgs,
}
