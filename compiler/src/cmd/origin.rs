//! `understudy origin`.
use std::process::ExitCode;

pub fn run(_args: crate::cli::OriginArgs) -> anyhow::Result<ExitCode> {
    eprintln!("understudy origin: not implemented yet");
    Ok(ExitCode::from(2))
}
