//! [B-DRILL] `understudy drill`: a scenario played against the real edge — the built Worker
//! in workerd — and the simulated origin, with a bounded load driver on loopback.
//!
//! Why drill when `simulate` already replays the decision core? Simulation proves the
//! logic; only the real runtime shows what the logic costs and whether the adapter does what
//! the core decided: that an abandoned fetch frees its slot, that KV answers within its read
//! timeout, that every header reaches the client, that the breaker sees the outcomes. So the
//! drill prints the very table `simulate` prints (one `Summary`, built from what the client
//! received), then checks the invariants ([`check`]) and writes a report: `drill.json`
//! (figures, verdicts, every request) and `timeline.svg` ([`plot`]).
//!
//! Steps: copy the policy with a fresh inventory stamp (the catalog must validate today, and
//! the edge refuses stubs validated too long ago) → bake it (with `--time-scale`, the
//! breaker's clocks shrink too: [`script::scale_policy`]) → start the origin following the
//! scenario's model ([`script::origin_script`]) → start the edge, KV seeded from `[[kv]]` →
//! calibrate the transport slack → drive the arrivals → probe the user tier with the model
//! cut → table, verdicts, report.

pub mod check;
pub mod compare;
pub mod driver;
pub mod edge;
pub mod figures;
pub mod limits;
pub mod observe;
pub mod plot;
pub mod prepare;
pub mod script;
pub mod status;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _, Result};
use serde_json::{json, Value};
use understudy_core::policy::{Admin, Breaker, Policy};
use understudy_core::Millis;

use crate::origin::{Fault, OriginServer};
use understudy_compiler::dist::{self, edge::workspace_root};
use understudy_compiler::load::load_policy;
use understudy_compiler::render::{self, Sources};
use understudy_compiler::simulate::report;
use understudy_compiler::simulate::scenario::{self, RawScenario};

use self::check::{Context, Latency, UserProbe};
use self::driver::{Config, Planned, Progress};
use self::limits::Limits;
use self::observe::Observed;
use self::prepare::kv_seed;
pub use self::prepare::{epoch_ms, plan_request, stamp_policy};
use self::status::{merge, parse_status, status_once};

/// Requests sent with no I/O behind them to measure the transport's own latency.
const CALIBRATION_REQUESTS: usize = 50;
/// Added to the calibrated p99: the load driver, workerd and the origin share two cores, so
/// a request may wait a scheduler slice or two that the quiet calibration never sees.
pub const SLACK_MARGIN_MS: f64 = 10.0;
/// The drill's clock runs this much slower than the scenario's. `simulate` records a
/// failure at the instant its request arrives; a real isolate records it a few ms later
/// (the origin's round trip), so an arrival that `simulate` places exactly at the end of a
/// cool-down (seed 002: request 18, 4 s after the failure of request 14) would come a few ms
/// early on the real edge and be refused. Stretching the schedule by 1% turns every such
/// tie into a 1% margin (40 ms on a 4 s cool-down) and moves nothing that is not a tie by
/// more than 1%.
pub const TIE_STRETCH: f64 = 1.01;
/// The status endpoint the drill adds to a policy that has none (instrumentation only).
pub const DRILL_STATUS_PATH: &str = "/__understudy/status";
pub const DRILL_ADMIN_SECRET: &str = "ADMIN_TOKEN";
/// Users probed for fresh user-tier entries after the run.
const USER_PROBES: usize = 5;
/// How often the admin status endpoint is read during a run.
const STATUS_EVERY: Duration = Duration::from_millis(200);

pub struct Options {
    pub policy: PathBuf,
    pub scenario: PathBuf,
    pub report: Option<PathBuf>,
    pub time_scale: f64,
    pub concurrency: usize,
    /// Arrivals per second instead of the scenario's (the request count follows, so the
    /// run keeps its duration).
    pub rate: Option<f64>,
    /// Prebuilt edge directory (default: the checkout's `edge/worker/build`).
    pub edge: Option<PathBuf>,
    pub timeout: Duration,
    /// Replay the scenario through `simulate` too and require every request to agree.
    pub compare_simulate: bool,
}

