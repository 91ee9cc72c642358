//! [V-PROOF] The events drill: thousands of events over many aggregates against the real
//! edge in workerd and the simulated consumer, under mixed faults, with the runtime killed
//! (SIGKILL to node and workerd) mid-run and restarted on the same storage — then a
//! Jepsen-style check of what the producers were told against what the consumer's ledger
//! committed and what the edge's outbox holds.
//!
//! Phases: healthy (the delivery-latency figure, NFR-RES-003) → faulty (the scenario's
//! consumer faults, out-of-order and duplicate sends, the kill) → quiescence (every
//! acknowledged event delivered, dead-lettered, or held behind a dead letter) → replay of the
//! dead letters (same `eventId`) → quiescence → the check. The retry schedule's clock is
//! scaled (`--time-scale`, printed); the consumer's `Retry-After` seconds are not.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _, Result};
use serde_json::{json, Value};
use understudy_core::events::policy::Events;
use understudy_core::policy::Policy;
use understudy_core::time::format_duration as fmt;
use understudy_core::Millis;

use super::client::Edge as Client;
use super::edge::{files_containing, Edge, Launch};
use super::produce::{self, Address, PLAIN_MARK, REDACTED_MARK};
use super::scenario::EventsScenario;
use crate::drill::check::Verdict;
use crate::drill::{epoch_ms, stamp_policy};
use crate::origin::{ConsumerConfig, OriginServer};
use understudy_compiler::dist::{self, edge::workspace_root};
use understudy_compiler::load::load_policy;
use understudy_compiler::simulate::request::dev_secret;

/// NFR-RES-003: p95 from commit to acknowledgement with a healthy consumer.
pub const P95_LIMIT_MS: f64 = 30_000.0;
/// NFR-RES-004: duplicate side effects are counted over at least this many replayed
/// deliveries in the full run.
pub const FULL_REPLAYED_DELIVERIES: u64 = 10_000;

pub struct Options {
    pub policy: PathBuf,
    pub scenario: PathBuf,
    pub report: Option<PathBuf>,
    /// Overrides the scenario's time scale.
    pub time_scale: Option<f64>,
    /// The full run: `full_count` events and the scenario's `full_faults`.
    pub full: bool,
    /// Overrides the number of events of the faulty phase.
    pub events: Option<u64>,
    pub edge: Option<PathBuf>,
}

pub struct Outcome {
    pub json: Value,
    pub lines: Vec<String>,
    pub verdicts: Vec<Verdict>,
}

impl Outcome {
    pub fn broken(&self) -> Vec<&Verdict> {
        self.verdicts.iter().filter(|v| v.broken()).collect()
    }
}

/// The policy's events timings scaled by `f`; replay switched on (this drill is the test
/// seed 004 asks for before replay is enabled).
pub fn scale_events(ev: &Events, f: f64) -> Events {
    let s = |ms: u64| ((ms as f64 * f).round() as u64).max(1);
    let mut e = ev.clone();
    e.retry.backoff_base_ms = s(ev.retry.backoff_base_ms);
    e.retry.backoff_max_ms = s(ev.retry.backoff_max_ms);
    e.retry.window_ms = s(ev.retry.window_ms);
    e.delivery.attempt_timeout_ms = s(ev.delivery.attempt_timeout_ms);
    e.alerts.oldest_pending_ms = s(ev.alerts.oldest_pending_ms);
    e.alerts.gap_ms = s(ev.alerts.gap_ms);
    e.replay = true;
    e
}

struct Run<'a> {
    admin: Client,
    addr: Address,
    policy: &'a Policy,
    events: &'a Events,
}

