//! `understudy check`: validate policies and report every problem.

use std::process::ExitCode;

use serde_json::json;

use crate::args::{CheckArgs, Format};
use understudy_compiler::load::load_policy;
use understudy_compiler::render::{self, Sources};

pub fn run(args: CheckArgs) -> anyhow::Result<ExitCode> {
    let now = super::parse_now(args.now.as_deref())?;
    let mut sources = Sources::default();
    let mut all = Vec::new();
    let mut invalid = 0usize;
    for path in &args.policies {
        let loaded = load_policy(path, now);
        for (p, text) in &loaded.sources {
            // Only what a diagnostic points into: a catalog of tens of MiB is not indexed.
            if loaded.diagnostics.iter().any(|d| d.file == *p) {
                sources.add(p, text);
            }
        }
        if loaded.has_errors() {
            invalid += 1;
        }
        all.push(loaded);
    }
    let errors: usize = all
        .iter()
        .flat_map(|l| &l.diagnostics)
        .filter(|d| d.is_error())
        .count();
    let warnings: usize = all
        .iter()
        .flat_map(|l| &l.diagnostics)
        .filter(|d| !d.is_error())
        .count();
    match args.format {
        Format::Human => {
            let mut out = String::new();
            for l in &all {
                for d in &l.diagnostics {
                    out.push_str(&render::human(&sources, d));
                }
            }
            for l in &all {
                let status = if l.has_errors() { "invalid" } else { "ok" };
                out.push_str(&format!("{status}: {}\n", l.path.display()));
            }
            out.push_str(&format!(
                "{} polic{} checked: {invalid} invalid, {errors} error(s), {warnings} warning(s)\n",
                all.len(),
                if all.len() == 1 { "y" } else { "ies" }
            ));
            print!("{out}");
        }
        Format::Json => {
            let diagnostics: Vec<_> = all
                .iter()
                .flat_map(|l| &l.diagnostics)
                .map(|d| render::json(&sources, d))
                .collect();
            let policies: Vec<_> = all
                .iter()
                .map(|l| json!({"file": l.path.display().to_string(), "valid": !l.has_errors(), "policy_hash": l.policy_hash, "catalog_hash": l.catalog_hash}))
                .collect();
            let doc = json!({"diagnostics": diagnostics, "policies": policies, "errors": errors, "warnings": warnings});
            println!("{}", serde_json::to_string_pretty(&doc)?);
        }
    }
    Ok(if invalid > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
