//! One exit-code mechanism for every command, documented in the README's "Exit codes"
//! table, which mirrors the table below row by row (a test keeps the two equal):
//!
//! - every command returns `Ok(Exit::…)` for what it decided: `Ok` (warnings allowed), or
//!   why it refuses (`Invalid` input, a `simulate` expectation not met, a damaged registry,
//!   …);
//! - an error that reaches `main` means the command could not run (`UsageOrIo`, exit 2),
//!   unless it is an [`Invalid`] (or the release registry's `Invalid`): then the input was
//!   invalid (exit 1).
//!
//! clap's own usage errors also exit 2.
//!
//! Why one row per reason rather than per code: the README once said 2 meant "usage error,
//! or a file cannot be read or written" while `releases verify` exited 2 on a damaged
//! registry. A reason of its own is a row of its own, and a test checks that each command
//! only names the reasons whose row names it.

use std::process::ExitCode;

macro_rules! exits {
    ($( $(#[$doc:meta])* $variant:ident = $code:literal, $commands:expr, $meaning:literal; )*) => {
        /// Why a command exits, each with its code and its row in the README's table.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum Exit { $( $(#[$doc])* $variant, )* }

        // `ALL`, `name`, `commands` and `meaning` are read by the tests that keep the
        // README's table equal to this one.
        impl Exit {
            /// Every reason, in the README table's order.
            #[cfg_attr(not(test), allow(dead_code))]
            pub const ALL: &'static [Exit] = &[ $( Exit::$variant, )* ];

            pub const fn code(self) -> u8 {
                match self { $( Exit::$variant => $code, )* }
            }

            /// The variant's name, as the commands' code writes it (`Exit::Invalid`).
            #[cfg_attr(not(test), allow(dead_code))]
            pub const fn name(self) -> &'static str {
                match self { $( Exit::$variant => stringify!($variant), )* }
            }

            /// The commands that exit this way, as the README names them.
            #[cfg_attr(not(test), allow(dead_code))]
            pub const fn commands(self) -> &'static str {
                match self { $( Exit::$variant => $commands, )* }
            }

            /// What the code means for this reason, as the README says it.
            #[cfg_attr(not(test), allow(dead_code))]
            pub const fn meaning(self) -> &'static str {
                match self { $( Exit::$variant => $meaning, )* }
            }
        }
    };
}

/// Reasons that apply to every command say so in their commands cell.
const EVERY_COMMAND: &str = "every command";

exits! {
    /// Done; warnings may have been printed.
    Ok = 0, EVERY_COMMAND,
        "success (warnings may have been printed; `--deny-warnings` makes them exit 1)";
    /// The input is invalid; the diagnostics name every problem.
    Invalid = 1,
        "`check`, `build`, `bake`, `publish`, `releases add`, `releases promote`, \
         `releases rollback`, `simulate`, `replay`, `drill`, `token`, `dev`",
        "invalid input, every problem named: a policy (or its warnings, under \
         `--deny-warnings`), its catalog or inventory snapshot, the lists to publish, a module \
         over the size budget, a release whose catalog is past its ceiling (without \
         `--force`), a policy without `[identity]` (`token`)";
    /// `simulate`: the scenario's `[expect]` is not met, or a fleet bound.
    ExpectationUnmet = 1, "`simulate`",
        "the scenario's `[expect]` is not met, or with `--isolates` its `[fleet]` `degrade_within` / `recover_within` / `degrade_behind_one_breaker`, or a coordinator went over its capacity (a busiest second over `coordinator_capacity`, or a request refused; each unmet expectation is printed)";
    /// `drill`: an invariant broke and the edge is to blame, or `--find-rate` found no rate
    /// the edge sustains.
    InvariantBroken = 1, "`drill`",
        "an invariant broke and the edge is to blame (each is named on stderr with the \
         answers it blames), or `--find-rate` found no rate the edge sustains";
    /// `releases rollout`: the new release was judged worse than the old and rolled back.
    RolledBack = 1, "`releases rollout`",
        "the rollout rolled the new release back: a figure worse than the old version's with \
         evidence, or too many holds at one step (each judgement is printed with its evidence)";
    /// `releases rollout --abort`: the rollout was aborted by an operator.
    Aborted = 3, "`releases rollout`",
        "the rollout was aborted (`--abort`): the old version is back at 100%, or, with \
         `--force` over a deployment that is not the rollout's, nothing was deployed and the \
         rollout is recorded as aborted";
    /// `releases rollout --replay`: the new release replays worse; nothing deployed.
    ReplayWorse = 1, "`releases rollout`",
        "with `--replay`: the new release replays worse than the old on the rollout's SLO \
         (in both the best and the worst case the logs allow): nothing was deployed, the \
         evidence is printed and recorded (`--force` starts anyway)";
    /// `events`: the edge refused the operator's request.
    Refused = 1, "`events`",
        "the edge refused the operator's request with a 4xx other than 401 (replay switched \
         off, not a dead letter, nothing to skip, an unknown event, a bad filter)";
    /// `dev`: the edge server stopped with an error, or the demo did not show a working
    /// edge.
    EdgeFailed = 1, "`dev`",
        "the edge server stopped with an error; with `--demo`, its two answers were not a \
         live one and a disclosed fallback";
    /// `releases verify` / `repair`: the registry is damaged.
    RegistryDamaged = 2, "`releases verify`, `releases repair`",
        "the registry is damaged: `verify` names every problem and what `repair` would do; \
         `repair` names what it could not fix";
    /// The command could not run: usage, I/O, a registry it cannot use, a program or server
    /// that is missing or failed.
    UsageOrIo = 2, EVERY_COMMAND,
        "the command could not run: a usage error (clap's own, a flag's value, a rollout \
         setting outside its range, an unknown code for `explain`); a file it reads or writes (missing, not a regular file, not \
         UTF-8, not writable), a scenario or origin script that does not parse, logs to \
         replay that hold no request line of the edge's or mix services or releases; a registry \
         it cannot use (locked by another understudy without `--wait`, no such release, a \
         release or its history damaged, a rollout that has not ended or whose record is \
         damaged); something it needs that is missing or failed (the \
         prebuilt edge, `node`, the edge, the origin; for `events`: no admin token, or the \
         edge refused it with 401 or failed with a 5xx)";
    /// `drill`: what broke, stalls of the host explain; nothing is blamed on the edge.
    Inconclusive = 3, "`drill`",
        "inconclusive: every invariant that broke was broken only by answers that stalls of \
         the host, seen by the drill's witness, explain (each is named on stderr with its \
         stalls); nothing is blamed on the edge, and the run proves nothing either way";
}

