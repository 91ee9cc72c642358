//! A drill's run against the live edge: the origin following the scenario, the edge in
//! workerd with KV seeded, the transport calibrated, the arrivals driven while the status
//! endpoint is read, the breaker's transitions gathered, and the user tier probed after
//! recovery.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use understudy_core::policy::{Breaker, Policy};
use understudy_core::Millis;

use crate::origin::{Fault, OriginServer, Stats};
use crate::witness::{Trace, Witness};

use super::check::{self, Latency, UserProbe};
use super::driver::{self, Config, Planned, Progress};
use super::observe::{self, IsolateSeen, Observed, SeenTransition};
use super::prepare::{epoch_ms, kv_seed, plan_request};
use super::regions::{place, region_cfs, CF_BLOB};
use super::setup::Prepared;
use super::stall::{self, Injected};
use super::status::{merge, parse_status, status_once};
use super::{
    edge, script, Options, CALIBRATION_REQUESTS, SLACK_MARGIN_MS, STATUS_EVERY, USER_PROBES,
};

/// What the live run produced.
pub struct Played {
    pub obs: Vec<Observed>,
    pub transitions: Vec<SeenTransition>,
    pub initial_mode: Option<&'static str>,
    pub breaker_visible: bool,
    pub status_visible: bool,
    pub calibration: Vec<f64>,
    pub calib: Latency,
    pub slack_ms: f64,
    pub start_epoch: u64,
    pub origin_stats: Stats,
    pub user_probes: Option<Vec<UserProbe>>,
    pub fault: Option<(f64, f64)>,
    /// `--isolates K` (K > 1): each isolate's requests and breaker transitions.
    pub per_isolate: Vec<IsolateSeen>,
    /// What the witness saw of the host, from before the calibration to after the probes.
    pub witness: Trace,
    /// `--inject-stall`: the stops as made.
    pub injected: Vec<Injected>,
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

fn write_through_refresh(policy: &Policy) -> u64 {
    policy
        .cascade
        .tiers
        .iter()
        .find_map(|t| t.kind.write_through().map(|w| w.refresh_ms))
        .unwrap_or(0)
}

/// Calibration: requests refused before any I/O (an unknown path) measure what the client
/// adds to the Worker's own clock.
async fn calibrate(addr: std::net::SocketAddr) -> Vec<f64> {
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
}

/// The arrivals, driven while the status endpoint (when the policy has one) is read every
/// [`STATUS_EVERY`]; returns what the client saw and the status documents. With several
/// isolates (`addrs`), request `i` goes to isolate `split[i]` over connections of its own,
/// and each isolate's status endpoint is read: one list of documents per isolate.
async fn drive(
    cfg: Config,
    addrs: &[std::net::SocketAddr],
    split: &[usize],
    plan: Vec<Planned>,
    start: Instant,
    admin: Option<understudy_core::policy::Admin>,
    bar: indicatif::ProgressBar,
) -> (Result<Vec<Observed>>, Vec<Vec<serde_json::Value>>) {
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut pollers = Vec::new();
    for &addr in addrs {
        let admin = admin.clone();
        let mut stop_rx = stop_rx.clone();
        pollers.push(tokio::spawn(async move {
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
        }));
    }
    let k = addrs.len().max(1);
    let mut plans: Vec<Vec<Planned>> = vec![Vec::new(); k];
    for p in plan {
        let i = split.get(p.index as usize).copied().unwrap_or(0).min(k - 1);
        plans[i].push(p);
    }
    let mut drivers = Vec::new();
    for (i, plan) in plans.into_iter().enumerate() {
        let cfg = Config {
            addr: addrs.get(i).copied().unwrap_or(cfg.addr),
            concurrency: (cfg.concurrency / k).max(1),
            ..cfg
        };
        let progress = Box::new(Bar(bar.clone(), 0));
        drivers.push(tokio::spawn(driver::drive(cfg, plan, start, progress)));
    }
    let mut obs = Ok(Vec::new());
    for d in drivers {
        match (d.await, &mut obs) {
            (Ok(Ok(mut o)), Ok(all)) => all.append(&mut o),
            (Ok(Err(e)), Ok(_)) => obs = Err(e),
            (Err(e), Ok(_)) => obs = Err(anyhow::anyhow!("a load driver failed: {e}")),
            _ => {}
        }
    }
    if let Ok(all) = &mut obs {
        all.sort_by_key(|o| o.index);
    }
    let _ = stop_tx.send(true);
    let mut docs = Vec::new();
    for p in pollers {
        docs.push(p.await.unwrap_or_default());
    }
    (obs, docs)
}

/// The breaker's transitions: the admin endpoint's log when it has one, else the response
/// headers. (transitions, initial mode, visible at all, from the status endpoint)
fn breaker_log(
    policy: &Policy,
    obs: &[Observed],
    statuses: &[serde_json::Value],
    start_epoch: u64,
) -> (Vec<SeenTransition>, Option<&'static str>, bool, bool) {
    let mut transitions = Vec::new();
    let mut initial_mode = None;
    for d in statuses {
        let (mode, t) = parse_status(d, start_epoch, matches!(policy.breaker, Breaker::Rate(_)));
        initial_mode = initial_mode.or(mode);
        merge(&mut transitions, t);
    }
    let status_visible = !statuses.is_empty();
    let header_visible = obs
        .iter()
        .any(|o| observe::mode_name(o.headers.breaker_mode.as_deref()) != "UNKNOWN");
    if transitions.is_empty() && header_visible {
        transitions = observe::transitions_from_headers(obs);
    }
    if let Some(first) = transitions.first() {
        initial_mode = Some(first.from);
    } else if header_visible {
        initial_mode = obs
            .first()
            .map(|o| observe::mode_name(o.headers.breaker_mode.as_deref()));
    }
    (
        transitions,
        initial_mode,
        status_visible || header_visible,
        status_visible,
    )
}

/// Users to probe for a fresh user-tier entry after the fault: answered live after its end,
/// and not already written in the refresh interval before it.
fn users_to_probe<'o>(
    policy: &Policy,
    obs: &'o [Observed],
    fault: (f64, f64),
) -> Vec<&'o Observed> {
    let (fault_start, fault_end) = fault;
    let refresh = write_through_refresh(policy) as f64;
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
    chosen
}

