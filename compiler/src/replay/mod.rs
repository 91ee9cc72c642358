//! `understudy replay`: what would this policy have done during the incident the logs
//! saw? The edge's own log lines (docs/observability.md) hold every arrival, every call to
//! the origin with how it ended, and what each tier consulted found; the engine runs
//! identically in virtual time (`simulate`). Together they replay production's traffic
//! through a candidate policy before it ships.
//!
//! Three columns, side by side: the figures **as logged**; the **logged policy replayed**
//! (the same engine over the same arrivals against the world the logs saw — how far this
//! column is from the first is how far to trust the third); and the **candidate**. The
//! logs cannot tell what a call cut at 45 ms would have answered at 60 ms, so a candidate
//! that waits longer (or calls when nobody did) is replayed twice — every such call
//! answering as soon as it could (best case) and never (worst case) — and its figures are
//! ranges, never a guess presented as a figure (docs/replay.md).

pub mod drive;
pub mod figures;
pub mod incidents;
pub mod line;
pub mod observed;
pub mod plot;
pub mod read;
pub mod recovery;
pub mod report;
pub mod requests;
pub mod world;

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;
use understudy_core::catalog::Catalog;
use understudy_core::policy::Policy;

use self::figures::Figures;
use self::incidents::Incident;
use self::line::{Line, REPLAYED};
use self::observed::Observed;
use self::read::{FileSummary, Skip};
use self::world::{Case, Unknowable};

/// What the logs hold, read and checked.
pub struct Logs {
    pub files: Vec<FileSummary>,
    pub skips: Vec<Skip>,
    pub service: String,
    pub release: String,
    /// The lines replayed, in arrival order.
    pub lines: Vec<Line>,
    /// Lines of the service and release left out, by outcome (refused before any I/O,
    /// the admin endpoint): no policy decision to replay.
    pub not_replayed: BTreeMap<String, u64>,
    /// Lines of other services or releases left out (`--service`, `--release`).
    pub other: u64,
    pub first_ms: u64,
    pub span_ms: u64,
    pub isolates: usize,
}

/// Which lines to take.
#[derive(Debug, Clone, Default)]
pub struct Select {
    pub service: Option<String>,
    pub release: Option<String>,
}

/// Reads `paths` and keeps the lines of one service and one release. Two of either mixed,
/// with nothing chosen, is an error listing them (and where each first appears).
pub fn logs(paths: &[PathBuf], select: &Select) -> Result<Logs, String> {
    let read = read::read(paths)?;
    let name = |f: usize| read.files[f].path.display().to_string();
    let pick = |what: &str, flag: &str, chosen: &Option<String>, key: &dyn Fn(&Line) -> &str| {
        let mut seen: BTreeMap<&str, (u64, String)> = BTreeMap::new();
        for s in &read.lines {
            let e = seen
                .entry(key(&s.entry))
                .or_insert((0, format!("{}:{}", name(s.file), s.line)));
            e.0 += 1;
        }
        match chosen {
            Some(c) if seen.contains_key(c.as_str()) => Ok(c.clone()),
            Some(c) => Err(format!(
                "no line of {what} {c:?} in the logs; they hold {}",
                list(&seen)
            )),
            None if seen.len() == 1 => Ok(seen
                .keys()
                .next()
                .map(|s| s.to_string())
                .unwrap_or_default()),
            None => Err(format!(
                "the logs mix {} {what}s: {}; replay one at a time with {flag} NAME",
                seen.len(),
                list(&seen)
            )),
        }
    };
    let service = pick("service", "--service", &select.service, &|l: &Line| {
        l.service.as_str()
    })?;
    let release = pick("release", "--release", &select.release, &|l: &Line| {
        l.policy_version.as_str()
    })?;
    let mut not_replayed = BTreeMap::new();
    let mut other = 0;
    let mut lines = Vec::new();
    for s in read.lines {
        if s.entry.service != service || s.entry.policy_version != release {
            other += 1;
        } else if REPLAYED.contains(&s.entry.outcome.as_str()) {
            lines.push(s.entry);
        } else {
            *not_replayed.entry(s.entry.outcome.clone()).or_insert(0) += 1;
        }
    }
    if lines.is_empty() {
        return Err(format!(
            "no request of {service} ({release}) in the logs reached the breaker and the race; nothing to replay"
        ));
    }
    lines.sort_by_key(|l| l.at_ms);
    let first_ms = lines.first().map_or(0, |l| l.at_ms);
    let last_ms = lines
        .iter()
        .map(|l| l.at_ms + l.latency_ms)
        .max()
        .unwrap_or(first_ms);
    let isolates = lines
        .iter()
        .map(|l| l.isolate.as_str())
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    Ok(Logs {
        files: read.files,
        skips: read.skips,
        service,
        release,
        lines,
        not_replayed,
        other,
        first_ms,
        span_ms: last_ms - first_ms,
        isolates,
    })
}

