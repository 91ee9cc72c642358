//! `understudy releases rollout ID` and `understudy releases status`: a release rolled out
//! gradually against the active one and judged on the fallback's own SLO (ADR 012,
//! docs/rollout.md); and what the registry records of it.
//!
//! Exit codes: 0 rolled out to 100% (or, for `status`, shown); 1 rolled back — the new
//! release was judged worse, or held too long; 2 usage or I/O (an unknown release, another
//! rollout running, the front unreachable: the record keeps the step, `--resume` goes on).

use std::process::ExitCode;

use anyhow::{bail, Result};

use crate::args::{Format, RolloutArgs, StatusArgs};
use crate::exit::Exit;
use understudy_compiler::release::rollout::record::{self, RolloutRecord};
use understudy_compiler::release::rollout::run::{self, Start, Wall};
use understudy_compiler::release::rollout::{Judgement, Phase, Slo};

impl RolloutArgs {
    /// The SLO: the defaults, then the command line's settings.
    fn slo(&self) -> Slo {
        let mut slo = Slo::default();
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

pub fn rollout(args: &RolloutArgs) -> Result<ExitCode> {
    let reg = args.registry.open("releases rollout")?;
    let Some(front) = &args.front else {
        bail!(
            "the Cloudflare driver (wrangler versions and the Analytics Engine SQL API) is not \
             built yet; roll out against the local front of `understudy drill --rollout` with \
             --front URL"
        );
    };
    let mut driver = understudy_lab::rollout::front::Front::new(front)?;
    let start = if args.resume {
        Start::Resume
    } else if args.abort {
        Start::Abort
    } else {
        Start::New {
            old: args.from.clone(),
            slo: args.slo(),
        }
    };
    let rec = run::run(
        &reg,
        &args.id,
        start,
        &mut driver,
        &mut Wall,
        &mut std::io::stdout(),
    )?;
    Ok(match rec.state.phase {
        Phase::Done => Exit::Ok,
        _ => Exit::RolledBack,
    }
    .into())
}

pub fn status(args: &StatusArgs) -> Result<ExitCode> {
    let reg = args.registry.open("releases status")?;
    let rec = match &args.id {
        Some(id) => {
            let id = reg.resolve(id)?;
            record::read(&reg, &id)?
        }
        None => match record::running(&reg)? {
            Some(r) => Some(r),
            None => record::all(&reg)?.into_iter().last(),
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
    Ok(Exit::Ok.into())
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
