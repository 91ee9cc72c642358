//! `understudy dev POLICY` [B-DEV]: build the policy, start the simulated model origin
//! (in this process) and the built Worker in workerd (through Miniflare, by
//! `scripts/edge-server.mjs`), both on 127.0.0.1, seed local KV, and print how to use and
//! break it. `--demo` makes one healthy and one degraded request, prints both with their
//! headers, and exits: 0 when the first answer is live and the second a disclosed fallback.
//! With `[events]`, deliveries go to the origin's simulated consumer instead of the policy's
//! URL, or where `--events-url` says; the banner's `events` line names where.
//!
//! Runs inside an Understudy checkout, after `scripts/setup.sh` (it needs `node` and the
//! npm lockfile's Miniflare).

use crate::exit::Exit;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Command, ExitCode, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{bail, Context, Result};

use crate::args::{BuildArgs, DevArgs};
use understudy_compiler::dist::edge::workspace_root;
use understudy_lab::origin::OriginServer;
use understudy_lab::sample::sample_request;

/// How long the edge may take to start (workerd's first start compiles the module).
const EDGE_START: Duration = Duration::from_secs(60);
const READY: &str = "edge listening on ";

pub fn run(args: DevArgs) -> Result<ExitCode> {
    let root = workspace_root().context(
        "`understudy dev` runs inside an Understudy checkout (it needs scripts/edge-server.mjs and the npm packages)",
    )?;
    let server_js = root.join("scripts/edge-server.mjs");
    if !root.join("node_modules/miniflare").is_dir() {
        bail!(
            "{} has no node_modules/miniflare; run `scripts/setup.sh` there first (it runs `npm ci`)",
            root.display()
        );
    }
    let seed = match &args.seed {
        Some(p) if !p.is_file() => bail!("--seed {}: no such file", p.display()),
        Some(p) => {
            Some(std::fs::canonicalize(p).with_context(|| format!("--seed {}", p.display()))?)
        }
        None => None,
    };
    if let Some(url) = &args.events_url {
        check_events_url(url)?;
    }
    let mut kv_files = Vec::new();
    for spec in &args.kv {
        let Some((binding, file)) = spec
            .split_once('=')
            .filter(|(b, f)| !b.is_empty() && !f.is_empty())
        else {
            bail!("--kv {spec}: write BINDING=FILE, e.g. CATEGORY_TOP=category_top.json");
        };
        let path = std::path::Path::new(file);
        if !path.is_file() {
            bail!("--kv {spec}: no such file {file}");
        }
        let abs = std::fs::canonicalize(path).with_context(|| format!("--kv {spec}"))?;
        kv_files.push(format!("{binding}={}", abs.display()));
    }

    // Edge sources may have changed since the last build: rebuild the prebuilt edge when
    // they did (a fingerprint check, well under a second when nothing changed).
    let build_edge = root.join("scripts/build-edge.sh");
    let status = Command::new("bash")
        .arg(&build_edge)
        .current_dir(&root)
        .stdout(Stdio::null())
        .status()
        .with_context(|| format!("cannot run {}", build_edge.display()))?;
    if !status.success() {
        bail!(
            "{} failed ({status}); see its output above",
            build_edge.display()
        );
    }

    let stem = args
        .policy
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "policy".into());
    let out = root.join(".understudy/dev").join(stem);
    let build_args = BuildArgs {
        policy: args.policy.clone(),
        out: Some(out),
        now: None,
        edge: None,
        size: Default::default(),
        strictness: crate::args::Strictness {
            deny_warnings: false,
            allow_outside_paths: false,
        },
    };
    let built = match super::build::build(&build_args)? {
        Ok(b) => b,
        Err(code) => return Ok(code),
    };
    let manifest = &built.built.manifest;
    let policy = &built.policy;
    if args.events_url.is_some() && policy.events.is_none() {
        bail!(
            "--events-url: {} has no [events] section, so there is nothing to deliver",
            args.policy.display()
        );
    }

    // --demo picks free ports: it exits right away, and must not fail on a busy 8787.
    let (edge_port, origin_port) = if args.demo {
        (0, 0)
    } else {
        (args.port, args.origin_port)
    };
    let origin = OriginServer::spawn(SocketAddr::from(([127, 0, 0, 1], origin_port)), None)
        .with_context(|| format!("cannot start the simulated origin on 127.0.0.1:{origin_port}; choose another --origin-port"))?;
    let origin_url = origin.url();

    let recipe = sample_request(policy, built.catalog.as_ref());
    let mut cmd = Command::new("node");
    cmd.arg(&server_js)
        .arg("--dist")
        .arg(&built.dir)
        .args([
            "--port",
            &edge_port.to_string(),
            "--origin",
            &origin_url,
            "--recipe",
            &recipe.to_string(),
        ])
        .current_dir(&root)
        .env("WRANGLER_SEND_METRICS", "false")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    if let Some(seed) = &seed {
        cmd.arg("--seed").arg(seed);
    }
    for kv in &kv_files {
        cmd.arg("--kv").arg(kv);
    }
    // [V-*] Deliveries of the events outbox go to the simulated consumer unless the
    // developer names another (`--events-url`): the policy's own URL is a real service
    // that a laptop usually cannot, and should not, reach.
    let events = policy
        .events
        .as_ref()
        .map(|ev| EventsTarget::choose(args.events_url.as_deref(), ev, &origin.events_url()));
    if let Some(target) = &events {
        if let Some(url) = &target.var {
            cmd.args(["--events-url", url]);
        }
        if let Some(dir) = &args.persist {
            cmd.arg("--persist").arg(dir);
        }
    }
    if args.demo {
        cmd.arg("--demo");
    } else {
        // Interactive: show the Worker's log line for each request as it is served.
        cmd.arg("--verbose");
    }
    println!(
        "understudy dev: {} (policy {}, release {}) built into {}",
        manifest.policy.service,
        manifest.policy.version,
        manifest.release_id,
        built.dir.display()
    );
    println!("starting the edge in workerd…");
    let mut child = cmd
        .spawn()
        .context("cannot run `node`; install Node.js 20 or newer (see scripts/setup.sh)")?;
    // Held until we exit: the edge server stops when its stdin closes.
    let _stdin = child.stdin.take();
    let Some(stdout) = child.stdout.take() else {
        bail!("no stdout from the edge server")
    };
    // Lines before the ready line (the sample request) are shown after our banner; lines
    // after it (the demo, the Worker's logs) as they come.
    let (ready_tx, ready_rx) = mpsc::channel::<(String, Vec<String>)>();
    let forward = std::thread::spawn(move || {
        let mut before: Option<Vec<String>> = Some(Vec::new());
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            match (line.strip_prefix(READY), before.as_mut()) {
                (Some(url), Some(_)) => {
                    let _ = ready_tx.send((url.to_string(), before.take().unwrap_or_default()));
                }
                (_, Some(lines)) => lines.push(line),
                (_, None) => println!("{line}"),
            }
        }
        // Never ready: show what the server said.
        for line in before.unwrap_or_default() {
            println!("{line}");
        }
    });
    let (edge_url, sample) = match ready_rx.recv_timeout(EDGE_START) {
        Ok(ready) => ready,
        Err(e) => {
            let _ = child.kill();
            let status = child.wait().ok();
            let _ = forward.join();
            match e {
                mpsc::RecvTimeoutError::Timeout => {
                    bail!("the edge did not start within {} s", EDGE_START.as_secs())
                }
                mpsc::RecvTimeoutError::Disconnected => bail!(
                    "the edge server ({}) stopped before it was ready ({}); its errors are above",
                    server_js.display(),
                    status.map(|s| s.to_string()).unwrap_or_default()
                ),
            }
        }
    };
    println!(
        "  edge    {edge_url}   workerd via Miniflare; local KV: {}",
        list(&manifest.bindings.kv)
    );
    println!("  origin  {origin_url}   simulated model (UNDERSTUDY_ORIGIN_URL points here)");
    if let Some(t) = &events {
        println!("  events  {}   {}", t.url, t.note);
    }
    if !manifest.bindings.secrets.is_empty() {
        println!(
            "  secrets development values (`dev-` + the name in kebab case): {}",
            manifest.bindings.secrets.join(", ")
        );
    }
    for line in sample {
        println!("{line}");
    }
    if !args.demo {
        print!("{}", break_help(&origin_url));
        if let (Some(ev), Some(t)) = (&policy.events, &events) {
            print!("{}", events_help(&edge_url, &origin_url, ev, policy, t));
        }
    }
    let status = child.wait().context("lost the edge server")?;
    let _ = forward.join();
    origin.shutdown();
    Ok(if status.success() {
        Exit::Ok.into()
    } else {
        Exit::EdgeFailed.into()
    })
}

