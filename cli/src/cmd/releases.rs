//! `understudy releases add|list|diff|promote|rollback|verify --registry R`: the registry
//! of immutable releases (docs/releases.md) for CDN ops.
//!
//! Exit codes: 0 done, 1 refused input (an invalid policy or catalog, a module over the
//! size limit, a catalog past its ceiling without --force), 2 usage or I/O (an unknown
//! release, a tampered registry, a lock held) or, for `verify` and `repair`, a damaged
//! registry. Every refusal leaves `ACTIVE` as it was.

use std::process::ExitCode;

use anyhow::{bail, Context as _, Result};

use crate::args::{
    AddArgs, DeployArgs, DiffArgs, PromoteArgs, RegistryArg, ReleasesArgs, ReleasesCommand,
    RollbackArgs,
};
use crate::exit::Exit;
use understudy_compiler::dist::edge;
use understudy_compiler::release::ops::{self, RollbackArgs as OpsRollback};
use understudy_compiler::release::pipeline::{self, PolicySource, Request};
use understudy_compiler::release::record::Kind;
use understudy_compiler::release::registry::{self, LockOptions, Registry};
use understudy_compiler::release::rollout::cloudflare::driver as cloudflare;
use understudy_compiler::release::rollout::Phase;
use understudy_compiler::release::size;
use understudy_compiler::release::{diff, DEPLOY_SCRIPT};

impl RegistryArg {
    /// The registry, opened for `command` with the lock options of the flags.
    pub fn open(&self, command: &str) -> Result<Registry> {
        Ok(Registry::open(&self.registry)?.with_lock_options(self.lock_options(command)))
    }

    pub fn lock_options(&self, command: &str) -> LockOptions {
        LockOptions {
            wait: self.wait,
            command: command.to_string(),
            long: false,
        }
    }
}

pub fn run(args: ReleasesArgs) -> Result<ExitCode> {
    match args.command {
        ReleasesCommand::Add(a) => add(&a),
        ReleasesCommand::List(a) => super::listing::list(&a),
        ReleasesCommand::Diff(a) => diff_cmd(&a),
        ReleasesCommand::Promote(a) => promote(&a),
        ReleasesCommand::Rollback(a) => rollback(&a),
        ReleasesCommand::Upload(a) => {
            super::rollouts::upload(&a, now_ms()).map(|()| Exit::Ok.into())
        }
        ReleasesCommand::Rollout(a) => Ok(match super::rollouts::rollout(&a)? {
            None | Some(Phase::Done) => Exit::Ok,
            Some(Phase::Aborted | Phase::Aborting) => Exit::Aborted,
            Some(Phase::Refused) => Exit::ReplayWorse,
            Some(_) => Exit::RolledBack,
        }
        .into()),
        ReleasesCommand::Deploy(a) => deploy(&a),
        ReleasesCommand::Status(a) => super::rollouts::status(&a).map(|()| Exit::Ok.into()),
        ReleasesCommand::Verify(a) => verify(&a),
        ReleasesCommand::Repair(a) => repair(&a),
    }
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
        budget: args.size.budget(),
        publish: &args.publish,
    })?;
    eprint!("{}", baked.warnings);
    let reg = Registry::open_or_create(&args.registry.registry)?
        .with_lock_options(args.registry.lock_options("releases add"));
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
        "{} release {} ({} {}) in {}: module {}{}{}",
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
        baked
            .gzip_bytes
            .map(|g| format!(", {} gzipped", size::human(g)))
            .unwrap_or_default(),
        if p.promoted { " (active)" } else { "" }
    );
    println!(
        "deploy it with: {}",
        p.release.dir.join(DEPLOY_SCRIPT).display()
    );
    Ok(Exit::Ok.into())
}

fn diff_cmd(args: &DiffArgs) -> Result<ExitCode> {
    let reg = Registry::open(&args.registry.registry)?;
    let a = reg.load(&reg.resolve(&args.a)?)?;
    let b = reg.load(&reg.resolve(&args.b)?)?;
    let (ba, bb) = (a.bake()?, b.bake()?);
    print!("{}", diff::report(&a.record, &ba, &b.record, &bb));
    if !args.replay.is_empty() {
        // The judgement a rollout of B from A would make, with the policy's (or default)
        // rollout settings.
        let slo = super::rollouts::policy_slo(&reg, b.id())?;
        let check = understudy_compiler::release::rollout::preflight::replay(
            &reg,
            a.id(),
            b.id(),
            &args.replay,
            &slo,
        )?;
        print!(
            "\n{}",
            understudy_compiler::release::rollout::replay::human(&check, a.id(), b.id())
        );
    }
    Ok(Exit::Ok.into())
}

fn promote(args: &PromoteArgs) -> Result<ExitCode> {
    let now = super::parse_now(args.now.as_deref())?;
    let reg = args.registry.open("releases promote")?;
    let before = reg.active()?;
    let r = ops::promote(&reg, &args.id, now, args.force)?;
    println!(
        "active: {} ({} {}), was {}",
        r.id(),
        r.record.policy.file,
        r.record.policy.version,
        before.as_deref().unwrap_or("none")
    );
    Ok(Exit::Ok.into())
}

