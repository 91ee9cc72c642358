//! `understudy dev`.
use std::process::ExitCode;

pub fn run(_args: crate::cli::DevArgs) -> anyhow::Result<ExitCode> {
    eprintln!("understudy dev: not implemented yet");
    Ok(ExitCode::from(2))
}
