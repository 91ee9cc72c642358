//! `understudy drill POLICY --scenario FILE [--report DIR] [--time-scale F]`: the scenario
//! against the real edge in workerd (see [`understudy_lab::drill`]). Prints the same table as
//! `simulate`, then every invariant's verdict and the host's witness. Exit 0 when every
//! checked invariant holds; 1 when one breaks and the edge is blamed (named on stderr with the
//! answers it blames), `--find-rate` finds no sustained rate, or the policy is invalid; 3 when
//! every broken invariant is inconclusive (stalls of the host explain the answers that broke
//! it); 2 on usage or I/O errors.

use crate::exit::Exit;
use std::process::ExitCode;
use std::time::Duration;

use crate::args::{DrillArgs, Format};
use understudy_lab::drill;

pub fn run(mut args: DrillArgs) -> anyhow::Result<ExitCode> {
    if args.rollout.rollout.is_some() {
        return rollout(&args);
    }
    let s = &args.rollout.slo;
    if s.steps.is_some()
        || s.dwell.is_some()
        || s.min_answers.is_some()
        || s.degraded_margin.is_some()
        || s.unavailable_margin.is_some()
        || s.p95_margin.is_some()
        || s.max_holds.is_some()
    {
        anyhow::bail!("--steps, --dwell, --min-answers, the margins and --max-holds go with --rollout OLD NEW");
    }
    if args.now.is_some() {
        anyhow::bail!("--now goes with --rollout OLD NEW: a policy drill reads its policy with the inventory snapshot stamped as taken now, so it is never stale");
    }
    let Some(policy) = args.policy.take() else {
        anyhow::bail!("name the policy to drill (or --rollout OLD NEW --registry DIR)");
    };
    let text = std::fs::read_to_string(&args.scenario).unwrap_or_default();
    if understudy_lab::events::scenario::EventsScenario::is_events(&text) {
        return events(args, policy);
    }
    let opts = drill::Options {
        policy,
        scenario: args.scenario,
        report: args.report,
        time_scale: args.time_scale.unwrap_or(1.0),
        concurrency: args.concurrency,
        rate: args.rate,
        edge: args.edge,
        timeout: Duration::from_millis(args.timeout_ms.clamp(1, 60_000)),
        compare_simulate: args.compare_simulate,
        isolates: args.isolates,
        regions: args.regions,
        fleet_scope: args.scope.map(|s| s == crate::args::ScopeArg::Fleet),
        inject_stalls: args
            .inject_stall
            .iter()
            .map(|s| drill::stall::Planned::parse(s))
            .collect::<anyhow::Result<_>>()?,
        logs: args.logs,
    };
    if !(1..=64).contains(&opts.isolates) {
        anyhow::bail!("--isolates {}: a whole number from 1 to 64", opts.isolates);
    }
    if opts.regions != 1 {
        // The same checks as `simulate --regions` (1..=9, no more regions than isolates).
        understudy_compiler::simulate::fleet::FleetSpec::uniform(opts.isolates as u64)
            .with_regions(opts.regions)
            .map_err(|e| anyhow::anyhow!("{e} (--isolates {})", opts.isolates))?;
    }
    if let Some(range) = &args.find_rate {
        let (lo, hi) = range
            .split_once("..")
            .and_then(|(a, b)| Some((a.trim().parse::<f64>().ok()?, b.trim().parse::<f64>().ok()?)))
            .filter(|(a, b)| *a > 0.0 && a < b && *b <= 1_000_000.0)
            .ok_or_else(|| {
                anyhow::anyhow!("--find-rate {range}: write LOW..HIGH in req/s, e.g. 50..2400")
            })?;
        let found = drill::rate::find(&opts, lo, hi, args.find_rate_steps.clamp(1, 20))?;
        match args.format {
            Format::Json => println!("{}", serde_json::to_string_pretty(&found)?),
            Format::Human => {
                for p in &found.probes {
                    println!(
                        "{:>8.0} req/s  p95 {:>7}  {}",
                        p.rate,
                        p.p95_ms.map_or("?".into(), |v| format!("{v:.1} ms")),
                        if p.passed {
                            "held".to_string()
                        } else {
                            format!("broke {}", p.broken.join(", "))
                        }
                    );
                }
                match found.sustained_rps {
                    Some(r) => println!("sustained: {r:.0} req/s (time scale {})", opts.time_scale),
                    None => println!("not sustained even at {lo:.0} req/s"),
                }
            }
        }
        if let Some(dir) = &opts.report {
            std::fs::create_dir_all(dir)?;
            std::fs::write(
                dir.join("find-rate.json"),
                serde_json::to_vec_pretty(&found)?,
            )?;
        }
        return Ok(if found.sustained_rps.is_some() {
            Exit::Ok.into()
        } else {
            Exit::InvariantBroken.into()
        });
    }
    let Some(outcome) = drill::run(&opts)? else {
        return Ok(Exit::Invalid.into()); // the policy's diagnostics were printed
    };
    if let Some(dir) = &opts.report {
        drill::write_report(dir, &outcome)?;
    }
    match args.format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&outcome.json)?),
        Format::Human => {
            print!("{}", outcome.table);
            println!("\nInvariants:");
            for v in &outcome.verdicts {
                print_verdict(v);
            }
            println!("\n{}", outcome.witness_line());
            if !outcome.disagreements.is_empty() {
                println!("\nFirst disagreements with simulate (status reason tier):");
                for d in &outcome.disagreements {
                    println!("  {d}");
                }
            }
            if let Some(dir) = &opts.report {
                println!("\nReport: {} (drill.json, timeline.svg)", dir.display());
            }
        }
    }
    for a in &outcome.alerts {
        eprintln!("ALERT {a}: recovery took longer than the stall limit after the fault's end");
    }
    let broken = outcome.broken();
    if !broken.is_empty() {
        for v in &broken {
            eprintln!("error: invariant {} broken: {}", v.name, v.detail);
            for o in &v.blamed {
                eprintln!("  blamed on the edge: {}", o.what);
            }
        }
        return Ok(Exit::InvariantBroken.into());
    }
    let inconclusive = outcome.inconclusive();
    if inconclusive.is_empty() {
        return Ok(Exit::Ok.into());
    }
    for v in &inconclusive {
        eprintln!(
            "inconclusive: invariant {} broken only by answers that stalls of the host explain: {}",
            v.name, v.detail
        );
    }
    Ok(Exit::Inconclusive.into())
}