fn rollback(args: &RollbackArgs) -> Result<ExitCode> {
    let now = super::parse_now(args.now.as_deref())?;
    let reg = args.registry.open("releases rollback")?;
    let r = ops::rollback(
        &reg,
        &OpsRollback {
            to: args.to.as_deref(),
            with_its_catalog: args.with_its_catalog,
            force: args.force,
            now,
            budget: args.size.budget(),
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
    if args.deploy {
        deploy_at_100(&reg, &r.release, now)?;
    } else {
        println!(
            "deploy it (the version at 100%, no rebuild): understudy releases deploy {} --registry {}",
            r.release.id(),
            reg.root.display()
        );
    }
    drop(r.deployment);
    Ok(Exit::Ok.into())
}

use super::now_ms;

/// Deploys `release` on Cloudflare at 100% (`wrangler versions deploy`): at once when it has a
/// Workers version, after uploading it when it has none. The caller holds the deployment lock.
fn deploy_at_100(
    reg: &Registry,
    release: &understudy_compiler::release::registry::Release,
    _now: understudy_core::Millis,
) -> Result<()> {
    let id = release.id().to_string();
    let wrangler = cloudflare::Wrangler::from_env();
    let version = match understudy_compiler::release::versions::read(reg, &id)? {
        Some(u) if u.version_id.is_some() => u.version_id,
        _ => cloudflare::upload(reg, &id, &wrangler, false, now_ms())?.and_then(|u| u.version_id),
    }
    .ok_or_else(|| anyhow::anyhow!("release {id} has no Workers version after its upload"))?;
    let message = format!("understudy deployment of {id}");
    let deploy = understudy_compiler::release::rollout::cloudflare::deploy_args(
        &version, &version, 100, &message,
    );
    wrangler.run(&release.dir, &deploy).with_context(|| {
        format!(
            "the deployment of {id} failed; run it again: understudy releases deploy {id} \
             --registry {}",
            reg.root.display()
        )
    })?;
    println!("deployed: Workers version {version} ({id}) at 100%");
    Ok(())
}

/// `releases deploy ID`: the release's Workers version at 100%, under the deployment lock and
/// never over a rollout that has not ended.
fn deploy(args: &DeployArgs) -> Result<ExitCode> {
    let reg = args.registry.open("releases deploy")?;
    let _deployment = understudy_compiler::release::rollout::guard::take(
        &reg,
        "releases deploy",
        args.registry.wait,
        false,
    )?;
    understudy_compiler::release::rollout::guard::settled(&reg, "releases deploy")?;
    let id = reg.resolve(&args.id)?;
    let release = reg.load(&id)?;
    deploy_at_100(&reg, &release, understudy_core::Millis(now_ms()))?;
    if reg.active()?.as_deref() != Some(id.as_str()) {
        eprintln!(
            "note: ACTIVE names {}, not {id}; `understudy releases promote {id}` makes the registry say what serves",
            reg.active()?.unwrap_or_else(|| "nothing".into())
        );
    }
    Ok(Exit::Ok.into())
}

fn print_findings(report: &registry::check::Report) {
    for f in &report.findings {
        match &f.fix {
            Ok(fix) => println!("  problem: {}\n    repair: {fix}", f.problem),
            Err(manual) => println!(
                "  problem: {}\n    repair cannot fix it: {manual}",
                f.problem
            ),
        }
    }
}

fn verify(args: &RegistryArg) -> Result<ExitCode> {
    let reg = args.open("releases verify")?;
    let _lock = reg.lock_to_read()?;
    let mut report = registry::check::check(&reg, now_ms())?;
    // The deployment records (rollouts/, versions/) beside the releases.
    report
        .findings
        .extend(understudy_compiler::release::records::findings(&reg)?);
    for r in &report.releases {
        match r.problems.first() {
            None => println!("ok       {}", r.id),
            Some(p) => println!("DAMAGED  {}: {p}", r.id),
        }
    }
    println!(
        "{} release(s), {} damaged; history: {} entr(ies); active: {}",
        report.releases.len(),
        report.damaged(),
        report.history_entries,
        report.active.as_deref().unwrap_or("none")
    );
    if report.is_clean() {
        println!("registry {}: ok", reg.root.display());
        return Ok(Exit::Ok.into());
    }
    println!(
        "registry {}: {} problem(s)",
        reg.root.display(),
        report.findings.len()
    );
    print_findings(&report);
    if report.findings.iter().any(|f| f.fix.is_ok()) {
        println!(
            "run `understudy releases repair --registry {}` to fix what it can",
            reg.root.display()
        );
    }
    Ok(Exit::RegistryDamaged.into())
}

fn repair(args: &RegistryArg) -> Result<ExitCode> {
    let reg = args.open("releases repair")?;
    let _lock = reg.lock_to_read()?;
    let records_before = understudy_compiler::release::records::findings(&reg)?;
    let mut r = registry::repair::repair(&reg, now_ms())?;
    r.done
        .extend(understudy_compiler::release::records::repair(&reg)?);
    r.before.findings.extend(records_before);
    r.after
        .findings
        .extend(understudy_compiler::release::records::findings(&reg)?);
    if r.before.is_clean() {
        println!("registry {}: ok, nothing to repair", reg.root.display());
        return Ok(Exit::Ok.into());
    }
    println!(
        "registry {}: {} problem(s) found",
        reg.root.display(),
        r.before.findings.len()
    );
    for d in &r.done {
        println!("  did: {d}");
    }
    if r.after.is_clean() {
        println!(
            "repaired; active: {}",
            r.after.active.as_deref().unwrap_or("none")
        );
        return Ok(Exit::Ok.into());
    }
    println!("could not fix {} problem(s):", r.after.findings.len());
    print_findings(&r.after);
    Ok(Exit::RegistryDamaged.into())
}