pub fn play(prep: &Prepared, opts: &Options) -> Result<Played> {
    let (policy, sc, limits) = (&prep.policy, &prep.sc, &prep.limits);
    let origin = OriginServer::spawn(([127, 0, 0, 1], 0).into(), Some(script::origin_script(sc)))?;
    let seed_path = prep.work.path().join("kv-seed.json");
    std::fs::write(
        &seed_path,
        serde_json::to_vec_pretty(&kv_seed(sc, Millis(epoch_ms())))?,
    )?;
    eprintln!(
        "drill: {} ({} requests at {:.1} req/s, time scale {}) against {} in workerd…",
        sc.name,
        sc.requests,
        1e6 / sc.interval_us as f64,
        opts.time_scale,
        policy.service.name
    );
    // `--logs`: the edge's log lines, from an empty file (the edge server appends).
    let logs = match &opts.logs {
        Some(p) => {
            let p = std::path::absolute(p)
                .with_context(|| format!("--logs {}: no such place", p.display()))?;
            std::fs::write(&p, "").with_context(|| format!("cannot write {}", p.display()))?;
            Some(p)
        }
        None => None,
    };
    let edge = edge::EdgeProcess::start_fleet(
        &prep.root,
        &prep.dist_dir,
        &origin.url(),
        Some(&seed_path),
        opts.isolates.max(1),
        logs.as_deref(),
    )?;
    let k = edge.addrs.len();
    // The witness watches the runtime that answers: workerd.
    let runtimes = edge.server.runtimes();
    if !opts.inject_stalls.is_empty() && runtimes.is_empty() {
        anyhow::bail!("--inject-stall: no workerd process found under the edge server to stop");
    }
    let witness = Witness::start(runtimes.clone());
    let splitter = understudy_compiler::simulate::fleet::Splitter::new(
        understudy_compiler::simulate::fleet::Split::Uniform,
        k,
    );
    let split: Vec<usize> = (0..sc.requests).map(|i| splitter.isolate(i)).collect();
    let mut tokens = BTreeMap::new();
    let plan: Vec<Planned> = (0..sc.requests)
        .map(|i| plan_request(policy, sc, i, &mut tokens))
        .collect();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    // `--regions R`: isolate i stands in region i mod R — its first request (which picks its
    // region for good) and every one after carry that region's `cf`.
    let cf = region_cfs(k, opts.regions);
    let mut plan = plan;
    if !cf.is_empty() {
        for p in &mut plan {
            let i = split.get(p.index as usize).copied().unwrap_or(0).min(k - 1);
            p.headers.push((CF_BLOB.into(), cf[i].clone()));
        }
        rt.block_on(place(&edge.addrs, &cf))?;
    }
    let addr = edge.addr;
    let calibration = rt.block_on(calibrate(addr));
    let calib = Latency::of(calibration.iter().copied());
    let slack_ms = calib.p99_ms + SLACK_MARGIN_MS;

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
        limit: Duration::from_micros(sc.requests * sc.interval_us) + Duration::from_secs(30),
    };
    let split_for = if k > 1 { split.as_slice() } else { &[] };
    let injector = (!opts.inject_stalls.is_empty()).then(|| {
        stall::inject(
            runtimes.iter().map(|w| w.pid).collect(),
            opts.inject_stalls.clone(),
            start,
        )
    });
    let (obs, statuses) = rt.block_on(drive(
        cfg,
        &edge.addrs,
        split_for,
        plan.clone(),
        start,
        policy.admin.clone(),
        bar.clone(),
    ));
    bar.finish_and_clear();
    let injected = match injector.map(|t| t.join()) {
        Some(Ok(r)) => r?,
        Some(Err(_)) => anyhow::bail!("the stall injector failed"),
        None => Vec::new(),
    };
    let obs = obs?;
    let origin_stats = origin.stats();
    let mut per_isolate = Vec::new();
    let (transitions, initial_mode, breaker_visible, status_visible) = if k > 1 {
        let mut all = Vec::new();
        let (mut initial, mut visible, mut status_seen) = (None, false, false);
        for (i, docs) in statuses.iter().enumerate() {
            let mine: Vec<Observed> = obs
                .iter()
                .filter(|o| split[o.index as usize] == i)
                .cloned()
                .collect();
            let (t, init, vis, st) = breaker_log(policy, &mine, docs, start_epoch);
            initial = initial.or(init);
            visible |= vis;
            status_seen |= st;
            all.extend(t.iter().cloned());
            per_isolate.push(IsolateSeen {
                requests: mine.iter().map(|o| o.index).collect(),
                transitions: t,
            });
        }
        all.sort_by(|a, b| a.at_ms.total_cmp(&b.at_ms));
        (all, initial, visible, status_seen)
    } else {
        breaker_log(policy, &obs, &statuses.concat(), start_epoch)
    };
    let fault = script::fault_window_ms(sc).map(|(a, b)| (a as f64, b as f64));

    // The user tier after recovery: cut the model, ask as users answered live since.
    let mut user_probes = None;
    if let (Some(_), Some(window), Some(_)) = (
        check::write_through_tier(policy),
        fault,
        limits.recover_within_ms,
    ) {
        let chosen = users_to_probe(policy, &obs, window);
        let mut probes = Vec::new();
        if !chosen.is_empty() {
            origin.set_fault(Fault::Hang)?;
            rt.block_on(async {
                for o in &chosen {
                    // Asked where the user's live answer was written: an isolate keeps what
                    // it read from KV for a while, so another isolate may not see it yet.
                    let mut conn = None;
                    let to = if k > 1 {
                        edge.addrs[split[o.index as usize]]
                    } else {
                        addr
                    };
                    // Its own correlation ID: the probe is the drill's, not the scenario's
                    // (`--logs` leaves it out).
                    let mut p = plan[o.index as usize].clone();
                    for (k, v) in &mut p.headers {
                        if k == "x-correlation-id" {
                            *v = format!("{PROBE_PREFIX}{}", o.index);
                        }
                    }
                    let sent_ms = start.elapsed().as_secs_f64() * 1000.0;
                    let got = driver::once(&mut conn, to, &p, opts.timeout).await;
                    probes.push(UserProbe {
                        user: o.user.clone().unwrap_or_default(),
                        tier: got.headers.tier.clone(),
                        age_s: got.headers.age.as_deref().and_then(|a| a.parse().ok()),
                        since_fault_end_ms: sent_ms - window.1,
                        sent_ms,
                        latency_ms: got.latency_ms,
                    });
                }
            });
            origin.clear_fault();
        }
        user_probes = Some(probes);
    }
    let witness = witness.stop(start);
    drop(edge);
    origin.shutdown();
    if let Some(path) = &logs {
        keep_scenario_lines(path)?;
    }

    Ok(Played {
        obs,
        transitions,
        initial_mode,
        breaker_visible,
        status_visible,
        calibration,
        calib,
        slack_ms,
        start_epoch,
        origin_stats,
        user_probes,
        fault,
        per_isolate,
        witness,
        injected,
    })
}

/// The correlation IDs of the user-tier probes after the run.
const PROBE_PREFIX: &str = "drill-probe-";

/// `--logs`: the edge's lines of the scenario's requests only — its JSON lines whose
/// correlation ID is a scenario request's (`drill-N`), and the edge's other lines
/// (`{"event": …}`); the drill's own requests (calibration, status reads, the user-tier
/// probes) and workerd's messages are left out.
fn keep_scenario_lines(path: &std::path::Path) -> Result<()> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read back {}", path.display()))?;
    let mut kept = String::with_capacity(text.len());
    for line in text.lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        let scenario = v["correlation_id"].as_str().is_some_and(|c| {
            c.strip_prefix("drill-")
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        });
        if scenario || (v.get("event").is_some() && v.get("outcome").is_none()) {
            kept.push_str(line);
            kept.push('\n');
        }
    }
    std::fs::write(path, kept).with_context(|| format!("cannot write {}", path.display()))
}