/// `--events-url`: an http or https URL with a host, or `policy`.
fn check_events_url(url: &str) -> Result<()> {
    let host = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .map(|rest| rest.split(['/', '?', '#']).next().unwrap_or(""));
    match host {
        _ if url == POLICY_URL => Ok(()),
        Some(h) if !h.is_empty() && !h.contains(char::is_whitespace) => Ok(()),
        _ => bail!(
            "--events-url {url}: give the consumer's http:// or https:// URL, or `{POLICY_URL}` for the policy's [events.delivery] url"
        ),
    }
}

/// `--events-url policy`: deliver where the policy says.
const POLICY_URL: &str = "policy";

/// Where `dev` has the edge deliver events, and what its banner says about it.
struct EventsTarget {
    /// Deliveries go here.
    url: String,
    /// The `UNDERSTUDY_EVENTS_URL` the edge gets (`None`: the policy's URL stands).
    var: Option<String>,
    /// The banner's note: whose consumer it is, and what it overrides.
    note: String,
}

impl EventsTarget {
    fn choose(
        arg: Option<&str>,
        ev: &understudy_core::policy::events::Events,
        simulated: &str,
    ) -> EventsTarget {
        let policy_url = &ev.delivery.url;
        match arg {
            Some(POLICY_URL) => EventsTarget {
                url: policy_url.clone(),
                var: None,
                note: format!(
                    "the policy's [events.delivery] url (--events-url {POLICY_URL}){}",
                    ev.delivery
                        .credential_secret
                        .as_ref()
                        .map(|s| format!("; its credential {s} is a development value"))
                        .unwrap_or_default()
                ),
            },
            Some(url) => EventsTarget {
                url: url.to_string(),
                var: Some(url.to_string()),
                note: format!("your consumer, from --events-url (UNDERSTUDY_EVENTS_URL points here, instead of the policy's {policy_url})"),
            },
            None => EventsTarget {
                url: simulated.to_string(),
                var: Some(simulated.to_string()),
                note: format!("simulated consumer (UNDERSTUDY_EVENTS_URL points here, instead of the policy's {policy_url}; --events-url URL|{POLICY_URL} to change)"),
            },
        }
    }