fn list(seen: &BTreeMap<&str, (u64, String)>) -> String {
    seen.iter()
        .map(|(k, (n, at))| format!("{k} ({n} lines, first at {at})"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A policy to replay, with its baked catalog.
pub struct Subject<'a> {
    pub name: String,
    pub policy: &'a Policy,
    pub catalog: Option<&'a Catalog>,
}

/// One replayed column: the best and the worst case (equal where the logs tell all).
#[derive(Debug, Clone, Serialize)]
pub struct Column {
    pub name: String,
    pub best: Figures,
    pub worst: Figures,
    pub unknowable: Unknowable,
    /// Requests lost by the run (a defect of the replay: counted, never hidden).
    pub lost: u64,
}

/// Everything a replay found.
#[derive(Debug, Clone, Serialize)]
pub struct Replay {
    pub service: String,
    pub release: String,
    pub requests: u64,
    pub isolates: usize,
    pub span_ms: u64,
    pub window_ms: u64,
    /// Calls the logs saw cut on a busy isolate (`cut_busy`): no evidence about the origin,
    /// left out of what it did.
    pub calls_cut_busy: u64,
    pub incidents: Vec<Incident>,
    pub as_logged: Figures,
    pub logged_policy: Column,
    pub candidate: Column,
}

/// A window for the time series: about a hundred over the logs' span, at a round length.
pub fn default_window_ms(span_ms: u64) -> u64 {
    let target = (span_ms / 100).max(100);
    let mut base = 100u64;
    loop {
        for m in [1, 2, 5] {
            let v = base * m;
            if v >= target || v >= 3_600_000 {
                return v;
            }
        }
        base *= 10;
    }
}

/// Replays `logs` through `logged` (the policy the logs were written under) and
/// `candidate`, in virtual time starting at `start_ms` (ms since the epoch: the instant the
/// catalog and tokens are judged at); `time_scale`: the logs come from a drill run at it
/// (1 for a service's own logs).
pub fn replay(
    logs: &Logs,
    logged: &Subject<'_>,
    candidate: &Subject<'_>,
    start_ms: u64,
    window_ms: u64,
    time_scale: f64,
) -> Result<Replay, String> {
    let obs = Observed::scaled(&logs.lines, logs.first_ms, time_scale);
    let incidents = incidents::find(&obs.failed_edge);
    let as_logged = figures::figures(&logs.lines, logs.first_ms, &incidents, window_ms);
    let column = |s: &Subject<'_>| -> Result<Column, String> {
        let best = drive::run(
            s.policy,
            s.catalog,
            &logs.lines,
            logs.first_ms,
            &obs,
            Case::Best,
            start_ms,
        )?;
        let worst = drive::run(
            s.policy,
            s.catalog,
            &logs.lines,
            logs.first_ms,
            &obs,
            Case::Worst,
            start_ms,
        )?;
        let (b, w) = (best.unknowable, worst.unknowable);
        let unknowable = Unknowable {
            calls_past_censoring: b.calls_past_censoring.max(w.calls_past_censoring),
            calls_unobserved: b.calls_unobserved.max(w.calls_unobserved),
            reads: b.reads.max(w.reads),
        };
        Ok(Column {
            name: s.name.clone(),
            best: figures::figures(&best.lines, start_ms, &incidents, window_ms),
            worst: figures::figures(&worst.lines, start_ms, &incidents, window_ms),
            unknowable,
            lost: best.lost.max(worst.lost),
        })
    };
    Ok(Replay {
        service: logs.service.clone(),
        release: logs.release.clone(),
        requests: logs.lines.len() as u64,
        isolates: logs.isolates,
        span_ms: logs.span_ms,
        window_ms,
        calls_cut_busy: logs
            .lines
            .iter()
            .flat_map(|l| &l.calls)
            .filter(|c| c.cut_busy())
            .count() as u64,
        incidents: incidents.clone(),
        as_logged,
        logged_policy: column(logged)?,
        candidate: column(candidate)?,
    })
}

#[cfg(test)]
mod tests;
