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
mod out;

use args::{Cli, Command};

fn main() -> ExitCode {
    quiet_on_closed_pipe();
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
        Command::Replay(args) => cmd::replay::run(args),
        Command::Origin(args) => cmd::origin::run(args),
        Command::Dev(args) => cmd::dev::run(args),
        Command::Token(args) => cmd::token::run(args),
        Command::Drill(args) => cmd::drill::run(args),
        Command::Bench(args) => cmd::bench::run(args),
        Command::Events(args) => cmd::events::run(args),
    };
    exit::of(result)
}

/// A reader that stopped reading (`understudy releases status | head`) ends the command
/// quietly, as it ends `git log | head`: Rust ignores SIGPIPE and `println!` panics on the
/// closed pipe, so the panic of a write to a closed stdout exits 0 with nothing on stderr.
/// Every other panic is reported as usual.
fn quiet_on_closed_pipe() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let text = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if text.starts_with("failed printing to stdout") && text.contains("Broken pipe") {
            std::process::exit(0);
        }
        default(info);
    }));
}