impl Run<'_> {
    fn client(&self) -> Client {
        let at = *self.addr.lock().unwrap_or_else(|p| p.into_inner());
        Client::from_addr(at, self.admin.token.clone())
    }

    /// Every event the edge holds, from every shard, page by page.
    async fn all_events(&self) -> Result<BTreeMap<String, Value>> {
        let mut out = BTreeMap::new();
        let c = self.client();
        for k in 0..self.events.shards {
            let mut offset = 0;
            loop {
                let a = c
                    .list(
                        &format!("shard={k}&offset={offset}&limit=5000"),
                        Duration::from_secs(30),
                    )
                    .await?;
                if a.status != 200 {
                    bail!("listing shard {k} answered {}: {}", a.status, a.text);
                }
                let rows = a.body["events"].as_array().cloned().unwrap_or_default();
                offset += rows.len();
                for r in rows {
                    if let Some(id) = r["event_id"].as_str() {
                        out.insert(id.to_string(), r.clone());
                    }
                }
                if a.body["more"] != Value::Bool(true) {
                    break;
                }
            }
        }
        Ok(out)
    }

    async fn status(&self) -> Option<Value> {
        let path = self.policy.admin.as_ref()?.path.clone();
        let a = self
            .client()
            .call("GET", &path, None, None, Duration::from_secs(30))
            .await
            .ok()?;
        (a.status == 200).then_some(a.body)
    }

    /// Waits until every acknowledged event is delivered, a dead letter, or held behind
    /// one; returns the final listing (or the last one when `limit` passes).
    async fn quiesce(
        &self,
        acked: &BTreeSet<String>,
        limit: Duration,
    ) -> Result<(BTreeMap<String, Value>, bool)> {
        let start = Instant::now();
        loop {
            let all = match self.all_events().await {
                Ok(a) => a,
                Err(e) if start.elapsed() < limit => {
                    eprintln!("events drill: listing failed ({e}); retrying");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    continue;
                }
                Err(e) => return Err(e),
            };
            if settled(&all, acked) {
                return Ok((all, true));
            }
            if start.elapsed() > limit {
                return Ok((all, false));
            }
            tokio::time::sleep(Duration::from_millis(400)).await;
        }
    }
}

fn state(v: &Value) -> &str {
    v["state"].as_str().unwrap_or("")
}

/// Every acknowledged event is delivered, dead, or pending behind its aggregate's dead
/// letter.
fn settled(all: &BTreeMap<String, Value>, acked: &BTreeSet<String>) -> bool {
    let mut blocked: BTreeMap<(String, String), u64> = BTreeMap::new();
    for v in all.values() {
        if state(v) == "DEAD_LETTER" && v["skipped"] != Value::Bool(true) {
            let key = (
                v["tenant"].as_str().unwrap_or("").to_string(),
                v["aggregate"].as_str().unwrap_or("").to_string(),
            );
            let seq = v["sequence"].as_u64().unwrap_or(0);
            let e = blocked.entry(key).or_insert(seq);
            *e = (*e).min(seq);
        }
    }
    acked.iter().all(|id| match all.get(id) {
        None => false,
        Some(v) => match state(v) {
            "DELIVERED" | "DEAD_LETTER" => true,
            _ => {
                let key = (
                    v["tenant"].as_str().unwrap_or("").to_string(),
                    v["aggregate"].as_str().unwrap_or("").to_string(),
                );
                blocked
                    .get(&key)
                    .is_some_and(|d| v["sequence"].as_u64().unwrap_or(0) > *d)
            }
        },
    })
}

fn tokens(policy: &Policy, ev: &Events, tenants: u64) -> Result<BTreeMap<String, String>> {
    let id = policy
        .identity
        .as_ref()
        .context("the policy has [events] but no [identity]")?;
    let key = dev_secret(&id.secret);
    let exp = epoch_ms() / 1000 + 6 * 3600;
    Ok((0..tenants)
        .map(|t| {
            let tenant = format!("tenant-{t}");
            let claims = json!({"iss": id.issuer, "aud": id.audience, "sub": "drill-producer", "exp": exp, ev.tenant_claim.clone(): tenant});
            (tenant, understudy_core::token::sign(&claims, key.as_bytes()))
        })
        .collect())
}

fn percentile(mut v: Vec<f64>, q: f64) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    Some(v[rank - 1])
}

fn verdict(name: &'static str, ok: bool, detail: String) -> Verdict {
    Verdict {
        name,
        ok: Some(ok),
        detail,
    }
}

