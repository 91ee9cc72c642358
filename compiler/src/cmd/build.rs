//! `understudy build`.
use std::process::ExitCode;

pub fn run(_args: crate::cli::BuildArgs) -> anyhow::Result<ExitCode> {
    eprintln!("understudy build: not implemented yet");
    Ok(ExitCode::from(2))
}
