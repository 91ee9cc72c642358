//! `understudy releases add|list|diff|promote|rollback|verify --registry R`: the registry
//! of immutable releases (docs/releases.md) for CDN ops.
//!
//! Exit codes: 0 done, 1 refused input (an invalid policy or catalog, a module over the
//! size limit, a catalog past its ceiling without --force), 2 usage or I/O (an unknown
//! release, a tampered registry, a lock held). Every refusal leaves `ACTIVE` as it was.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Result};
use clap::Subcommand;
use serde_json::json;

use crate::args::Format;
use understudy_compiler::dist::edge;
use understudy_compiler::release::freshness::Freshness;
use understudy_compiler::release::ops::{self, RollbackArgs as OpsRollback};
use understudy_compiler::release::pipeline::{self, PolicySource, Request};
use understudy_compiler::release::record::Kind;
use understudy_compiler::release::registry::Registry;
use understudy_compiler::release::size::{self, parse_limit};
use understudy_compiler::release::{diff, Invalid, DEPLOY_SCRIPT};

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
    /// Check every release's files against its release.json; exit 2 if any was tampered with.
    Verify(RegistryArg),
}

#[derive(Debug, clap::Args)]
pub struct RegistryArg {
    /// The registry directory.
    #[arg(long, value_name = "DIR")]
    pub registry: PathBuf,
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
    /// Refuse a module whose gzipped size is over this (`free` = 3MiB, `paid` = 10MiB).
    #[arg(long, default_value = "3MiB", value_parser = parse_limit)]
    pub size_limit: u64,
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
    #[arg(long, default_value = "3MiB", value_parser = parse_limit)]
    pub size_limit: u64,
}

/// Turns a refusal ([`Invalid`]) into exit 1 with its diagnostics; other errors go on to
/// `main` (exit 2).
pub fn exit_code(result: Result<ExitCode>) -> Result<ExitCode> {
    match result {
        Ok(code) => Ok(code),
        Err(e) => match e.downcast::<Invalid>() {
            Ok(inv) => {
                eprint!("{}", inv.rendered);
                eprintln!("error: {}", inv.message);
                Ok(ExitCode::from(1))
            }
            Err(e) => Err(e),
        },
    }
}

pub fn run(args: ReleasesArgs) -> Result<ExitCode> {
    exit_code(match args.command {
        ReleasesCommand::Add(a) => add(&a),
        ReleasesCommand::List(a) => list(&a),
        ReleasesCommand::Diff(a) => diff_cmd(&a),
        ReleasesCommand::Promote(a) => promote(&a),
        ReleasesCommand::Rollback(a) => rollback(&a),
        ReleasesCommand::Verify(a) => verify(&a),
    })
}

fn add(args: &AddArgs) -> Result<ExitCode> {
    let now = super::parse_now(args.now.as_deref())?;
    if !args.policy.is_file() {
        bail!(
            "policy file {} does not exist or is not a file",
            args.policy.display()
        );
    }
    let edge = edge::locate(args.edge.as_deref())?;
    let baked = pipeline::bake(&Request {
        policy: PolicySource::File(args.policy.clone()),
        catalog: None,
        edge: &edge,
        now,
        size_limit: args.size_limit,
    })?;
    eprint!("{}", baked.warnings);
    let reg = Registry::open_or_create(&args.registry.registry)?;
    let parent = reg.active()?;
    let note = format!("build: {}", args.policy.display());
    let p = ops::publish(
        &reg,
        &baked,
        Kind::Build,
        parent.as_deref(),
        &note,
        now,
        args.promote,
    )?;
    let m = &baked.built.manifest;
    println!(
        "{} release {} ({} {}) in {}: module {} raw, {} gzipped{}",
        if p.existed {
            "kept existing"
        } else {
            "published"
        },
        p.release.id(),
        m.policy.file,
        m.policy.version,
        reg.root.display(),
        size::human(m.module.bytes),
        size::human(m.module.gzip_bytes),
        if p.promoted { " (active)" } else { "" }
    );
    println!(
        "deploy it with: {}",
        p.release.dir.join(DEPLOY_SCRIPT).display()
    );
    Ok(ExitCode::SUCCESS)
}

