//! `understudy check`: validate policies and report every problem.
//!
//! Exit: 0 when every policy is valid (warnings allowed, unless `--deny-warnings`), 1 when
//! any is invalid, 2 when a policy file cannot be read (missing, not a regular file, not
//! UTF-8): that is an I/O problem, not an invalid policy.

use std::process::ExitCode;

use serde_json::json;

use super::Stream;
use crate::args::{CheckArgs, Format};
use crate::exit::Exit;
use understudy_compiler::codes::Code;
use understudy_compiler::load::{load_policy_with, Options};
use understudy_compiler::render::{self, Sources};

pub fn run(args: CheckArgs) -> anyhow::Result<ExitCode> {
    let now = super::parse_now(args.now.as_deref())?;
    let options = Options {
        allow_outside_paths: args.strictness.allow_outside_paths,
    };
    let mut sources = Sources::default();
    let mut all = Vec::new();
    for path in &args.policies {
        let loaded = load_policy_with(path, now, options);
        for (p, text) in &loaded.sources {
            // Only what a diagnostic points into: a catalog of tens of MiB is not indexed.
            if loaded.diagnostics.iter().any(|d| d.file == *p) {
                sources.add(p, text);
            }
        }
        all.push(loaded);
    }
    let deny = args.strictness.deny_warnings;
    let failed =
        |l: &understudy_compiler::load::Loaded| l.has_errors() || (deny && l.has_warnings());
    let invalid = all.iter().filter(|l| failed(l)).count();
    let unreadable = all.iter().any(|l| {
        l.diagnostics
            .iter()
            .any(|d| d.code == Code::PolicyUnreadable)
    });
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
            let mut out = super::render_all(
                &sources,
                all.iter().flat_map(|l| &l.diagnostics),
                Stream::Stdout,
            );
            for l in &all {
                let status = if failed(l) { "invalid" } else { "ok" };
                out.push_str(&format!("{status}: {}\n", l.path.display()));
                if !l.unread.is_empty() {
                    out.push_str(&format!(
                        "note: {} did not read, so the rules that need {} have not run yet: fix the errors above and check again\n",
                        l.unread.join(", "),
                        if l.unread.len() == 1 { "it" } else { "them" }
                    ));
                }
            }
            out.push_str(&format!(
                "{} polic{} checked: {invalid} invalid, {errors} error(s), {warnings} warning(s){}\n",
                all.len(),
                if all.len() == 1 { "y" } else { "ies" },
                if deny && warnings > 0 {
                    " (warnings denied)"
                } else {
                    ""
                }
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
                .map(|l| json!({"file": l.path.display().to_string(), "valid": !failed(l), "policy_hash": l.policy_hash, "catalog_hash": l.catalog_hash, "unread": l.unread}))
                .collect();
            let doc = json!({"diagnostics": diagnostics, "policies": policies, "errors": errors, "warnings": warnings});
            println!("{}", serde_json::to_string_pretty(&doc)?);
        }
    }
    Ok(if unreadable {
        Exit::UsageOrIo
    } else if invalid > 0 {
        Exit::Invalid
    } else {
        Exit::Ok
    }
    .into())
}