pub fn run(opts: &Options) -> Result<Outcome> {
    let root = workspace_root().context("`understudy drill` runs inside an Understudy checkout (it needs scripts/edge-server.mjs and the npm packages)")?;
    let text = std::fs::read_to_string(&opts.scenario)
        .with_context(|| format!("{}: cannot read", opts.scenario.display()))?;
    let sc = EventsScenario::parse(&text)
        .map_err(|e| anyhow::anyhow!("{}: {e}", opts.scenario.display()))?;
    let scale = opts.time_scale.unwrap_or(sc.events.time_scale);
    if !(scale > 0.0 && scale <= 1.0) {
        bail!("--time-scale {scale} must be more than 0 and at most 1");
    }
    let count = opts.events.unwrap_or(if opts.full {
        sc.events.full_count
    } else {
        sc.events.count
    });

    let run_id = format!("d{}", epoch_ms() % 1_000_000_000);
    // The scratch directory (bake, outbox storage, runtime log) lives in the checkout like
    // the other drills' and is removed when dropped, whatever happens.
    let parent = root.join(".understudy/drill");
    std::fs::create_dir_all(&parent)
        .with_context(|| format!("cannot create {}", parent.display()))?;
    let scratch = tempfile::Builder::new()
        .prefix("events-")
        .tempdir_in(&parent)
        .with_context(|| format!("cannot create a directory in {}", parent.display()))?;
    let work = scratch.path().to_path_buf();
    let now = Millis(epoch_ms());
    let stamped = stamp_policy(&opts.policy, &work, now)?;
    let loaded = load_policy(&stamped, now);
    let Some(base) = loaded.policy.as_ref().filter(|_| !loaded.has_errors()) else {
        bail!(
            "{} is invalid (run `understudy check` on it); nothing was drilled",
            opts.policy.display()
        );
    };
    let Some(base_events) = &base.events else {
        bail!(
            "{} has no [events] section: an events scenario needs one (see docs/policy.md)",
            opts.policy.display()
        );
    };
    let mut policy = base.clone();
    let events = scale_events(base_events, scale);
    policy.events = Some(events.clone());
    let scale_line = format!(
        "time scale {scale}: backoff {}..{}, window {}, attempt timeout {}, {} attempts (policy: {}..{}, {}, {})",
        fmt(events.retry.backoff_base_ms),
        fmt(events.retry.backoff_max_ms),
        fmt(events.retry.window_ms),
        fmt(events.delivery.attempt_timeout_ms),
        events.retry.attempts,
        fmt(base_events.retry.backoff_base_ms),
        fmt(base_events.retry.backoff_max_ms),
        fmt(base_events.retry.window_ms),
        fmt(base_events.delivery.attempt_timeout_ms),
    );
    eprintln!(
        "events drill: {} — {count} events (+{} healthy) over {} aggregates, {scale_line}",
        sc.name, sc.events.healthy, sc.events.aggregates
    );

    // Bake.
    let edge_dir = dist::edge::locate(opts.edge.as_deref())?;
    let file = opts
        .policy
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let inputs = dist::Inputs {
        policy: &policy,
        catalog: loaded.catalog.as_ref(),
        policy_hash: &loaded.policy_hash,
        catalog_hash: &loaded.catalog_hash,
        policy_file: &file,
        validated_at_ms: now.0,
    };
    let built = dist::assemble(&inputs, &edge_dir)?;
    let dist_dir = work.join("dist");
    dist::write_dir(&dist_dir, &built)?;

    let origin = OriginServer::spawn(([127, 0, 0, 1], 0).into(), None)?;
    let launch = Launch {
        root: root.clone(),
        dist: dist_dir,
        origin: origin.url(),
        events_url: origin.events_url(),
        persist: work.join("persist"),
        log: work.join("edge.log"),
    };
    let edge = Arc::new(Mutex::new(Some(Edge::start(&launch)?)));
    let first_addr = edge
        .lock()
        .map_err(|_| anyhow::anyhow!("lock"))?
        .as_ref()
        .map(|e| e.addr)
        .context("no edge")?;
    let addr: Address = Arc::new(Mutex::new(first_addr));
    let admin_token = policy.admin.as_ref().map(|a| dev_secret(&a.secret));
    let run = Run {
        admin: Client::from_addr(first_addr, admin_token),
        addr: Arc::clone(&addr),
        policy: &policy,
        events: &events,
    };
    let tokens = tokens(&policy, &events, sc.events.tenants.max(1))?;
    let route = events.route.clone();
    let settle_limit =
        Duration::from_millis(events.retry.window_ms.saturating_mul(3)) + Duration::from_secs(90);
    let started = Instant::now();

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let result = rt.block_on(async {
        // 1. Healthy phase: the latency figure.
        let (healthy, _, _) = produce::plan("healthy", &run_id, sc.events.healthy, &sc.events, 7);
        let healthy_ids: BTreeSet<String> = healthy.iter().map(|e| e.event_id.clone()).collect();
        let h = produce::produce(
            healthy,
            Arc::clone(&addr),
            tokens.clone(),
            sc.events.producers,
            route.clone(),
            Duration::from_secs(120),
            Arc::new(|_| {}),
        )
        .await;
        let h_acked: BTreeSet<String> = h.acked.keys().cloned().collect();
        let (_, healthy_settled) = run.quiesce(&h_acked, settle_limit).await?;
        let ledger = origin.ledger();
        let mut lat = Vec::new();
        for c in &ledger.commits {
            if let Some(ack) = h
                .acked
                .get(&c.event_id)
                .filter(|_| healthy_ids.contains(&c.event_id))
            {
                lat.push(c.committed_at_ms.saturating_sub(*ack) as f64);
            }
        }
        let p95 = percentile(lat.clone(), 0.95);
        let p50 = percentile(lat, 0.5);

        // 2. Faulty phase, with the kill.
        // The full run's rules come first: every first delivery commits and resets, so every
        // event is delivered again (NFR-RES-004's replayed deliveries).
        let full_rules = if opts.full {
            sc.full_faults.clone()
        } else {
            Vec::new()
        };
        let mut rules = full_rules.clone();
        rules.extend(sc.faults.clone());
        origin.set_consumer(ConsumerConfig { rules, seed: 11 })?;
        let (faulty, swapped, dups) = produce::plan("faulty", &run_id, count, &sc.events, 13);
        let kill_at = if sc.events.kill_after > 0.0 {
            ((count as f64) * sc.events.kill_after).ceil() as usize
        } else {
            usize::MAX
        };
        let killed = Arc::new(Mutex::new(None::<(u64, String)>));
        let on_ack: Arc<dyn Fn(usize) + Send + Sync> = {
            let (edge, addr, killed, launch_root) = (
                Arc::clone(&edge),
                Arc::clone(&addr),
                Arc::clone(&killed),
                launch_clone(&launch),
            );
            Arc::new(move |n| {
                if n != kill_at {
                    return;
                }
                let (edge, addr, killed, launch) = (
                    Arc::clone(&edge),
                    Arc::clone(&addr),
                    Arc::clone(&killed),
                    launch_clone(&launch_root),
                );
                std::thread::spawn(move || {
                    let t0 = Instant::now();
                    if let Ok(mut slot) = edge.lock() {
                        if let Some(mut e) = slot.take() {
                            e.kill();
                        }
                        let note = match Edge::start(&launch) {
                            Ok(e) => {
                                if let Ok(mut a) = addr.lock() {
                                    *a = e.addr;
                                }
                                *slot = Some(e);
                                "restarted".to_string()
                            }
                            Err(err) => format!("restart failed: {err}"),
                        };
                        if let Ok(mut k) = killed.lock() {
                            *k = Some((t0.elapsed().as_millis() as u64, note));
                        }
                    }
                });
            })
        };
        let f = produce::produce(
            faulty.clone(),
            Arc::clone(&addr),
            tokens.clone(),
            sc.events.producers,
            route.clone(),
            Duration::from_secs(180),
            on_ack,
        )
        .await;
        // The restart may still be under way.
        for _ in 0..600 {
            if killed.lock().map(|k| k.is_some()).unwrap_or(true)
                || kill_at == usize::MAX
                || f.acked.len() < kill_at
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let mut acked: BTreeSet<String> = h_acked.clone();
        acked.extend(f.acked.keys().cloned());
        let (before_replay, settled1) = run.quiesce(&acked, settle_limit).await?;
        let status_before = run.status().await;
        // The operator fixes what dead-lettered the events (the scenario's faults stop; the
        // full run's transient resets go on), then replays them.
        origin.set_consumer(ConsumerConfig {
            rules: full_rules,
            seed: 17,
        })?;
        let mut dead_ever: BTreeMap<String, String> = BTreeMap::new();
        let mut replayed = 0u64;
        let mut replay_refused = Vec::new();
        let mut listing = before_replay.clone();
        let mut settled_final = settled1;
        for _ in 0..sc.events.replay_rounds {
            let dead: Vec<(String, String)> = listing
                .iter()
                .filter(|(_, v)| state(v) == "DEAD_LETTER" && v["skipped"] != Value::Bool(true))
                .map(|(id, v)| {
                    (
                        id.clone(),
                        v["last_error"].as_str().unwrap_or("").to_string(),
                    )
                })
                .collect();
            if dead.is_empty() {
                break;
            }
            for (id, why) in &dead {
                dead_ever.entry(id.clone()).or_insert_with(|| why.clone());
                let a = run.client().replay(id, Duration::from_secs(30)).await?;
                if a.status == 202 {
                    replayed += 1;
                } else if replay_refused.len() < 10 {
                    replay_refused.push(format!("{id}: {} {}", a.status, a.text));
                }
            }
            let (l, s) = run.quiesce(&acked, settle_limit).await?;
            listing = l;
            settled_final = s;
        }
        let status_after = run.status().await;
        Ok::<_, anyhow::Error>((
            h,
            f,
            p50,
            p95,
            healthy_settled,
            swapped,
            dups,
            before_replay,
            listing,
            settled_final,
            dead_ever,
            replayed,
            replay_refused,
            killed,
            status_before,
            status_after,
            acked,
        ))
    });
    let (
        h,
        f,
        p50,
        p95,
        healthy_settled,
        swapped,
        dups,
        before_replay,
        listing,
        settled_final,
        dead_ever,
        replayed,
        replay_refused,
        killed,
        status_before,
        status_after,
        acked,
    ) = result?;
    let elapsed_s = started.elapsed().as_secs_f64();
    let ledger = origin.ledger();
    drop(edge.lock().ok().and_then(|mut e| e.take()));
    origin.shutdown();

    // The check.
    let committed: BTreeMap<&str, usize> =
        ledger.commits.iter().fold(BTreeMap::new(), |mut m, c| {
            *m.entry(c.event_id.as_str()).or_insert(0) += 1;
            m
        });
    let mut lost = Vec::new();
    let mut delivered = 0u64;
    let mut dead_final = 0u64;
    for id in &acked {
        match listing.get(id).map(state) {
            Some("DELIVERED") if committed.contains_key(id.as_str()) => delivered += 1,
            Some("DEAD_LETTER") => dead_final += 1,
            other => lost.push(format!(
                "{id}: {}",
                other.unwrap_or("missing from the edge")
            )),
        }
    }
    let log_text = std::fs::read(&launch.log).unwrap_or_default();
    let log_lines = log_text
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .count();
    let in_log = |mark: &str| {
        log_text
            .windows(mark.len())
            .filter(|w| *w == mark.as_bytes())
            .count()
    };
    let redacted_in_logs = in_log(REDACTED_MARK);
    let payload_in_logs = in_log(PLAIN_MARK);
    let stored_redacted = files_containing(&launch.persist, REDACTED_MARK.as_bytes());
    let stored_plain = files_containing(&launch.persist, PLAIN_MARK.as_bytes());
    let storage_files = files_containing(&launch.persist, b"SQLite format 3").len();
    // Positive controls: the greps above must be able to find something. Event IDs are
    // stored in clear (they are keys) and logged (they are what operators search for).
    let ids_in_storage = !files_containing(&launch.persist, b"healthy-0").is_empty();
    let ids_in_logs = in_log("\"event_id\":\"healthy-0\"") > 0;
    let faults = ledger.faults.clone();
    let dead_classes: BTreeMap<String, u64> =
        dead_ever.values().fold(BTreeMap::new(), |mut m, why| {
            *m.entry(why.split(':').next().unwrap_or("").to_string())
                .or_insert(0) += 1;
            m
        });
    let kill = killed.lock().ok().and_then(|k| k.clone());
    let alert_names = |s: &Option<Value>| -> Vec<String> {
        s.as_ref()
            .and_then(|v| v["events"]["alerts"].as_array().cloned())
            .unwrap_or_default()
            .iter()
            .filter_map(|a| a["name"].as_str().map(str::to_string))
            .collect()
    };
    let alerts_before = alert_names(&status_before);
    let needed = if opts.full {
        FULL_REPLAYED_DELIVERIES
    } else {
        0
    };

    let mut verdicts = vec![
        verdict("NOTHING_LOST", lost.is_empty() && f.abandoned.is_empty(), format!("{} acked, {} delivered, {} dead letters, {} lost{}", acked.len(), delivered, dead_final, lost.len(), lost.first().map(|l| format!("; first: {l}")).unwrap_or_default())),
        verdict("NO_DUPLICATE_SIDE_EFFECT", ledger.duplicate_side_effects == 0 && ledger.duplicates_acknowledged >= needed, format!("{} duplicate side effects over {} replayed deliveries (required at least {needed})", ledger.duplicate_side_effects, ledger.duplicates_acknowledged)),
        verdict("PER_AGGREGATE_ORDER", ledger.order_violations == 0, format!("{} order violations{}", ledger.order_violations, ledger.violations.first().map(|v| format!("; first: {v}")).unwrap_or_default())),
        verdict("P95_DELIVERY_HEALTHY", healthy_settled && p95.is_some_and(|p| p <= P95_LIMIT_MS), format!("p95 {} ms, p50 {} ms from commit to acknowledgement over {} healthy events (limit {P95_LIMIT_MS} ms)", p95.map(|p| p.round()).unwrap_or(f64::NAN), p50.map(|p| p.round()).unwrap_or(f64::NAN), h.acked.len())),
        verdict("QUIESCED", settled_final, "every acknowledged event delivered or dead-lettered in the end".into()),
        verdict("REDACTED_NEVER_LOGGED", redacted_in_logs == 0 && payload_in_logs == 0 && ids_in_logs, format!("{log_lines} runtime log lines: {redacted_in_logs} with a redacted value, {payload_in_logs} with any payload value (event IDs found: {ids_in_logs})")),
        verdict("ENCRYPTED_AT_REST", stored_redacted.is_empty() && stored_plain.is_empty() && ids_in_storage, format!("{storage_files} SQLite files, {} holding a payload value (event IDs, stored in clear, found: {ids_in_storage})", stored_redacted.len() + stored_plain.len())),
        verdict("PRODUCERS_ANSWERED", f.refused_count == 0 && h.refused_count == 0, format!("{} refused answers{}", f.refused_count + h.refused_count, f.refused.first().map(|r| format!("; first: {r}")).unwrap_or_default())),
    ];
    if sc.events.kill_after > 0.0 {
        verdict_push(
            &mut verdicts,
            "KILLED_AND_RESTARTED",
            kill.as_ref().is_some_and(|(_, n)| n == "restarted"),
            match &kill {
                Some((ms, n)) => format!(
                    "SIGKILL to node and workerd after {} acks; {n} in {ms} ms on the same storage",
                    ((count as f64) * sc.events.kill_after).ceil()
                ),
                None => "the kill did not happen".into(),
            },
        );
    }
    if !dead_ever.is_empty() {
        verdict_push(&mut verdicts, "DEAD_LETTERS_REPLAYED", replay_refused.is_empty() && dead_final == 0, format!("{} dead letters ({}) replayed with their event IDs: {replayed} replays, {dead_final} dead at the end", dead_ever.len(), dead_classes.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", ")));
        verdict_push(
            &mut verdicts,
            "DEAD_LETTER_ALERT",
            alerts_before.iter().any(|a| a == "EVENTS_DEAD_LETTERS"),
            format!(
                "alerts on the status endpoint before replay: {}",
                if alerts_before.is_empty() {
                    "none".into()
                } else {
                    alerts_before.join(", ")
                }
            ),
        );
    }

    let json = json!({
        "scenario": sc.name,
        "policy": policy.service.name,
        "release": built.release_id,
        "time_scale": scale,
        "scale": scale_line,
        "full": opts.full,
        "elapsed_s": (elapsed_s * 10.0).round() / 10.0,
        "acked": acked.len(),
        "delivered": delivered,
        "dead_lettered": dead_ever.len(),
        "dead_lettered_by_error": dead_classes,
        "dead_letters_at_end": dead_final,
        "lost": lost.len(),
        "lost_events": lost.iter().take(20).collect::<Vec<_>>(),
        "duplicate_side_effects": ledger.duplicate_side_effects,
        "order_violations": ledger.order_violations,
        "replayed": replayed,
        "replayed_deliveries": ledger.duplicates_acknowledged,
        "p95_delivery_ms": p95,
        "p50_delivery_ms": p50,
        "healthy_events": h.acked.len(),
        "faulty_events": f.acked.len(),
        "consumer": {"deliveries": ledger.deliveries, "effects": ledger.effects, "gaps": ledger.gaps, "faults": faults, "missing_key": ledger.missing_key},
        "producers": {"out_of_order_sent": swapped, "duplicates_sent": dups, "duplicate_acks": f.duplicate_acks + h.duplicate_acks, "retried": f.retried + h.retried, "refused": f.refused, "abandoned": f.abandoned.len()},
        "kill": kill.map(|(ms, n)| json!({"restart_ms": ms, "result": n})),
        "alerts_before_replay": alerts_before,
        "status_before_replay": status_before.map(|s| s["events"].clone()),
        "status_after_replay": status_after.map(|s| s["events"].clone()),
        "logs": {"lines": log_lines, "redacted_values": redacted_in_logs, "payload_values": payload_in_logs},
        "storage": {"sqlite_files": storage_files, "files_with_payload_values": stored_redacted.len() + stored_plain.len()},
        "dead_letters_before_replay": before_replay.values().filter(|v| state(v) == "DEAD_LETTER").count(),
        "verdicts": verdicts,
    });
    let lines = vec![
        format!("Events drill {} ({scale_line})", sc.name),
        format!(
            "  acked {}  delivered {}  dead_lettered {}  lost {}  replayed {}",
            acked.len(),
            delivered,
            dead_ever.len(),
            lost.len(),
            replayed
        ),
        format!(
            "  duplicate_side_effects {} over {} replayed deliveries  order_violations {}",
            ledger.duplicate_side_effects, ledger.duplicates_acknowledged, ledger.order_violations
        ),
        format!(
            "  p95_delivery_ms {} (healthy, {} events)  consumer faults {:?}",
            p95.map(|p| p.round().to_string()).unwrap_or("-".into()),
            h.acked.len(),
            json["consumer"]["faults"]
        ),
        format!("  {} s", (elapsed_s * 10.0).round() / 10.0),
    ];
    if let Some(dir) = &opts.report {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        std::fs::write(
            dir.join("events-drill.json"),
            serde_json::to_vec_pretty(&json)?,
        )?;
    }
    drop(scratch);
    Ok(Outcome {
        json,
        lines,
        verdicts,
    })
}

