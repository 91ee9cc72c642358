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
    /// Upload a release as a Workers version (`wrangler versions upload`, tagged with its ID)
    /// and record the version ID in the registry.
    Upload(UploadArgs),
    /// Roll a release out gradually against the active one, judged on the fallback's own SLO
    /// (docs/rollout.md): advance, hold or roll back at each step.
    Rollout(RolloutArgs),
    /// Deploy a release's Workers version at 100% on Cloudflare (uploading it first when it
    /// has none): what `rollback` prints after moving ACTIVE, and what `rollback --deploy`
    /// runs. Refused while a rollout has not ended.
    Deploy(DeployArgs),
    /// The running (or last) rollout: its step, and every judgement with its evidence.
    Status(StatusArgs),
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
    /// Every column (created, validated, items, each expiry, the Workers version, the note):
    /// about 250 characters wide. Without it, a table within 100 columns.
    #[arg(long)]
    pub wide: bool,
    #[arg(long, value_enum, default_value = "human")]
    pub format: Format,
}

#[derive(Debug, clap::Args)]
pub struct DiffArgs {
    pub a: String,
    pub b: String,
    #[command(flatten)]
    pub registry: RegistryArg,
    /// Also replay these edge logs through A's policy and B's, and judge B against A as a
    /// rollout step would (docs/replay.md).
    #[arg(long, num_args = 1.., value_name = "FILE")]
    pub replay: Vec<PathBuf>,
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
    /// Then deploy the release rolled back to on Cloudflare at 100% (`wrangler versions
    /// deploy`): at once when it has a Workers version, after uploading it when it has none
    /// (a policy re-paired with the current catalog is a new release).
    #[arg(long)]
    pub deploy: bool,
}

#[derive(Debug, clap::Args)]
pub struct RolloutArgs {
    /// The release to roll out.
    pub id: String,
    #[command(flatten)]
    pub registry: RegistryArg,
    /// The release it replaces (default: the active one).
    #[arg(long, value_name = "ID")]
    pub from: Option<String>,
    /// The local front of `understudy drill --rollout` (http://127.0.0.1:PORT) deploys and
    /// measures the versions; without it, Cloudflare does (wrangler, the Analytics Engine
    /// SQL API; docs/rollout.md).
    #[arg(long, value_name = "URL")]
    pub front: Option<String>,
    /// Cloudflare: a rehearsal — every step's `wrangler versions deploy` (and the rollback's)
    /// run with `--dry-run`, both figure queries sent once; nothing deployed or recorded.
    #[arg(long, conflicts_with = "front")]
    pub dry_run: bool,
    #[command(flatten)]
    pub slo: SloArgs,
    /// Continue the recorded rollout of ID (after a crash or a kill).
    #[arg(long, conflicts_with = "abort")]
    pub resume: bool,
    /// Revert the recorded rollout of ID: the old version back at 100% (exit 3), unless the
    /// deployment serving now is not the rollout's (then nothing is deployed).
    #[arg(long)]
    pub abort: bool,
    /// A new rollout: start even over a rollout record that never ended or is damaged (that
    /// record is kept aside). With --abort: abort a damaged record (rebuilt from the active
    /// release), or record the rollout as aborted without deploying when the deployment
    /// serving now is not its split.
    #[arg(long, conflicts_with = "resume")]
    pub force: bool,
    /// Write the rollout's record (rollout.json) and its timeline (rollout.svg: the new
    /// version's share and the judged figures over time) into this directory at the end.
    #[arg(long, value_name = "DIR")]
    pub report: Option<PathBuf>,
    /// A new rollout: first replay these edge logs (production's, exported: docs/replay.md)
    /// through the old release's policy and the new one's, and refuse to start (exit 1, the
    /// evidence recorded) when the new one replays worse on the rollout's SLO; --force starts
    /// anyway and records that it did.
    #[arg(long, num_args = 1.., value_name = "FILE", conflicts_with_all = ["resume", "abort"])]
    pub replay: Vec<PathBuf>,
}

#[derive(Debug, clap::Args)]
pub struct DeployArgs {
    /// The release to deploy.
    pub id: String,
    #[command(flatten)]
    pub registry: RegistryArg,
}

