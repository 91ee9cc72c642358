//! `understudy`: the policy compiler's command line. `main` is thin: it parses arguments and
//! hands off to one module per subcommand, each a shell over `understudy-compiler` (the
//! product) or `understudy-lab` (origin, drill, bench). Exit codes: one mechanism for every
//! command (see `exit`, one row per reason): 0 ok, 1 the input or the run was refused, 2 the
//! command could not run.
#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::Parser;

mod args;
mod cmd;
mod exit;

use args::{Cli, Command};

fn main() -> ExitCode {
    let cli = Cli::parse();
    cmd::set_color(cli.color);
    let result = match cli.command {
        Command::Check(args) => cmd::check::run(args),
        Command::Explain(args) => cmd::explain::run(args),
        Command::Schema(args) => cmd::schema::run(args),
        Command::Build(args) => cmd::build::run(args),
        Command::Bake(args) => cmd::bake::run(args),
        Command::Publish(args) => cmd::publish::run(args),
        Command::Releases(args) => cmd::releases::run(args),
        Command::Simulate(args) => cmd::simulate::run(args),
        Command::Origin(args) => cmd::origin::run(args),
        Command::Dev(args) => cmd::dev::run(args),
        Command::Token(args) => cmd::token::run(args),
        Command::Drill(args) => cmd::drill::run(args),
        Command::Bench(args) => cmd::bench::run(args),
        Command::Events(args) => cmd::events::run(args),
    };
    exit::of(result)
}