/// One verdict: its mark (`ok`, `FAIL`, `??` inconclusive, `--` not checked), name and
/// detail, then what it blames and what it excused.
fn print_verdict(v: &drill::check::Verdict) {
    use drill::check::Judgement;
    let mark = match v.judgement {
        Judgement::Held => "ok  ",
        Judgement::Failed => "FAIL",
        Judgement::Inconclusive => "??  ",
        Judgement::NotChecked => "--  ",
    };
    println!("  {mark} {:<22} {}", v.name, v.detail);
    for o in &v.blamed {
        println!("       blamed: {}", o.what);
    }
    if v.blamed_count > v.blamed.len() {
        println!(
            "       blamed: … and {} more",
            v.blamed_count - v.blamed.len()
        );
    }
    for e in v.excused.iter().take(5) {
        let stalls: Vec<String> = e
            .stalls
            .iter()
            .map(|(a, b, by)| format!("{a:.0}–{b:.0} ms ({by})"))
            .collect();
        println!(
            "       excused: {} — {:.0} ms of stall: {}",
            e.offender.what,
            e.covered_ms,
            stalls.join(", ")
        );
    }
    if v.excused_count > 5 {
        println!("       excused: … and {} more", v.excused_count - 5);
    }
}

/// An events scenario (`kind = "events"`): the events drill, its figures and verdicts.
fn events(args: DrillArgs, policy: std::path::PathBuf) -> anyhow::Result<ExitCode> {
    use understudy_lab::events::drill as ev;
    let opts = ev::Options {
        policy,
        scenario: args.scenario,
        report: args.report,
        time_scale: args.time_scale,
        full: args.full,
        events: args.events,
        edge: args.edge,
    };
    let outcome = ev::run(&opts)?;
    match args.format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&outcome.json)?),
        Format::Human => {
            for l in &outcome.lines {
                println!("{l}");
            }
            println!("\nInvariants:");
            for v in &outcome.verdicts {
                let mark = match v.ok {
                    Some(true) => "ok  ",
                    Some(false) => "FAIL",
                    None => "--  ",
                };
                println!("  {mark} {:<26} {}", v.name, v.detail);
            }
            if let Some(dir) = &opts.report {
                println!("\nReport: {}", dir.join("events-drill.json").display());
            }
        }
    }
    let broken = outcome.broken();
    if broken.is_empty() {
        Ok(Exit::Ok.into())
    } else {
        for v in &broken {
            eprintln!("error: invariant {} broken: {}", v.name, v.detail);
        }
        Ok(Exit::InvariantBroken.into())
    }
}