impl From<Exit> for ExitCode {
    fn from(e: Exit) -> ExitCode {
        ExitCode::from(e.code())
    }
}

/// An error meaning "the input is invalid" (exit 1); its diagnostics were already printed.
#[derive(Debug)]
pub struct Invalid(pub String);

impl std::fmt::Display for Invalid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Invalid {}

/// The exit of a command's result.
pub fn of(result: anyhow::Result<ExitCode>) -> ExitCode {
    match result {
        Ok(code) => code,
        Err(e) => {
            // The reader stopped reading: end quietly, as `main` does for a `println!`.
            if crate::out::stdout_closed(&e) {
                return Exit::Ok.into();
            }
            if let Some(inv) = e.downcast_ref::<understudy_compiler::release::Invalid>() {
                eprint!("{}", inv.rendered);
                eprintln!("error: {}", inv.message);
                return Exit::Invalid.into();
            }
            eprintln!("error: {e:#}");
            if e.downcast_ref::<Invalid>().is_some() {
                Exit::Invalid.into()
            } else {
                Exit::UsageOrIo.into()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn readme() -> String {
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"))
            .expect("README.md")
    }

    /// The README's exit-code table, row by row: code, commands, meaning.
    fn readme_rows() -> Vec<(u8, String, String)> {
        let readme = readme();
        let section = readme
            .split("### Exit codes")
            .nth(1)
            .expect("README has an `### Exit codes` section");
        section
            .lines()
            .skip_while(|l| !l.starts_with('|'))
            .take_while(|l| l.starts_with('|'))
            .skip(2)
            .filter_map(|l| {
                let cells: Vec<&str> = l.split(" | ").map(|c| c.trim_matches(['|', ' '])).collect();
                Some((
                    cells.first()?.parse().ok()?,
                    cells.get(1)?.to_string(),
                    cells.get(2)?.to_string(),
                ))
            })
            .collect()
    }

    /// The README documents exactly these exit reasons (issue 9: docs that mirror code are
    /// checked against it; issue 23: the table said what 2 meant and `releases verify`
    /// exited 2 for something else).
    #[test]
    fn the_readme_table_is_the_exit_table() {
        let expected: Vec<(u8, String, String)> = Exit::ALL
            .iter()
            .map(|e| (e.code(), e.commands().to_string(), e.meaning().to_string()))
            .collect();
        assert_eq!(
            readme_rows(),
            expected,
            "README's exit-code table and the `exits!` table differ; the README's rows are:\n{}",
            Exit::ALL
                .iter()
                .map(|e| format!("| {} | {} | {} |", e.code(), e.commands(), e.meaning()))
                .collect::<Vec<_>>()
                .join("\n")
        );
    }

    /// Each command exits only for the reasons whose row names it: a command that starts
    /// returning a reason documented for others fails here until its row says so.
    #[test]
    fn each_command_exits_only_as_its_rows_say() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/src/cmd");
        let mut wrong = Vec::new();
        for entry in std::fs::read_dir(dir).expect("src/cmd") {
            let path = entry.expect("entry").path();
            let command = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
            if command == "mod" {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("source");
            let code = text.split("#[cfg(test)]").next().unwrap_or("");
            for used in code.split("Exit::").skip(1) {
                let name: String = used
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric())
                    .collect();
                let Some(e) = Exit::ALL.iter().find(|e| e.name() == name) else {
                    wrong.push(format!("{command}: Exit::{name} is no exit reason"));
                    continue;
                };
                let named = e.commands() == EVERY_COMMAND
                    || e.commands().contains(&format!("`{command}`"))
                    || e.commands().contains(&format!("`{command} "));
                if !named {
                    wrong.push(format!(
                        "{command} exits with Exit::{name}, whose row names only {}",
                        e.commands()
                    ));
                }
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }

    #[test]
    fn every_command_is_named_as_the_readme_names_it() {
        for e in Exit::ALL {
            if e.commands() != EVERY_COMMAND {
                for c in e.commands().split(", ") {
                    assert!(
                        c.starts_with('`') && c.ends_with('`'),
                        "{}: write commands as `name`, comma-separated: {c}",
                        e.name()
                    );
                }
            }
        }
    }
}