fn verdict_push(v: &mut Vec<Verdict>, name: &'static str, ok: bool, detail: String) {
    v.push(verdict(name, ok, detail));
}

fn launch_clone(l: &Launch) -> Launch {
    l.clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(state: &str, aggregate: &str, sequence: u64) -> Value {
        json!({"state": state, "tenant": "t", "aggregate": aggregate, "sequence": sequence, "skipped": false})
    }

    #[test]
    fn pending_events_count_as_settled_only_behind_a_dead_letter() {
        let acked: BTreeSet<String> = ["a1", "a2", "b1"].iter().map(|s| s.to_string()).collect();
        let mut all = BTreeMap::from([
            ("a1".to_string(), row("DEAD_LETTER", "a", 1)),
            ("a2".to_string(), row("PENDING", "a", 2)),
            ("b1".to_string(), row("DELIVERED", "b", 1)),
        ]);
        assert!(settled(&all, &acked));
        all.insert("a1".into(), row("DELIVERED", "a", 1));
        assert!(
            !settled(&all, &acked),
            "a2 is pending with nothing holding it"
        );
        all.remove("b1");
        all.insert("a2".into(), row("DELIVERED", "a", 2));
        assert!(
            !settled(&all, &acked),
            "an acked event missing from the edge is not settled"
        );
    }

    #[test]
    fn the_retry_clock_scales_and_replay_is_switched_on() {
        let text =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../policies/api.toml"))
                .unwrap();
        let loaded = understudy_compiler::validate::load_text(
            std::path::Path::new("api.toml"),
            text,
            Millis(0),
        );
        let ev = loaded.policy.unwrap().events.unwrap();
        let s = scale_events(&ev, 0.05);
        assert_eq!(
            (
                s.retry.backoff_base_ms,
                s.retry.backoff_max_ms,
                s.retry.window_ms
            ),
            (350, 15_000, 45_000)
        );
        assert_eq!(s.delivery.attempt_timeout_ms, 500);
        assert!(s.replay && !ev.replay);
        let (worst, _) = s.retry.worst_case(s.delivery.attempt_timeout_ms);
        assert!(
            worst <= s.retry.window_ms,
            "the scaled schedule still fits its window"
        );
    }

    #[test]
    fn percentiles_use_the_nearest_rank() {
        assert_eq!(percentile(vec![], 0.95), None);
        assert_eq!(
            percentile((1..=100).map(f64::from).collect(), 0.95),
            Some(95.0)
        );
        assert_eq!(percentile(vec![3.0], 0.5), Some(3.0));
    }
}
