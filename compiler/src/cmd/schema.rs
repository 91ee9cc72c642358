//! `understudy schema`.
use std::process::ExitCode;

pub fn run(_args: crate::cli::SchemaArgs) -> anyhow::Result<ExitCode> {
    eprintln!("understudy schema: not implemented yet");
    Ok(ExitCode::from(2))
}