/// `understudy drill --rollout OLD NEW --registry R --scenario FILE`.
fn rollout(args: &DrillArgs) -> anyhow::Result<ExitCode> {
    use understudy_lab::rollout::drill::{self as rd, Expect};
    let r = &args.rollout;
    let (Some(pair), Some(registry)) = (&r.rollout, &r.registry) else {
        anyhow::bail!("--rollout OLD NEW needs --registry DIR");
    };
    let [old, new] = pair.as_slice() else {
        anyhow::bail!("--rollout takes two release IDs: OLD NEW");
    };
    let reg = understudy_compiler::release::registry::Registry::open(registry)?;
    let slo = r.slo.over(super::rollouts::policy_slo(&reg, new)?);
    // The same pre-flight as `releases rollout`'s, flags named as given.
    understudy_compiler::release::rollout::preflight::settings(&slo, &|k| r.slo.name(k))?;
    let now = args
        .now
        .as_deref()
        .map(|n| super::parse_now(Some(n)))
        .transpose()?;
    let opts = rd::Options {
        now,
        registry: registry.clone(),
        old: (old != "active").then(|| old.clone()),
        new: new.clone(),
        scenario: args.scenario.clone(),
        rate: args.rate,
        concurrency: args.concurrency,
        timeout: std::time::Duration::from_millis(args.timeout_ms.clamp(1, 60_000)),
        slo,
        expect: r.expect.map(|e| match e {
            crate::args::ExpectArg::Advance => Expect::Advance,
            crate::args::ExpectArg::Rollback => Expect::RollBack,
        }),
        kill_controller: r.kill_controller,
        exe: std::env::current_exe()?,
    };
    let o = rd::run(&opts)?;
    if let Some(dir) = &args.report {
        let host = understudy_lab::rollout::plot::Host {
            traffic_started_at_ms: o.traffic_started_at_ms,
            stalls: &o.stalls,
        };
        super::rollouts::write_report(dir, &o.record, Some(&host))?;
        // The drill's outcome (its checks, the front's deployments) over the record's JSON.
        std::fs::write(dir.join("rollout.json"), serde_json::to_vec_pretty(&o)?)?;
    }
    match args.format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&o)?),
        Format::Human => {
            println!(
                "\nrollout {} → {} at {:.0} req/s: {}; {} answers ({} old, {} new, {} unanswered)",
                o.old,
                o.new,
                o.rate_rps,
                o.record.summary(),
                o.answers,
                o.old_answers,
                o.new_answers,
                o.unanswered
            );
            let steps: Vec<String> = o
                .deployments
                .iter()
                .map(|(at, p)| format!("{p}% at +{:.1}s", at / 1000.0))
                .collect();
            println!("deployments: {}", steps.join(", "));
            if let Some(e) = &o.exposure {
                println!(
                    "exposure of the rolled-back release: {:.2} s (bound {:.2} s), {} of {} answers ({:.1}%)",
                    e.seconds,
                    e.bound_seconds,
                    e.new_answers,
                    e.answers,
                    100.0 * e.share
                );
            }
            println!("\nChecks:");
            for c in &o.checks {
                use understudy_lab::drill::check::blame::Judgement;
                println!(
                    "  {} {:<18} {}",
                    match c.judgement {
                        Judgement::Failed => "FAIL",
                        Judgement::Inconclusive => "??  ",
                        _ => "ok  ",
                    },
                    c.name,
                    c.detail
                );
            }
        }
    }
    let broken = o.broken();
    if !broken.is_empty() {
        for c in &broken {
            eprintln!("error: invariant {} broken: {}", c.name, c.detail);
            for b in &c.blamed {
                eprintln!("  blamed on the edge: {}", b.what);
            }
        }
        return Ok(Exit::InvariantBroken.into());
    }
    let inconclusive = o.inconclusive();
    if inconclusive.is_empty() {
        return Ok(Exit::Ok.into());
    }
    for c in &inconclusive {
        eprintln!(
            "inconclusive: invariant {} broken only by answers that stalls of the host explain: {}",
            c.name, c.detail
        );
    }
    Ok(Exit::Inconclusive.into())
}
