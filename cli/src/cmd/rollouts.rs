//! `understudy releases upload | rollout | status` (docs/rollout.md, ADR 012): a release
//! uploaded as a Workers version, rolled out gradually against the active one on the
//! fallback's own SLO, and what the registry records of it. `releases.rs` maps what these
//! return to exit codes (0 rolled out, 1 rolled back, 2 could not run).

use anyhow::Result;

use crate::args::{Format, RolloutArgs, StatusArgs, UploadArgs};
use understudy_compiler::release::registry::Registry;
use understudy_compiler::release::rollout::cloudflare::driver::{self as cloudflare, Cloudflare};
use understudy_compiler::release::rollout::record::{self as rollout_record, RolloutRecord};
use understudy_compiler::release::rollout::run::{self as rollout_run, Start, Wall};
use understudy_compiler::release::rollout::{Judgement, Phase};

/// `releases rollout`: runs the rollout to its end; how it ended (`None` for a rehearsal).
pub fn rollout(args: &RolloutArgs) -> Result<Option<Phase>> {
    let reg = args.registry.open("releases rollout")?;
    let mut driver: Box<dyn rollout_run::Driver> = match &args.front {
        Some(front) => Box::new(understudy_lab::rollout::front::Front::new(front)?),
        None => {
            let new = reg.resolve(&args.id)?;
            let old = match (&args.from, rollout_record::read(&reg, &new)?) {
                (Some(o), _) => o.clone(),
                // --resume / --abort: the recorded rollout's old release.
                (None, Some(r)) if args.resume || args.abort => r.old,
                (None, _) => reg.active()?.ok_or_else(|| {
                    anyhow::anyhow!(
                        "{} has no active release; name the old one with --from ID",
                        reg.root.display()
                    )
                })?,
            };
            let mut cf = Cloudflare::new(&reg, &old, &new, args.dry_run)?;
            if args.dry_run {
                // A rehearsal: nothing deployed, nothing recorded.
                let slo = args.slo.over(policy_slo(&reg, &new)?);
                cf.rehearse(&slo, super::now_ms(), &mut std::io::stdout())?;
                println!(
                    "rehearsed the rollout of {new} from {old}: nothing was deployed or recorded"
                );
                return Ok(None);
            }
            Box::new(cf)
        }
    };
    let start = if args.resume {
        Start::Resume
    } else if args.abort {
        Start::Abort
    } else {
        Start::New {
            old: args.from.clone(),
            slo: args.slo.over(policy_slo(&reg, &args.id)?),
        }
    };
    let rec = rollout_run::run(
        &reg,
        &args.id,
        start,
        driver.as_mut(),
        &mut Wall,
        &mut std::io::stdout(),
    )?;
    Ok(Some(rec.state.phase))
}

/// `releases status`: the running (or last, or named) rollout.
pub fn status(args: &StatusArgs) -> Result<()> {
    let reg = args.registry.open("releases status")?;
    let rec = match &args.id {
        Some(id) => {
            let id = reg.resolve(id)?;
            rollout_record::read(&reg, &id)?
        }
        None => match rollout_record::running(&reg)? {
            Some(r) => Some(r),
            None => rollout_record::all(&reg)?.into_iter().last(),
        },
    };
    match args.format {
        Format::Json => println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({ "rollout": rec }))?
        ),
        Format::Human => match &rec {
            None => println!("no rollout in {}", reg.root.display()),
            Some(r) => show(r),
        },
    }
    Ok(())
}

fn show(r: &RolloutRecord) {
    println!(
        "rollout of {} from {} ({}): {}",
        r.new,
        r.old,
        r.driver,
        r.summary()
    );
    println!(
        "  steps {:?}%, dwell {:.1} s, at least {} answers each, margins: degraded {}, no-tier 5xx {}, p95 {}%; at most {} holds",
        r.slo.steps,
        r.slo.dwell_ms as f64 / 1000.0,
        r.slo.min_answers,
        r.slo.degraded_margin,
        r.slo.unavailable_margin,
        r.slo.p95_margin * 100.0,
        r.slo.max_holds
    );
    for l in &r.state.log {
        let (word, reasons) = match &l.judgement {
            Judgement::Advance { reasons } => ("advance", reasons),
            Judgement::Hold { reasons } => ("hold", reasons),
            Judgement::RollBack { reasons } => ("roll back", reasons),
        };
        println!(
            "  at {}%: {word} (old {} answers, new {})",
            l.step, l.evidence.old.answers, l.evidence.new.answers
        );
        for reason in reasons {
            println!("      {reason}");
        }
    }
}

/// `releases upload`.
pub fn upload(args: &UploadArgs, now_ms: u64) -> Result<()> {
    let reg = args.registry.open("releases upload")?;
    let wrangler = cloudflare::Wrangler::from_env();
    match cloudflare::upload(&reg, &args.id, &wrangler, args.dry_run, now_ms)? {
        None => println!(
            "{}: wrangler checked the upload (--dry-run); nothing was uploaded",
            args.id
        ),
        Some(u) => println!(
            "{}: Workers version {} of {}",
            u.release,
            u.version_id.as_deref().unwrap_or("?"),
            u.worker
        ),
    }
    Ok(())
}

/// The rollout SLO a release's own policy sets (its `[rollout]` table), else the defaults.
pub fn policy_slo(reg: &Registry, id: &str) -> Result<understudy_compiler::release::rollout::Slo> {
    let id = reg.resolve(id)?;
    let rel = reg.load(&id)?;
    let path = rel.source_path(&rel.record.sources.policy);
    let loaded =
        understudy_compiler::load::load_policy(&path, understudy_core::Millis(super::now_ms()));
    Ok(loaded.rollout.unwrap_or_default())
}
