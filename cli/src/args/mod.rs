//! Command-line arguments, one struct per subcommand.

mod bake;
mod events;
mod publish;
mod releases;
mod replay;
mod values;

use std::path::PathBuf;

pub use bake::BakeArgs;
pub use events::{EventsArgs, EventsCommand};
pub use publish::PublishArgs;
pub use releases::{
    AddArgs, DeployArgs, DiffArgs, ListArgs, PromoteArgs, RegistryArg, ReleasesArgs,
    ReleasesCommand, RollbackArgs, RolloutArgs, SloArgs, StatusArgs, UploadArgs,
};
pub use replay::ReplayArgs;

use clap::{Parser, Subcommand, ValueEnum};

#[derive(Debug, Parser)]
#[command(
    name = "understudy",
    version,
    about = "Validate fallback policies and bake them into an edge Worker"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// Colour diagnostics: `auto` on a terminal unless NO_COLOR is set, `always`, `never`.
    #[arg(long, value_enum, default_value = "auto", global = true)]
    pub color: ColorChoice,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ColorChoice {
    Auto,
    Always,
    Never,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Validate policies; exit 0 when valid (warnings allowed), 1 when any is invalid, 2 on usage or I/O errors.
    Check(CheckArgs),
    /// Print the page of a diagnostic code.
    Explain(ExplainArgs),
    /// Write the JSON Schema of the policy format.
    Schema(SchemaArgs),
    /// Validate a policy and bake it with its catalog into a deployable Worker directory.
    Build(BuildArgs),
    /// Re-bake a new catalog and inventory snapshot into a built Worker, without compiling Rust.
    Bake(BakeArgs),
    /// Validate per-key lists (top sellers per category) and write them for `wrangler kv bulk put`.
    Publish(PublishArgs),
    /// The release registry: add, list, diff, promote, roll back, verify, repair.
    Releases(ReleasesArgs),
    /// Replay the edge's decision core over a scenario in virtual time.
    Simulate(SimulateArgs),
    /// Replay the edge's own logs through a candidate policy: as logged, the logged policy
    /// replayed, and the candidate, side by side (docs/replay.md).
    Replay(ReplayArgs),
    /// Run the simulated model origin on loopback.
    Origin(OriginArgs),
    /// Build a policy and run it locally in workerd with seeded KV and a simulated origin.
    Dev(DevArgs),
    /// Mint an HS256 bearer token for a policy's [identity] (development and tests).
    Token(TokenArgs),
    /// Play a scenario against the real edge in workerd; check the invariants, write a report.
    Drill(DrillArgs),
    /// Measure the edge against a bare pass-through Worker (the floor) and a hand-written JS
    /// Worker (the peer) in one workerd: cold start, healthy and hung, CPU per request.
    Bench(BenchArgs),
    /// Operate a running edge's events outbox: list, inspect, replay, skip.
    Events(EventsArgs),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Human,
    Json,
}

#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// Policy files to check.
    #[arg(required = true)]
    pub policies: Vec<PathBuf>,
    #[arg(long, value_enum, default_value = "human")]
    pub format: Format,
    /// Check catalog freshness as of this instant (RFC 3339) instead of now.
    #[arg(long)]
    pub now: Option<String>,
    #[command(flatten)]
    pub strictness: Strictness,
}

/// What `check` and `build` tolerate.
#[derive(Debug, Clone, Copy, clap::Args)]
pub struct Strictness {
    /// Treat warnings as errors (exit 1).
    #[arg(long)]
    pub deny_warnings: bool,
    /// Let `catalog.stubs` / `catalog.inventory` lead outside the policy's directory.
    #[arg(long)]
    pub allow_outside_paths: bool,
}

#[derive(Debug, clap::Args)]
pub struct ExplainArgs {
    /// A diagnostic code, e.g. ERR_BUDGET_EXCEEDED.
    #[arg(required_unless_present = "all", default_value = "")]
    pub code: String,
    /// Print every code's page (the content of docs/diagnostics.md).
    #[arg(long)]
    pub all: bool,
}