    fn simulated(&self, origin: &str) -> bool {
        self.url == origin || self.url.starts_with(&format!("{origin}/"))
    }
}

/// How to send events, break the consumer and operate the outbox.
fn events_help(
    edge: &str,
    origin: &str,
    ev: &understudy_core::policy::events::Events,
    policy: &understudy_core::policy::Policy,
    target: &EventsTarget,
) -> String {
    let admin = policy
        .admin
        .as_ref()
        .map(|a| understudy_compiler::simulate::request::dev_secret(&a.secret))
        .unwrap_or_default();
    let key = policy
        .identity
        .as_ref()
        .map(|i| understudy_compiler::simulate::request::dev_secret(&i.secret))
        .unwrap_or_default();
    let consumer = if target.simulated(origin) {
        format!(
            "\x20 curl -X PUT {origin}/__origin/consumer -d '{{\"rules\":[{{\"fault\":{{\"kind\":\"status\",\"code\":503}}}}]}}'\n\
             \x20 curl {origin}/__origin/ledger               # what the consumer committed\n"
        )
    } else {
        format!(
            "\x20 (deliveries go to {}, not to the simulated consumer: its /__origin/ledger stays empty)\n",
            target.url
        )
    };
    format!(
        "Events ({}): POST them with a token naming the tenant, then watch them delivered:\n\
         \x20 TOKEN=$(understudy token --policy POLICY --sub me --claim {}=acme --key {key})\n\
         \x20 curl -X POST {edge}{} -H \"Authorization: Bearer $TOKEN\" -H 'Content-Type: application/json' -d @event.json\n\
         \x20 understudy events list --edge {edge} --token {admin}\n\
         {consumer}",
        ev.route, ev.tenant_claim, ev.route
    )
}

fn list(items: &[String]) -> String {
    if items.is_empty() {
        "none".into()
    } else {
        items.join(", ")
    }
}

fn break_help(origin: &str) -> String {
    format!(
        "Break the origin — the edge then answers from its fallback tiers, and says so:\n\
         \x20 curl -X PUT {origin}/__origin/fault -d '{{\"kind\":\"hang\"}}'\n\
         \x20 curl -X PUT {origin}/__origin/fault -d '{{\"kind\":\"status\",\"code\":503}}'\n\
         \x20 curl -X PUT {origin}/__origin/fault -d '{{\"kind\":\"rate_limited\",\"retry_after_s\":5}}'\n\
         \x20 curl -X PUT {origin}/__origin/fault -d '{{\"kind\":\"latency\",\"ms\":2000}}'\n\
         \x20 curl -X DELETE {origin}/__origin/fault     # healthy again\n\
         \x20 curl {origin}/__origin/stats               # what the origin has seen\n\
         Other faults: reset slow_body malformed empty wrong_shape huge bimodal (docs/origin.md).\n\
         Ctrl-C stops the edge and the origin.\n"
    )
}
