//! `understudy simulate POLICY --scenario FILE`: replay the edge's decision core over a
//! scenario in virtual time. Exit 0; 1 when the policy is invalid or the scenario's
//! `[expect]` is not met; 2 on usage or I/O errors (including a bad scenario).

use crate::exit::Exit;
use std::process::ExitCode;

use crate::args::{Format, SimulateArgs};
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
    let run = simulate::run(policy, loaded.catalog.as_ref(), &sc);
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