/// Everything a drill produced; `drill.json` is its serialisation.
pub struct Outcome {
    pub table: String,
    pub verdicts: Vec<check::Verdict>,
    pub alerts: Vec<String>,
    pub json: Value,
    pub svg: Option<String>,
    /// `--compare-simulate`: the first disagreements, one line each.
    pub disagreements: Vec<String>,
}

impl Outcome {
    pub fn broken(&self) -> Vec<&check::Verdict> {
        self.verdicts.iter().filter(|v| v.broken()).collect()
    }
}

struct Bar(indicatif::ProgressBar, u64);

impl Progress for Bar {
    fn done(&mut self, o: &Observed) {
        if o.is_degraded() {
            self.1 += 1;
            self.0.set_message(format!("{} degraded", self.1));
        }
        self.0.inc(1);
    }
}

/// Runs a drill; the caller prints and exits.
pub fn run(opts: &Options) -> Result<std::result::Result<Outcome, ExitCode>> {
    if !(opts.time_scale > 0.0 && opts.time_scale <= 1.0) {
        bail!(
            "--time-scale {} must be more than 0 and at most 1",
            opts.time_scale
        );
    }
    let root = workspace_root().context("`understudy drill` runs inside an Understudy checkout (it needs scripts/edge-server.mjs and the npm packages)")?;
    let text = std::fs::read_to_string(&opts.scenario)
        .with_context(|| format!("{}: cannot read", opts.scenario.display()))?;
    let mut raw: RawScenario =
        toml::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {e}", opts.scenario.display()))?;
    let limits = Limits::parse(raw.drill.as_ref())
        .map_err(|e| anyhow::anyhow!("{}: {e}", opts.scenario.display()))?;
    if let Some(rate) = opts.rate {
        let secs = match (&raw.interval, raw.rate) {
            (Some(i), _) => {
                understudy_core::time::parse_duration(i)
                    .map_err(|e| anyhow::anyhow!("interval: {e}"))? as f64
                    / 1000.0
                    * raw.requests as f64
            }
            (None, Some(r)) => raw.requests as f64 / r,
            _ => 0.0,
        };
        raw.interval = None;
        raw.rate = Some(rate);
        raw.requests = ((secs * rate).round() as u64).max(1);
    }
    let limits = limits.scaled(opts.time_scale);

    let work = tempdir(&root)?;
    let now = Millis(epoch_ms());
    let stamped = stamp_policy(&opts.policy, &work, now)?;
    let loaded = load_policy(&stamped, now);
    if loaded.has_errors() || loaded.policy.is_none() {
        let mut sources = Sources::default();
        for (p, t) in &loaded.sources {
            sources.add(p, t);
        }
        for d in &loaded.diagnostics {
            eprintln!("{}", render::human(&sources, d));
        }
        eprintln!(
            "error: {} is invalid; nothing was drilled",
            opts.policy.display()
        );
        return Ok(Err(ExitCode::from(1)));
    }
    let Some(base_policy) = loaded.policy.as_ref() else {
        return Ok(Err(ExitCode::from(1)));
    };
    let full = scenario::build(raw, base_policy)
        .map_err(|e| anyhow::anyhow!("{}: {e}", opts.scenario.display()))?;
    let sc = script::stretch(&script::scale_scenario(&full, opts.time_scale), TIE_STRETCH);
    let mut policy = script::scale_policy(base_policy, opts.time_scale);
    // Instrumentation: a policy without a status endpoint gets one for the drill, so the
    // breaker's own log (every transition, half-open trials included) can be read.
    if policy.admin.is_none() && !matches!(policy.breaker, Breaker::Off) {
        policy.admin = Some(Admin {
            path: DRILL_STATUS_PATH.into(),
            secret: DRILL_ADMIN_SECRET.into(),
        });
    }

    // Bake.
    let edge_dir = dist::edge::locate(opts.edge.as_deref())?;
    let policy_file = opts
        .policy
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let inputs = dist::Inputs {
        policy: &policy,
        catalog: loaded.catalog.as_ref(),
        policy_hash: &loaded.policy_hash,
        catalog_hash: &loaded.catalog_hash,
        policy_file: &policy_file,
        validated_at_ms: now.0,
    };
    let built = dist::assemble(&inputs, &edge_dir)?;
    let dist_dir = work.join("dist");
    dist::write_dir(&dist_dir, &built)?;

    // Origin and edge.
    let origin = OriginServer::spawn(([127, 0, 0, 1], 0).into(), Some(script::origin_script(&sc)))?;
    let seed_path = work.join("kv-seed.json");
    std::fs::write(
        &seed_path,
        serde_json::to_vec_pretty(&kv_seed(&sc, Millis(epoch_ms())))?,
    )?;
    eprintln!(
        "drill: {} ({} requests at {:.1} req/s, time scale {}) against {} in workerd…",
        sc.name,
        sc.requests,
        1e6 / sc.interval_us as f64,
        opts.time_scale,
        policy.service.name
    );
    let edge = edge::EdgeProcess::start(&root, &dist_dir, &origin.url(), Some(&seed_path))?;

    let mut tokens = BTreeMap::new();
    let plan: Vec<Planned> = (0..sc.requests)
        .map(|i| plan_request(&policy, &sc, i, &mut tokens))
        .collect();
    let run_for = Duration::from_micros(sc.requests * sc.interval_us) + Duration::from_secs(30);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let addr = edge.addr;

    // Calibration: a request refused before any I/O (an unknown path) measures what the
    // client adds to the Worker's own clock.
    let calibration: Vec<f64> = rt.block_on(async {
        let mut conn = None;
        let probe = Planned {
            index: 0,
            due_us: 0,
            method: "GET".into(),
            target: "/__understudy_drill/calibration".into(),
            headers: Vec::new(),
            user: None,
        };
        let mut out = Vec::new();
        for n in 0..CALIBRATION_REQUESTS + 5 {
            let o = driver::once(&mut conn, addr, &probe, Duration::from_secs(5)).await;
            if n >= 5 && o.status != 0 {
                out.push(o.latency_ms);
            }
        }
        out
    });
    let calib = Latency::of(calibration.iter().copied());
    let slack_ms = calib.p99_ms + SLACK_MARGIN_MS;

    // The run.
    let admin = policy.admin.clone();
    let bar = indicatif::ProgressBar::new(sc.requests);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {bar:40} {pos}/{len} {msg}",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    origin.reset_stats();
    let start = Instant::now();
    let start_epoch = epoch_ms();
    let cfg = Config {
        addr,
        concurrency: opts.concurrency,
        timeout: opts.timeout,
        limit: run_for,
    };
    let (obs, statuses) = rt.block_on(async {
        let (stop_tx, mut stop_rx) = tokio::sync::watch::channel(false);
        let poller = tokio::spawn(async move {
            let mut docs = Vec::new();
            let Some(admin) = admin else { return docs };
            let token = edge::dev_secret(&admin.secret);
            loop {
                if let Some(d) = status_once(addr, &admin.path, &token).await {
                    docs.push(d);
                }
                tokio::select! {
                    _ = tokio::time::sleep(STATUS_EVERY) => {}
                    _ = stop_rx.changed() => {
                        if let Some(d) = status_once(addr, &admin.path, &token).await { docs.push(d); }
                        break;
                    }
                }
            }
            docs
        });
        let obs = driver::drive(cfg, plan.clone(), start, Box::new(Bar(bar.clone(), 0))).await;
        let _ = stop_tx.send(true);
        let docs = poller.await.unwrap_or_default();
        (obs, docs)
    });
    bar.finish_and_clear();
    let obs = obs?;
    let origin_stats = origin.stats();
    let model_calls = origin_stats.requests;

    // Breaker: the admin endpoint's log when it has one, else the response headers.
    let mut transitions = Vec::new();
    let mut initial_mode = None;
    for d in &statuses {
        let (mode, t) = parse_status(d, start_epoch, matches!(policy.breaker, Breaker::Rate(_)));
        initial_mode = initial_mode.or(mode);
        merge(&mut transitions, t);
    }
    let status_visible = !statuses.is_empty();
    let header_visible = obs
        .iter()
        .any(|o| observe::mode_name(o.headers.breaker_mode.as_deref()) != "UNKNOWN");
    if transitions.is_empty() && header_visible {
        transitions = observe::transitions_from_headers(&obs);
    }
    if let Some(first) = transitions.first() {
        initial_mode = Some(first.from);
    } else if header_visible {
        initial_mode = obs
            .first()
            .map(|o| observe::mode_name(o.headers.breaker_mode.as_deref()));
    }
    let breaker_visible = status_visible || header_visible;
    let fault = script::fault_window_ms(&sc).map(|(a, b)| (a as f64, b as f64));

    // The user tier after recovery: cut the model, ask as users answered live since.
    let mut user_probes = None;
    if let (Some(_), Some((fault_start, fault_end)), Some(_)) = (
        check::write_through_tier(&policy),
        fault,
        limits.recover_within_ms,
    ) {
        let refresh = write_through_refresh(&policy) as f64;
        let recent_before: BTreeSet<&str> = obs
            .iter()
            .filter(|o| o.is_live() && o.sent_ms < fault_start && o.sent_ms + refresh > fault_start)
            .filter_map(|o| o.user.as_deref())
            .collect();
        let mut chosen: Vec<&Observed> = Vec::new();
        for o in obs.iter().filter(|o| o.is_live() && o.sent_ms >= fault_end) {
            if let Some(u) = o.user.as_deref() {
                if !recent_before.contains(u)
                    && !chosen.iter().any(|c| c.user.as_deref() == Some(u))
                    && chosen.len() < USER_PROBES
                {
                    chosen.push(o);
                }
            }
        }
        let mut probes = Vec::new();
        if !chosen.is_empty() {
            origin.set_fault(Fault::Hang)?;
            rt.block_on(async {
                let mut conn = None;
                for o in &chosen {
                    let p = &plan[o.index as usize];
                    let since = start.elapsed().as_secs_f64() * 1000.0 - fault_end;
                    let got = driver::once(&mut conn, addr, p, opts.timeout).await;
                    probes.push(UserProbe {
                        user: o.user.clone().unwrap_or_default(),
                        tier: got.headers.tier.clone(),
                        age_s: got.headers.age.as_deref().and_then(|a| a.parse().ok()),
                        since_fault_end_ms: since,
                    });
                }
            });
            origin.clear_fault();
        }
        user_probes = Some(probes);
    }
    drop(edge);
    origin.shutdown();

    // The table, the same as simulate's.
    let run = observe::to_run(&policy, &sc, &obs, &transitions, model_calls);
    let summary = report::summarize(&policy, &sc, &run);
    let table = report::human(&policy, &summary);

    let cx = Context {
        policy: &policy,
        limits,
        fault,
        transitions: &transitions,
        breaker_visible,
        slack_ms,
        user_probes: user_probes.as_deref(),
        time_scale: opts.time_scale,
    };
    let rec = check::recovery(&obs, &cx);
    let mut verdicts = check::check(&obs, &cx, &rec);
    let mut disagreements = Vec::new();
    if opts.compare_simulate {
        let d = compare::compare(&policy, loaded.catalog.as_ref(), &sc, start_epoch, &obs);
        disagreements = compare::describe(&d, 10);
        verdicts.push(check::Verdict {
            name: "SIMULATE_AGREES",
            ok: Some(d.is_empty()),
            detail: if d.is_empty() {
                format!(
                    "all {} requests: same status, reason and tier in simulate",
                    obs.len()
                )
            } else {
                format!(
                    "{} of {} requests differ from simulate; first: {}",
                    d.len(),
                    obs.len(),
                    disagreements.first().map(String::as_str).unwrap_or("")
                )
            },
        });
    }
    if (opts.time_scale - 1.0).abs() < f64::EPSILON && opts.rate.is_none() && sc.expect.is_some() {
        let unmet = report::check_expectations(&sc, &summary);
        verdicts.push(check::Verdict {
            name: "EXPECT",
            ok: Some(unmet.is_empty()),
            detail: if unmet.is_empty() {
                "the scenario's [expect] holds".into()
            } else {
                unmet.join("; ")
            },
        });
    }
    if !breaker_visible {
        verdicts.push(check::Verdict {
            name: "BREAKER_VISIBLE",
            ok: None,
            detail: "the edge exposed no breaker mode (no X-Breaker-Mode header, no admin status): recorded as UNKNOWN".into(),
        });
    }
    let figures = check::figures(&obs);
    let tiers: Vec<String> = policy
        .cascade
        .tiers
        .iter()
        .map(|t| t.name.clone())
        .collect();
    let svg = plot::render(&plot::Picture {
        title: format!(
            "{} — {} requests, {:.0} req/s, time scale {}",
            sc.name,
            sc.requests,
            1e6 / sc.interval_us as f64,
            opts.time_scale
        ),
        obs: &obs,
        tiers,
        faults: script::origin_script(&sc)
            .rules
            .iter()
            .filter_map(|r| r.seconds)
            .map(|t| (t.from * 1000.0, t.to.unwrap_or(t.from) * 1000.0))
            .collect(),
        transitions: &transitions,
        initial_mode: if breaker_visible { initial_mode } else { None },
        budget_ms: policy.budget.total_ms as f64,
    })
    .map_err(|e| anyhow::anyhow!("cannot draw the timeline: {e}"))
    .ok();

    let requests: Vec<Value> = obs
        .iter()
        .map(|o| {
            json!([
                o.index,
                round1(o.scheduled_ms),
                round1(o.sent_ms),
                round1(o.latency_ms),
                o.status,
                o.headers
                    .tier
                    .as_deref()
                    .unwrap_or(if o.is_live() { "origin" } else { "" }),
                o.headers.reason,
                o.headers.breaker_mode
            ])
        })
        .collect();
    let json = json!({
        "scenario": sc.name,
        "policy": policy.service.name,
        "release": built.release_id,
        "time_scale": opts.time_scale,
        "rate_rps": 1e6 / sc.interval_us as f64,
        "concurrency": opts.concurrency,
        "started_at_ms": start_epoch,
        "limits": limits,
        "fault_window_ms": fault,
        "calibration": { "requests": calibration.len(), "latency": calib, "slack_ms": slack_ms, "margin_ms": SLACK_MARGIN_MS },
        "summary": summary,
        "figures": figures,
        "recovery": rec,
        "alerts": rec.alerts,
        "breaker": { "visible": breaker_visible, "from_status_endpoint": status_visible, "initial_mode": initial_mode, "transitions": transitions },
        "model_calls": model_calls,
        "origin": { "requests": origin_stats.requests, "completed": origin_stats.completed, "disconnected": origin_stats.disconnected, "by_fault": origin_stats.by_fault },
        "user_probes": user_probes,
        "verdicts": verdicts,
        "simulate_disagreements": disagreements,
        "request_columns": ["index", "scheduled_ms", "sent_ms", "latency_ms", "status", "answered_by", "reason", "breaker_mode"],
        "requests": requests,
    });
    let _ = std::fs::remove_dir_all(&work);
    Ok(Ok(Outcome {
        table,
        verdicts,
        alerts: rec.alerts.clone(),
        json,
        svg,
        disagreements,
    }))
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

fn write_through_refresh(policy: &Policy) -> u64 {
    policy
        .cascade
        .tiers
        .iter()
        .find_map(|t| match &t.kind {
            understudy_core::policy::TierKind::Kv(k) if k.write_through => Some(k.refresh_ms),
            _ => None,
        })
        .unwrap_or(0)
}

fn tempdir(root: &Path) -> Result<PathBuf> {
    let dir =
        root.join(".understudy/drill")
            .join(format!("run-{}-{}", std::process::id(), epoch_ms()));
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    Ok(dir)
}

/// Writes `drill.json` and `timeline.svg` into `dir`.
pub fn write_report(dir: &Path, o: &Outcome) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    std::fs::write(dir.join("drill.json"), serde_json::to_vec_pretty(&o.json)?)?;
    if let Some(svg) = &o.svg {
        std::fs::write(dir.join("timeline.svg"), svg)?;
    }
    Ok(())
}
