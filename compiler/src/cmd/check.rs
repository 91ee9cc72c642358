//! `understudy check`.
use std::process::ExitCode;

pub fn run(_args: crate::cli::CheckArgs) -> anyhow::Result<ExitCode> {
    eprintln!("understudy check: not implemented yet");
    Ok(ExitCode::from(2))
}