fn list(args: &ListArgs) -> Result<ExitCode> {
    let now = super::parse_now(args.now.as_deref())?;
    let reg = Registry::open(&args.registry.registry)?;
    let active = reg.active()?;
    let mut rows = Vec::new();
    let mut damaged = Vec::new();
    for id in reg.ids()? {
        match reg.load(&id) {
            Ok(r) => rows.push(r),
            Err(e) => damaged.push((id, format!("{e:#}"))),
        }
    }
    rows.sort_by(|a, b| {
        (a.record.created_at_ms, &a.record.id).cmp(&(b.record.created_at_ms, &b.record.id))
    });
    match args.format {
        Format::Json => {
            let releases: Vec<_> = rows
                .iter()
                .map(|r| {
                    let f = Freshness::of(&r.record, now);
                    json!({
                        "id": r.record.id,
                        "active": active.as_deref() == Some(r.id()),
                        "kind": r.record.kind,
                        "service": r.record.service,
                        "policy": r.record.policy,
                        "created_at": r.record.created_at,
                        "validated_at": r.record.validated_at,
                        "catalog": r.record.catalog,
                        "catalog_age_ms": f.map(|f| f.snapshot_age_ms),
                        "catalog_stale": f.map(|f| f.stale()),
                        "module": r.record.module,
                        "parent": r.record.parent,
                        "note": r.record.note,
                    })
                })
                .collect();
            let damaged: Vec<_> = damaged
                .iter()
                .map(|(id, e)| json!({"id": id, "error": e}))
                .collect();
            let doc = json!({"active": active, "releases": releases, "damaged": damaged});
            println!("{}", serde_json::to_string_pretty(&doc)?);
        }
        Format::Human => {
            println!(
                "registry {}: {} release(s), active: {}",
                reg.root.display(),
                rows.len() + damaged.len(),
                active.as_deref().unwrap_or("none")
            );
            println!(
                "  {:<14}  {:<8}  {:<16}  {:<20}  {:<20}  {:>6}  {:<34}  NOTE",
                "ID", "KIND", "POLICY", "CREATED", "VALIDATED", "ITEMS", "CATALOG (snapshot age)"
            );
            for r in &rows {
                let rec = &r.record;
                let mark = if active.as_deref() == Some(r.id()) {
                    "*"
                } else {
                    " "
                };
                let catalog = match Freshness::of(rec, now) {
                    Some(f) if f.stale() => format!("STALE {}", f.describe()),
                    Some(f) => f.describe(),
                    None => "no catalog".into(),
                };
                println!(
                    "{mark} {:<14}  {:<8}  {:<16}  {:<20}  {:<20}  {:>6}  {:<34}  {}",
                    rec.id,
                    rec.kind.as_str(),
                    rec.policy.version,
                    rec.created_at,
                    rec.validated_at,
                    rec.catalog.as_ref().map_or(0, |c| c.items),
                    catalog,
                    rec.note
                );
            }
            for (id, e) in &damaged {
                let mark = if active.as_deref() == Some(id.as_str()) {
                    "*"
                } else {
                    " "
                };
                println!("{mark} {id:<14}  DAMAGED: {e}");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn diff_cmd(args: &DiffArgs) -> Result<ExitCode> {
    let reg = Registry::open(&args.registry.registry)?;
    let a = reg.load(&reg.resolve(&args.a)?)?;
    let b = reg.load(&reg.resolve(&args.b)?)?;
    let (ba, bb) = (a.bake()?, b.bake()?);
    print!("{}", diff::report(&a.record, &ba, &b.record, &bb));
    Ok(ExitCode::SUCCESS)
}

fn promote(args: &PromoteArgs) -> Result<ExitCode> {
    let now = super::parse_now(args.now.as_deref())?;
    let reg = Registry::open(&args.registry.registry)?;
    let before = reg.active()?;
    let r = ops::promote(&reg, &args.id, now, args.force)?;
    println!(
        "active: {} ({} {}), was {}",
        r.id(),
        r.record.policy.file,
        r.record.policy.version,
        before.as_deref().unwrap_or("none")
    );
    Ok(ExitCode::SUCCESS)
}

fn rollback(args: &RollbackArgs) -> Result<ExitCode> {
    let now = super::parse_now(args.now.as_deref())?;
    let reg = Registry::open(&args.registry.registry)?;
    let r = ops::rollback(
        &reg,
        &OpsRollback {
            to: args.to.as_deref(),
            with_its_catalog: args.with_its_catalog,
            force: args.force,
            now,
            size_limit: args.size_limit,
        },
    )?;
    eprint!("{}", r.warnings);
    if r.repaired {
        println!(
            "rolled back from {} to the policy of {} ({}) with the current catalog: {} release {}",
            r.from,
            r.target,
            r.release.record.policy.version,
            if r.existed { "existing" } else { "new" },
            r.release.id()
        );
    } else {
        println!("rolled back from {} to {} as it was", r.from, r.target);
    }
    println!("active: {}", r.release.id());
    println!(
        "deploy it with: {}",
        r.release.dir.join(DEPLOY_SCRIPT).display()
    );
    Ok(ExitCode::SUCCESS)
}

fn verify(args: &RegistryArg) -> Result<ExitCode> {
    let reg = Registry::open(&args.registry)?;
    let active = reg.active()?;
    let mut bad = 0;
    let ids = reg.ids()?;
    for id in &ids {
        match reg.load(id).and_then(|r| r.bake().map(|b| (r, b))) {
            Ok((r, b)) if b.release_id == r.record.id => println!("ok       {id}"),
            Ok((_, b)) => {
                bad += 1;
                println!(
                    "DAMAGED  {id}: its module carries the bake of {}",
                    b.release_id
                );
            }
            Err(e) => {
                bad += 1;
                println!("DAMAGED  {id}: {e:#}");
            }
        }
    }
    println!(
        "{} release(s), {bad} damaged; active: {}",
        ids.len(),
        active.as_deref().unwrap_or("none")
    );
    Ok(if bad > 0 {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    })
}
