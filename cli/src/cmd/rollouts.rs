//! `understudy releases upload | rollout | status` (docs/rollout.md, ADR 012): a release
//! uploaded as a Workers version, rolled out gradually against the active one on the
//! fallback's own SLO, and what the registry records of it. `releases.rs` maps what these
//! return to exit codes (0 rolled out, 1 rolled back, 2 could not run, 3 aborted).

use std::io::Write;

use anyhow::{bail, Context as _, Result};

use crate::args::{Format, RolloutArgs, StatusArgs, UploadArgs};
use understudy_compiler::release::record::rfc3339;
use understudy_compiler::release::registry::Registry;
use understudy_compiler::release::rollout::cloudflare::driver::{self as cloudflare, Cloudflare};
use understudy_compiler::release::rollout::record::{self as rollout_record, RolloutRecord};
use understudy_compiler::release::rollout::replay as rollout_replay;
use understudy_compiler::release::rollout::run::{self as rollout_run, Start, Wall};
use understudy_compiler::release::rollout::{guard, preflight, progress, Phase};

/// `releases rollout`: runs the rollout to its end; how it ended (`None` for a rehearsal).
pub fn rollout(args: &RolloutArgs) -> Result<Option<Phase>> {
    let reg = args.registry.open("releases rollout")?;
    let named = |key: &str| args.slo.name(key);
    let slo = args.slo.over(policy_slo(&reg, &args.id)?);
    // The pre-flight, on every path and before any driver or network: the settings, the
    // releases, no rollout left unended (docs/rollout.md, "Misuse").
    if args.resume {
        // The record's own settings; flags would be ignored, so they are refused.
        if let Some(k) = SETTINGS.iter().find(|k| args.slo.given(k)) {
            bail!(
                "--resume continues the recorded rollout with its recorded settings; drop {}",
                named(k)
            );
        }
    } else {
        preflight::settings(&slo, &named)?;
    }
    let mut replayed = None;
    if !args.resume && !args.abort {
        let plan = preflight::new_rollout(
            &reg,
            &preflight::Ask {
                new: &args.id,
                old: args.from.as_deref(),
                slo: &slo,
                force: args.force,
                named: &named,
            },
        )?;
        if !args.replay.is_empty() {
            let mut check = preflight::replay(&reg, &plan.old, &plan.new, &args.replay, &slo)?;
            print!("{}", rollout_replay::human(&check, &plan.old, &plan.new));
            if check.verdict == rollout_replay::Verdict::Worse {
                if !args.force {
                    if !args.dry_run {
                        preflight::refuse(&reg, &plan, &slo, check, super::now_ms())?;
                    }
                    println!(
                        "the rollout of {} is refused: it replays worse than {} on the rollout's SLO; nothing was deployed{} (--force starts it anyway)",
                        plan.new,
                        plan.old,
                        if args.dry_run { "" } else { ", the evidence is in its record" }
                    );
                    return Ok(Some(Phase::Refused));
                }
                check.forced = true;
                println!(
                    "--force: the rollout starts although it replays worse; its record says so"
                );
            }
            replayed = Some(check);
        }
    }
    let mut driver: Box<dyn rollout_run::Driver> = match &args.front {
        Some(front) => Box::new(understudy_lab::rollout::front::Front::new(front)?),
        None => {
            let new = reg.resolve(&args.id)?;
            let recorded = rollout_record::read(&reg, &new).ok().flatten();
            let old = match (&args.from, recorded) {
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
                cf.rehearse(&slo, super::now_ms(), &mut super::stdout())?;
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
        Start::Abort {
            force: args.force,
            slo,
        }
    } else {
        Start::New {
            old: args.from.clone(),
            slo,
            force: args.force,
            replay: replayed,
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
    if let Some(dir) = &args.report {
        write_report(dir, &rec, None)?;
        // A closed stdout must not turn the rollout's decision into exit 0 (`main`'s quiet
        // end of a `println!` to a closed pipe): its exit code says how it ended.
        let _ = writeln!(std::io::stdout(), "report: {}", dir.display());
    }
    Ok(Some(rec.state.phase))
}

/// The settings, by their policy keys.
const SETTINGS: [&str; 7] = [
    "steps",
    "dwell",
    "min_answers",
    "degraded_margin",
    "unavailable_margin",
    "p95_margin",
    "max_holds",
];

/// `--report DIR`: the record as JSON and its timeline as a picture (with the host's stalls
/// a drill's witness saw).
pub fn write_report(
    dir: &std::path::Path,
    rec: &RolloutRecord,
    host: Option<&understudy_lab::rollout::plot::Host<'_>>,
) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    std::fs::write(dir.join("rollout.json"), serde_json::to_vec_pretty(rec)?)
        .with_context(|| format!("cannot write {}", dir.join("rollout.json").display()))?;
    let svg = understudy_lab::rollout::plot::render(rec, host).map_err(anyhow::Error::msg)?;
    std::fs::write(dir.join("rollout.svg"), svg)
        .with_context(|| format!("cannot write {}", dir.join("rollout.svg").display()))
}

/// `releases status`: the running (or last, or named) rollout, and any damaged record.
pub fn status(args: &StatusArgs) -> Result<()> {
    let reg = args.registry.open("releases status")?;
    let listing = rollout_record::list(&reg)?;
    let rec = match &args.id {
        Some(id) => {
            let id = reg.resolve(id)?;
            listing.records.iter().find(|r| r.new == id).cloned()
        }
        None => listing
            .records
            .iter()
            .find(|r| !r.finished())
            .or(listing.records.last())
            .cloned(),
    };
    let controller = guard::holder(&reg);
    let now = super::now_ms();
    let mut out = super::stdout();
    match args.format {
        Format::Json => {
            let damaged: Vec<_> = listing
                .damaged
                .iter()
                .map(|d| serde_json::json!({"id": d.id, "error": d.error, "way_out": d.way_out(&reg)}))
                .collect();
            let doc = serde_json::json!({
                "rollout": rec,
                "phase": rec.as_ref().map(|r| r.state.phase.word()),
                "ended": rec.as_ref().map(RolloutRecord::finished),
                "summary": rec.as_ref().map(RolloutRecord::summary),
                "started_at": rec.as_ref().map(|r| rfc3339(r.started_at_ms)),
                "updated_at": rec.as_ref().map(|r| rfc3339(r.updated_at_ms)),
                "next_judgement_at": rec.as_ref().and_then(|r| r.state.due.filter(|_| !r.finished())).map(rfc3339),
                "earliest_end_at": rec.as_ref().and_then(|r| progress::earliest_end(r, now)).map(rfc3339),
                "controller": controller.as_ref().map(|h| serde_json::json!({"pid": h.pid, "host": h.host, "since": h.since})),
                "damaged": damaged,
            });
            writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)?;
        }
        Format::Human => {
            for d in &listing.damaged {
                writeln!(
                    out,
                    "DAMAGED rollout record of {}: {}",
                    d.id,
                    d.way_out(&reg)
                )?;
            }
            match &rec {
                None => writeln!(out, "no rollout in {}", reg.root.display())?,
                Some(r) => show(&mut out, r, controller.as_ref(), now)?,
            }
        }
    }
    Ok(())
}

fn show(
    out: &mut dyn Write,
    r: &RolloutRecord,
    controller: Option<&understudy_compiler::release::registry::lock::Holder>,
    now: u64,
) -> std::io::Result<()> {
    writeln!(
        out,
        "rollout of {} from {} ({}): {}",
        r.new,
        r.old,
        r.driver,
        r.summary()
    )?;
    writeln!(
        out,
        "  started {}, last recorded {}",
        rfc3339(r.started_at_ms),
        rfc3339(r.updated_at_ms)
    )?;
    match (controller, r.finished()) {
        (Some(h), _) => writeln!(
            out,
            "  controller: running (process {} on {}, since {})",
            h.pid, h.host, h.since
        )?,
        (None, false) => writeln!(
            out,
            "  controller: NOT running — the rollout is stranded at its split; continue it with \
             `understudy releases rollout {} --resume` or revert it with `--abort`",
            r.new
        )?,
        (None, true) => {}
    }
    writeln!(
        out,
        "  steps {:?}%, dwell {}, at least {} answers each, margins: degraded share +{:.2}%, \
         no-tier 5xx share +{:.2}%, p95 +{:.0}%; at most {} holds",
        r.slo.steps,
        progress::span(r.slo.dwell_ms),
        r.slo.min_answers,
        r.slo.degraded_margin * 100.0,
        r.slo.unavailable_margin * 100.0,
        r.slo.p95_margin * 100.0,
        r.slo.max_holds
    )?;
    if !r.finished() {
        writeln!(
            out,
            "  now: {}",
            progress::heartbeat(r, now, progress::Answers::NotAsked)
        )?;
    }
    let deployed: Vec<String> = r
        .state
        .deployed
        .iter()
        .map(|d| format!("{}% at {}", d.new_percent, rfc3339(d.at)))
        .collect();
    if !deployed.is_empty() {
        writeln!(out, "  deployed: {}", deployed.join(", "))?;
    }
    for l in &r.state.log {
        writeln!(
            out,
            "  {} {}",
            rfc3339(l.at),
            progress::judgement(l, r.slo.min_answers)
                .split_once("  ")
                .map_or("", |x| x.1)
        )?;
        for reason in progress::verdict(&l.judgement).1 {
            writeln!(out, "      {reason}")?;
        }
    }
    if r.finished() {
        let end = r.state.deployed.last().map_or(r.updated_at_ms, |d| d.at);
        writeln!(
            out,
            "  ended {} after {}; the new release served: {}",
            rfc3339(end),
            progress::span(end.saturating_sub(r.started_at_ms)),
            progress::exposure(r, end)
        )?;
    }
    Ok(())
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
