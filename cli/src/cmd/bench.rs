//! `understudy bench [POLICY] [--out FILE]`: the edge against the bare pass-through Worker
//! and a hand-written JS peer in one workerd (see [`understudy_lab::bench`]). Prints the
//! figures; targets are reported, not asserted. Exit 0 when it ran; 2 on usage or I/O errors.

use crate::exit::Exit;
use std::process::ExitCode;

use crate::args::{BenchArgs, Format};
use understudy_lab::bench;

pub fn run(args: BenchArgs) -> anyhow::Result<ExitCode> {
    if !(args.throughput_secs > 0.0 && args.throughput_secs <= 600.0) {
        anyhow::bail!(
            "--throughput-secs {} must be between 0 and 600",
            args.throughput_secs
        );
    }
    let opts = bench::Options {
        policy: args.policy,
        out: args.out,
        rounds: args.rounds.clamp(1, 100_000),
        hung_rounds: args.hung_rounds.clamp(1, 10_000),
        tail_rounds: args.tail_rounds.clamp(4, 100_000),
        concurrency: args.concurrency,
        throughput_secs: args.throughput_secs,
        origin_latency_ms: args.origin_latency_ms,
        edge: args.edge,
        bare: args.bare,
        compare_edge: args.compare_edge,
    };
    let doc = bench::run(&opts)?;
    match args.format {
        Format::Human => {
            print!("{}", bench::human(&doc));
            let w = &doc["witness"]["summary"];
            println!(
                "Host witness: {} late wakes (worst {} ms); {} stalls, {} ms in all (longest {} ms): a figure measured across a stall is the host's too",
                w["late_wakes"], w["worst_late_ms"], w["stalls"], w["stalled_ms"], w["longest_stall_ms"]
            );
        }
        Format::Json => println!("{}", serde_json::to_string_pretty(&doc)?),
    }
    Ok(Exit::Ok.into())
}