#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    #[command(flatten)]
    pub registry: RegistryArg,
    /// The release whose rollout to show (default: the running one, else the last).
    #[arg(long, value_name = "ID")]
    pub id: Option<String>,
    #[arg(long, value_enum, default_value = "human")]
    pub format: Format,
}

/// The rollout's SLO and pace on the command line (ADR 012); unset ones keep the defaults.
#[derive(Debug, clap::Args)]
pub struct SloArgs {
    /// The new version's share at each step, in percent: increasing, ending at 100
    /// [default: 1,10,50,100].
    #[arg(long, value_delimiter = ',', value_name = "P,P,…")]
    pub steps: Option<Vec<u8>>,
    /// The least time at each step before a judgement, e.g. 5m [default: 5m].
    #[arg(long, value_name = "DURATION", value_parser = parse_setting_duration, allow_hyphen_values = true)]
    pub dwell: Option<Duration>,
    /// The least answers from each version in a step's window before a judgement
    /// [default: 1200].
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub min_answers: Option<u64>,
    /// How much worse the new version's degraded share may be (absolute) [default: 0.02].
    #[arg(long, value_name = "SHARE", allow_negative_numbers = true)]
    pub degraded_margin: Option<f64>,
    /// How much worse its no-tier 5xx share may be (absolute) [default: 0.005].
    #[arg(long, value_name = "SHARE", allow_negative_numbers = true)]
    pub unavailable_margin: Option<f64>,
    /// How much slower its p95 may be (relative: 0.2 is 20%) [default: 0.2].
    #[arg(long, value_name = "SHARE", allow_negative_numbers = true)]
    pub p95_margin: Option<f64>,
    /// Holds at one step before the rollout rolls back [default: 6].
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub max_holds: Option<u32>,
}

/// `--dwell`: a duration as the policy writes it; a sign is refused by name.
fn parse_setting_duration(s: &str) -> Result<Duration, String> {
    if s.starts_with('-') {
        return Err(format!(
            "`{s}` is negative: a dwell is a time to wait, from 1s to 1d (ERR_OUT_OF_RANGE)"
        ));
    }
    parse_wait(s)
}

impl SloArgs {
    /// Whether the setting named by its policy key (`dwell`) was given on the command line.
    pub fn given(&self, key: &str) -> bool {
        match key {
            "steps" => self.steps.is_some(),
            "dwell" => self.dwell.is_some(),
            "min_answers" => self.min_answers.is_some(),
            "degraded_margin" => self.degraded_margin.is_some(),
            "unavailable_margin" => self.unavailable_margin.is_some(),
            "p95_margin" => self.p95_margin.is_some(),
            "max_holds" => self.max_holds.is_some(),
            _ => false,
        }
    }

    /// A setting as the messages name it: the flag when given, else the policy's key.
    pub fn name(&self, key: &str) -> String {
        if self.given(key) {
            format!("--{}", key.replace('_', "-"))
        } else {
            format!("rollout.{key}")
        }
    }

    /// The SLO: `base` (the policy's `[rollout]`, or the defaults), then the command line's
    /// settings.
    pub fn over(
        &self,
        base: understudy_compiler::release::rollout::Slo,
    ) -> understudy_compiler::release::rollout::Slo {
        let mut slo = base;
        if let Some(s) = &self.steps {
            slo.steps.clone_from(s);
        }
        if let Some(d) = self.dwell {
            slo.dwell_ms = d.as_millis() as u64;
        }
        if let Some(n) = self.min_answers {
            slo.min_answers = n;
        }
        if let Some(m) = self.degraded_margin {
            slo.degraded_margin = m;
        }
        if let Some(m) = self.unavailable_margin {
            slo.unavailable_margin = m;
        }
        if let Some(m) = self.p95_margin {
            slo.p95_margin = m;
        }
        if let Some(h) = self.max_holds {
            slo.max_holds = h;
        }
        slo
    }
}

#[derive(Debug, clap::Args)]
pub struct UploadArgs {
    /// The release to upload.
    pub id: String,
    #[command(flatten)]
    pub registry: RegistryArg,
    /// Let wrangler check the upload (`--dry-run`); nothing is uploaded or recorded.
    #[arg(long)]
    pub dry_run: bool,
}