#[derive(Debug, clap::Args)]
pub struct SchemaArgs {
    /// Write to this file instead of standard output.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
pub struct BuildArgs {
    pub policy: PathBuf,
    /// Output directory (default: dist/<service name>).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Validate as of this instant (RFC 3339) instead of now; also the recorded validation time.
    #[arg(long)]
    pub now: Option<String>,
    /// Prebuilt edge module directory (worker-build output); built when absent.
    #[arg(long)]
    pub edge: Option<PathBuf>,
    #[command(flatten)]
    pub size: SizeArgs,
    #[command(flatten)]
    pub strictness: Strictness,
}

/// The module size budget (docs/releases.md "Size budget").
#[derive(Debug, Clone, Default, clap::Args)]
pub struct SizeArgs {
    /// Refuse a module larger than this, uncompressed (e.g. 10MiB, 1.5MiB, 512KiB; default and
    /// most: the platform's 64MiB).
    #[arg(long, value_name = "SIZE", value_parser = understudy_compiler::release::size::parse_module_limit)]
    pub size_limit: Option<u64>,
    /// Also refuse a module whose gzipped size is over this (a start-up budget; off by default).
    #[arg(long, value_name = "SIZE", value_parser = understudy_compiler::release::size::parse_gzip_limit)]
    pub gzip_limit: Option<u64>,
}

impl SizeArgs {
    pub fn budget(&self) -> understudy_compiler::release::size::Budget {
        let d = understudy_compiler::release::size::Budget::default();
        understudy_compiler::release::size::Budget {
            raw: self.size_limit.unwrap_or(d.raw),
            gzip: self.gzip_limit,
        }
    }
}

#[derive(Debug, clap::Args)]
pub struct OriginArgs {
    /// Address to listen on (loopback only).
    #[arg(long, default_value = "127.0.0.1:8788")]
    pub listen: String,
    /// Fault script (JSON) to follow; see docs/origin.md.
    #[arg(long)]
    pub script: Option<PathBuf>,
    /// Latency added before every model answer, in milliseconds.
    #[arg(long, default_value_t = 0)]
    pub latency_ms: u64,
}

#[derive(Debug, clap::Args)]
pub struct DevArgs {
    pub policy: PathBuf,
    /// Port for the edge.
    #[arg(long, default_value_t = 8787)]
    pub port: u16,
    /// Port for the simulated origin.
    #[arg(long, default_value_t = 8788)]
    pub origin_port: u16,
    /// JSON file of KV entries to seed.
    #[arg(long)]
    pub seed: Option<PathBuf>,
    /// Seed a KV binding from a `wrangler kv bulk put` file, e.g. the one `understudy
    /// publish` wrote: `--kv CATEGORY_TOP=category_top.json` (repeatable).
    #[arg(long = "kv", value_name = "BINDING=FILE")]
    pub kv: Vec<String>,
    /// Run the demo (one healthy and one degraded answer) and exit.
    #[arg(long)]
    pub demo: bool,
    /// Keep the events outbox (Durable Objects) in this directory across restarts; a fresh
    /// temporary one by default.
    #[arg(long)]
    pub persist: Option<PathBuf>,
    /// Where the edge delivers events: a consumer of your own (an http or https URL), or
    /// `policy` for the policy's `[events.delivery] url`. By default the simulated consumer
    /// that `dev` starts, whose ledger shows what was committed.
    #[arg(long, value_name = "URL|policy")]
    pub events_url: Option<String>,
}

#[derive(Debug, clap::Args)]
pub struct TokenArgs {
    /// Policy whose [identity] issuer and audience the token is for.
    #[arg(long, required_unless_present_all = ["issuer", "audience"])]
    pub policy: Option<PathBuf>,
    /// The subject (`sub` claim), e.g. the user ID.
    #[arg(long)]
    pub sub: String,
    /// An extra string claim, NAME=VALUE (repeatable).
    #[arg(long = "claim", value_name = "NAME=VALUE")]
    pub claims: Vec<String>,
    /// Lifetime: `exp` is `--now` plus this (e.g. 30m, 1h, 1d).
    #[arg(long, default_value = "1h")]
    pub ttl: String,
    /// HMAC key (visible to other local users in the process list; prefer the others).
    #[arg(long, conflicts_with = "key_file")]
    pub key: Option<String>,
    /// File holding the HMAC key (one trailing newline is ignored).
    #[arg(long)]
    pub key_file: Option<PathBuf>,
    /// Issuer (`iss`); overrides the policy's.
    #[arg(long)]
    pub issuer: Option<String>,
    /// Audience (`aud`); overrides the policy's.
    #[arg(long)]
    pub audience: Option<String>,
    /// Issue the token as of this instant (RFC 3339) instead of now; also the policy's
    /// validation time.
    #[arg(long)]
    pub now: Option<String>,
}

#[derive(Debug, clap::Args)]
pub struct SimulateArgs {
    pub policy: PathBuf,
    /// Scenario file (TOML, see docs/scenarios.md).
    #[arg(long)]
    pub scenario: PathBuf,
    #[arg(long, value_enum, default_value = "human")]
    pub format: Format,
    /// [F-SCOPE] Spread the traffic over this many isolates (1..=20000) and run the breaker
    /// in both scopes side by side (overrides the scenario's `[fleet] isolates`).
    #[arg(long)]
    pub isolates: Option<u64>,
    /// With `--isolates`: how the traffic splits over them (overrides `[fleet] split`).
    #[arg(long, value_enum)]
    pub split: Option<SplitArg>,
    /// [F-SCOPE] With `--isolates`: spread the isolates round robin over the first R regions
    /// (1..=9: enam, weur, apac, wnam, eeur, sam, oc, me, afr), one coordinator each and the
    /// global one — as `drill --regions R` does (overrides `[fleet] regions`).
    #[arg(long, value_name = "R")]
    pub regions: Option<usize>,
    /// Write the engine's log line of every request here (NDJSON, as the Worker prints
    /// them): logs `understudy replay` reads.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["isolates", "split", "regions"])]
    pub logs: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ScopeArg {
    Isolate,
    Fleet,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SplitArg {
    Uniform,
    /// Zipf with the scenario's exponent (default 1): isolate k gets ∝ 1/(k+1)^s.
    Zipf,
}

#[derive(Debug, clap::Args)]
pub struct DrillArgs {
    /// The policy to drill (not with --rollout, which drills two releases of a registry).
    #[arg(required_unless_present = "rollout")]
    pub policy: Option<PathBuf>,
    /// Scenario file (TOML, see docs/scenarios.md); `[drill]` holds its limits.
    #[arg(long)]
    pub scenario: PathBuf,
    /// Write drill.json and timeline.svg into this directory.
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// Write the edge's log lines to this file (NDJSON, one per request, as the Worker
    /// prints them): what `understudy replay` reads.
    #[arg(long, value_name = "FILE")]
    pub logs: Option<PathBuf>,
    /// Shrink the incident's clock (0 < F <= 1): run length, time phases, breaker clocks and
    /// time limits scale by F; the arrival rate and latencies do not. Default 1; for an
    /// events scenario, the scenario's own scale (the retry schedule's clock).
    #[arg(long)]
    pub time_scale: Option<f64>,
    /// Events scenarios: the full run (`full_count` events, e.g. 10,000, and the scenario's
    /// `full_faults`), for NFR-RES-004's 10,000 replayed deliveries.
    #[arg(long)]
    pub full: bool,
    /// Events scenarios: this many events in the faulty phase instead of the scenario's.
    #[arg(long)]
    pub events: Option<u64>,
    /// Most requests in flight at once (connections).
    #[arg(long, default_value_t = 64)]
    pub concurrency: usize,
    /// Arrivals per second instead of the scenario's (the run keeps its duration). Above the
    /// scenario's rate, identity parameters get proportionally more values (more users, not
    /// the same users retrying: docs/scenarios.md).
    #[arg(long)]
    pub rate: Option<f64>,
    /// Per-request timeout in milliseconds.
    #[arg(long, default_value_t = 5000)]
    pub timeout_ms: u64,
    /// Prebuilt edge module directory (worker-build output); the checkout's by default.
    #[arg(long)]
    pub edge: Option<PathBuf>,
    /// Also replay the scenario through `simulate` and require every request to agree on
    /// status, reason and tier (the differential test of the two drivers of one engine).
    /// With `--isolates K`: `simulate --isolates K`, and each isolate's breaker must go
    /// through the same episodes at the same moments, within a stated tolerance.
    #[arg(long)]
    pub compare_simulate: bool,
    /// [F-SCOPE] Run this many copies of the Worker, each its own isolate in one workerd,
    /// sharing KV and the breaker's coordinator, the load spread uniformly (1..=64).
    #[arg(long, default_value_t = 1)]
    pub isolates: usize,
    /// [F-SCOPE] With `--isolates K`: spread the K isolates round robin over the first R
    /// regions (1..=9: enam, weur, apac, wnam, eeur, sam, oc, me, afr), each isolate's requests
    /// carrying its region's `cf`; one coordinator Durable Object per region and the global
    /// one. `--compare-simulate` runs `simulate --isolates K --regions R`.
    #[arg(long, value_name = "R", default_value_t = 1)]
    pub regions: usize,
    /// Run the breaker in this scope whatever the policy says (a rate breaker).
    #[arg(long, value_enum)]
    pub scope: Option<ScopeArg>,
    /// Find the highest arrival rate (req/s) at which the scenario keeps every invariant:
    /// bisect between LOW and HIGH (e.g. `50..2400`), one whole drill per probe.
    #[arg(long, value_name = "LOW..HIGH")]
    pub find_rate: Option<String>,
    /// Probes of `--find-rate` after its two bounds.
    #[arg(long, default_value_t = 6)]
    pub find_rate_steps: usize,
    /// Stop the edge's runtime (workerd, SIGSTOP) at AT after the first arrival for FOR, then
    /// continue it (SIGCONT): a stall of the host on purpose, to prove the witness and the
    /// verdicts (e.g. `4200ms+150ms`; repeatable; Linux).
    #[arg(long, value_name = "AT+FOR")]
    pub inject_stall: Vec<String>,
    #[arg(long, value_enum, default_value = "human")]
    pub format: Format,
    /// With --rollout: read the releases' policies as of this instant (RFC 3339) instead of
    /// now, so a release whose catalog snapshot is past its ceiling today can still be drilled
    /// as of when it was validated.
    #[arg(long)]
    pub now: Option<String>,
    #[command(flatten)]
    pub rollout: RolloutDrillArgs,
}

/// `drill --rollout OLD NEW`: a rollout against two real Workers (docs/rollout.md).
#[derive(Debug, clap::Args)]
pub struct RolloutDrillArgs {
    /// [R-GRADUAL] Roll release NEW out from OLD (IDs in --registry; `active` for the active
    /// one) behind a local front that splits traffic as gradual deployments do, with
    /// `understudy releases rollout` deciding the steps.
    #[arg(long, num_args = 2, value_names = ["OLD", "NEW"], requires = "registry", conflicts_with = "policy")]
    pub rollout: Option<Vec<String>>,
    /// The release registry holding OLD and NEW.
    #[arg(long, value_name = "DIR")]
    pub registry: Option<PathBuf>,
    /// The verdict the rollout must reach.
    #[arg(long, value_enum, requires = "rollout")]
    pub expect: Option<ExpectArg>,
    /// SIGKILL the controller once it has advanced past the first step, then resume it.
    #[arg(long, requires = "rollout")]
    pub kill_controller: bool,
    #[command(flatten)]
    pub slo: SloArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExpectArg {
    Advance,
    Rollback,
}

#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// The policy whose edge is measured.
    #[arg(default_value = "policies/recommendations.toml")]
    pub policy: PathBuf,
    /// Save the figures (JSON) here.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Sequential request pairs (edge, bare) on the healthy path.
    #[arg(long, default_value_t = 1000)]
    pub rounds: usize,
    /// Sequential requests with the model hung, per edge variant.
    #[arg(long, default_value_t = 200)]
    pub hung_rounds: usize,
    /// Sequential requests against a long-tail model, with and without hedging (each).
    #[arg(long, default_value_t = 400)]
    pub tail_rounds: usize,
    /// Connections of the healthy closed loop (a second one runs at 64).
    #[arg(long, default_value_t = 16)]
    pub concurrency: usize,
    /// Seconds of each closed-loop phase, split between the sides in alternating slices.
    #[arg(long, default_value_t = 9.0)]
    pub throughput_secs: f64,
    /// The simulated model's latency on the healthy path (seed 000's baseline: 25).
    #[arg(long, default_value_t = 25)]
    pub origin_latency_ms: u64,
    /// Prebuilt edge module directory; the checkout's by default.
    #[arg(long)]
    pub edge: Option<PathBuf>,
    /// Prebuilt bare Worker directory (scripts/build-edge.sh --bare); built when absent.
    #[arg(long)]
    pub bare: Option<PathBuf>,
    /// Another prebuilt edge directory, measured beside this one in one workerd: breaker off
    /// in the healthy closed loop, and embedded tiers only with the model hung (an A/B of two
    /// builds on the healthy and the degraded path).
    #[arg(long)]
    pub compare_edge: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "human")]
    pub format: Format,
}
