//! `understudy origin`: runs the simulated model origin in the foreground until Ctrl-C.
//! The first line on stdout is `origin listening on http://ADDR`, for scripts and Node tests
//! that start it on port 0 and need the real port.
use crate::exit::Exit;
use std::net::{SocketAddr, ToSocketAddrs};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context as _};

use crate::args::OriginArgs;
use understudy_lab::origin::{OriginConfig, OriginServer, Script, MAX_DELAY_MS};

pub fn run(args: OriginArgs) -> anyhow::Result<ExitCode> {
    let listen = loopback_addr(&args.listen)?;
    let script = match &args.script {
        Some(path) => Some(Script::from_file(path)?),
        None => None,
    };
    if args.latency_ms > MAX_DELAY_MS {
        bail!(
            "--latency-ms {} is more than the limit of {MAX_DELAY_MS} ms (10 minutes)",
            args.latency_ms
        );
    }
    let mut config = OriginConfig::new(listen);
    config.script = script;
    config.base_latency = Duration::from_millis(args.latency_ms);
    let origin = OriginServer::spawn_with(config)?;
    let url = origin.url();
    println!("origin listening on {url}");
    eprintln!("{}", help(&url, args.script.as_deref()));
    origin.wait();
    Ok(Exit::Ok.into())
}

/// Parses `--listen` (`127.0.0.1:8788`, `[::1]:0`, `localhost:8788`) and insists on loopback.
fn loopback_addr(listen: &str) -> anyhow::Result<SocketAddr> {
    let addrs: Vec<SocketAddr> = listen
        .to_socket_addrs()
        .with_context(|| format!("--listen {listen:?} is not an address like 127.0.0.1:8788"))?
        .collect();
    match addrs.iter().find(|a| a.ip().is_loopback()) {
        Some(a) => Ok(*a),
        None => bail!(
            "refusing to listen on {listen}: the simulated origin listens on loopback only (e.g. 127.0.0.1:8788)"
        ),
    }
}

fn help(url: &str, script: Option<&std::path::Path>) -> String {
    let following = match script {
        Some(p) => format!("following the script {}", p.display()),
        None => "answering healthy".to_string(),
    };
    format!(
        "{following}; model requests: any path, GET or POST. Change it live:
  curl -X PUT {url}/__origin/fault -d '{{\"kind\":\"status\",\"code\":503}}'
  curl -X PUT {url}/__origin/fault -d '{{\"kind\":\"latency\",\"ms\":2000}}'
  curl -X PUT {url}/__origin/fault -d '{{\"fault\":{{\"kind\":\"rate_limited\",\"retry_after_s\":5}},\"delay_ms\":100}}'
  curl -X DELETE {url}/__origin/fault      # back to the script
  curl {url}/__origin/stats                # counts, disconnects, recent requests
  curl -X POST {url}/__origin/reset        # zero the counters
faults: healthy latency hang status rate_limited reset slow_body malformed empty wrong_shape huge bimodal (docs/origin.md)
Ctrl-C stops it."
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_must_be_loopback() {
        assert!(loopback_addr("127.0.0.1:0").is_ok());
        assert!(loopback_addr("[::1]:0").is_ok());
        let e = loopback_addr("0.0.0.0:8788").unwrap_err().to_string();
        assert!(e.contains("loopback only"), "{e}");
        assert!(loopback_addr("nonsense").is_err());
    }
}
