//! `understudy simulate POLICY --scenario FILE`: replay the edge's decision core over a
//! scenario in virtual time. Exit 0; 1 when the policy is invalid or the scenario's
//! `[expect]` is not met; 2 on usage or I/O errors (including a bad scenario).

use crate::exit::Exit;
use std::process::ExitCode;

use crate::args::{Format, SimulateArgs, SplitArg};
use understudy_compiler::load::load_policy;
use understudy_compiler::simulate::{self, report, scenario};

pub fn run(args: SimulateArgs) -> anyhow::Result<ExitCode> {
    // The scenario's start is the clock: validate the catalog as of then.
    let text = std::fs::read_to_string(&args.scenario)
        .map_err(|e| anyhow::anyhow!("{}: cannot read: {e}", args.scenario.display()))?;
    let raw: scenario::RawScenario =
        toml::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {e}", args.scenario.display()))?;
    let now = super::parse_now(Some(&raw.start))
        .map_err(|e| anyhow::anyhow!("{}: `start`: {e}", args.scenario.display()))?;
    let loaded = load_policy(&args.policy, now);
    let Some(policy) = loaded.policy.as_ref() else {
        eprintln!(
            "error: {} is invalid; run `understudy check {}`",
            args.policy.display(),
            args.policy.display()
        );
        return Ok(Exit::Invalid.into());
    };
    let sc = scenario::build(raw, policy)
        .map_err(|e| anyhow::anyhow!("{}: {e}", args.scenario.display()))?;
    if args.logs.is_some() && sc.fleet.is_some() {
        anyhow::bail!(
            "--logs: {} spreads its traffic over a fleet ([fleet]); the log lines are written for one isolate's run only",
            args.scenario.display()
        );
    }
    if args.isolates.is_some() || args.regions.is_some() || sc.fleet.is_some() {
        return fleet(&args, policy, loaded.catalog.as_ref(), &sc);
    }
    let run = match &args.logs {
        Some(path) => {
            let run = simulate::run_logged(policy, loaded.catalog.as_ref(), &sc);
            let mut text = run.logs.join("\n");
            text.push('\n');
            std::fs::write(path, text)
                .map_err(|e| anyhow::anyhow!("{}: cannot write: {e}", path.display()))?;
            run
        }
        None => simulate::run(policy, loaded.catalog.as_ref(), &sc),
    };
    let summary = report::summarize(policy, &sc, &run);
    let unmet = report::check_expectations(&sc, &summary);
    match args.format {
        Format::Human => {
            print!("{}", report::human(policy, &summary));
            for u in &unmet {
                println!("EXPECTATION NOT MET: {u}");
            }
        }
        Format::Json => {
            let doc = serde_json::json!({ "summary": summary, "unmet_expectations": unmet });
            println!("{}", serde_json::to_string_pretty(&doc)?);
        }
    }
    Ok(if unmet.is_empty() {
        Exit::Ok.into()
    } else {
        Exit::ExpectationUnmet.into()
    })
}

/// `--isolates` or a `[fleet]` table: both scopes over the fleet, side by side; exit 1 when
/// the fleet scope misses the scenario's `degrade_within` / `recover_within` /
/// `degrade_behind_one_breaker`.
fn fleet(
    args: &SimulateArgs,
    policy: &understudy_core::policy::Policy,
    catalog: Option<&understudy_core::catalog::Catalog>,
    sc: &scenario::Scenario,
) -> anyhow::Result<ExitCode> {
    use simulate::fleet::{self, FleetSpec, Split};
    let mut spec = sc.fleet.clone().unwrap_or_else(|| FleetSpec::uniform(1));
    if let Some(n) = args.isolates {
        if !(1..=fleet::MAX_ISOLATES).contains(&n) {
            anyhow::bail!("--isolates {n}: out of range 1..={}", fleet::MAX_ISOLATES);
        }
        spec.isolates = n;
    }
    if let Some(r) = args.regions {
        spec = spec.with_regions(r).map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    match args.split {
        Some(SplitArg::Uniform) => spec.split = Split::Uniform,
        Some(SplitArg::Zipf) if !matches!(spec.split, Split::Zipf(_)) => {
            spec.split = Split::Zipf(1.0)
        }
        _ => {}
    }
    let Some((onset, end)) = fleet::fault_span(sc) else {
        anyhow::bail!(
            "{}: the scenario has no faulty phase: nothing to degrade from",
            args.scenario.display()
        );
    };
    let mut rows = Vec::new();
    for (name, scope) in [("isolate", false), ("fleet", true)] {
        let p = fleet::scoped(policy, scope, &spec).map_err(|e| anyhow::anyhow!("{e}"))?;
        let run = fleet::run(&p, catalog, sc, &spec).map_err(|e| anyhow::anyhow!("{e}"))?;
        rows.push(fleet::figures(name, &run, onset, end));
    }
    let one = fleet::one::run_one(policy, catalog, sc, &spec, (onset, end))
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let split = match spec.split {
        Split::Uniform => "uniform".to_string(),
        Split::Zipf(s) => format!("zipf (exponent {s})"),
    };
    let title = format!(
        "{}: {} requests over {} isolates, split {split}; fault {:.1}-{:.1} s",
        sc.name,
        sc.requests,
        spec.isolates,
        onset as f64 / 1000.0,
        end as f64 / 1000.0
    );
    let mut unmet = fleet::unmet(sc, &rows[1]);
    unmet.extend(fleet::one::behind(&spec, &rows[1], one.as_ref()));
    rows.extend(one);
    match args.format {
        Format::Human => {
            print!("{}", fleet::human(&title, &rows));
            for u in &unmet {
                println!("EXPECTATION NOT MET: {u}");
            }
        }
        Format::Json => {
            let doc = serde_json::json!({
                "scenario": sc.name, "isolates": spec.isolates, "split": split,
                "fault_ms": [onset, end], "scopes": rows, "unmet_expectations": unmet,
            });
            println!("{}", serde_json::to_string_pretty(&doc)?);
        }
    }
    Ok(if unmet.is_empty() {
        Exit::Ok.into()
    } else {
        Exit::ExpectationUnmet.into()
    })
}
