//! One exit-code mechanism for every command, documented in the README's "Exit codes"
//! table (a test keeps the two equal):
//!
//! - every command returns `Ok(Exit::…)` for what it decided — `Ok` (warnings allowed) or
//!   `Invalid` (the input is invalid, diagnostics shown);
//! - an error that reaches `main` is a usage or I/O problem (exit 2), unless it is an
//!   [`Invalid`] (or the release registry's `Invalid`): then the input was invalid (exit 1).
//!
//! clap's own usage errors also exit 2.

use std::process::ExitCode;

/// What a command's run means for its caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Done; warnings may have been printed.
    Ok,
    /// The input (policy, catalog, scenario, drill invariant, …) is invalid.
    Invalid,
    /// Usage error, or a file or network operation failed.
    UsageOrIo,
}

impl Exit {
    /// The README's table: code and meaning.
    pub const TABLE: [(Exit, &'static str); 3] = [
        (Exit::Ok, "success (warnings may have been printed; `--deny-warnings` makes them exit 1)"),
        (Exit::Invalid, "invalid input: a policy, catalog, inventory, scenario or token input is wrong, or a drill invariant broke"),
        (Exit::UsageOrIo, "usage error, or a file named on the command line cannot be read or written (missing, not a regular file, not UTF-8)"),
    ];

    pub const fn code(self) -> u8 {
        match self {
            Exit::Ok => 0,
            Exit::Invalid => 1,
            Exit::UsageOrIo => 2,
        }
    }
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

    /// The README documents exactly these exit codes (issue 9: docs that mirror code are
    /// checked against it).
    #[test]
    fn the_readme_table_lists_every_exit_code() {
        let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"))
            .expect("README.md");
        let section = readme
            .split("### Exit codes")
            .nth(1)
            .expect("README has an `### Exit codes` section");
        let rows: Vec<(u8, String)> = section
            .lines()
            .skip_while(|l| !l.starts_with('|'))
            .take_while(|l| l.starts_with('|'))
            .skip(2)
            .filter_map(|l| {
                let cells: Vec<&str> = l.split('|').map(str::trim).collect();
                Some((cells.get(1)?.parse().ok()?, cells.get(2)?.to_string()))
            })
            .collect();
        let expected: Vec<(u8, String)> = Exit::TABLE
            .iter()
            .map(|(e, meaning)| (e.code(), meaning.to_string()))
            .collect();
        assert_eq!(
            rows, expected,
            "README's exit-code table and Exit::TABLE differ"
        );
    }
}
