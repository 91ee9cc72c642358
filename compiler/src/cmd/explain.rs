//! `understudy explain`.
use std::process::ExitCode;

pub fn run(_args: crate::cli::ExplainArgs) -> anyhow::Result<ExitCode> {
    eprintln!("understudy explain: not implemented yet");
    Ok(ExitCode::from(2))
}
