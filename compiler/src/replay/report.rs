//! The replay side by side: as logged, the logged policy replayed, the candidate. One
//! figure per cell, or a range `best–worst` where the logs could not tell (the two cases
//! gave different figures): never a guess presented as a figure.

use serde_json::{json, Value};

use super::figures::{Figures, Recovery};
use super::world::Unknowable;
use super::{Column, Logs, Replay};

/// Most skipped records listed one by one (all are counted).
pub const MAX_SKIPS_LISTED: usize = 20;

fn pct(n: u64, of: u64) -> f64 {
    if of == 0 {
        0.0
    } else {
        n as f64 * 100.0 / of as f64
    }
}

/// `a` or, when the cases differ, `lo–hi`.
fn range(a: f64, b: f64, unit: &str, digits: usize) -> String {
    let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
    if (hi - lo).abs() < 10f64.powi(-(digits as i32)) / 2.0 {
        format!("{lo:.digits$}{unit}")
    } else {
        format!("{lo:.digits$}–{hi:.digits$}{unit}")
    }
}

fn secs(ms: Option<u64>) -> Option<f64> {
    ms.map(|m| m as f64 / 1000.0)
}

fn opt_range(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) => range(a, b, " s", 2),
        (Some(a), None) | (None, Some(a)) => format!("{a:.2} s or not seen"),
        (None, None) => "not seen".into(),
    }
}

/// One row's cells: as logged, then each column's (best, worst).
struct Cells<'a> {
    logged: &'a Figures,
    columns: [&'a Column; 2],
    /// The replayed columns' width.
    w: usize,
}

impl Cells<'_> {
    fn row(&self, label: &str, f: &dyn Fn(&Figures) -> f64, unit: &str, digits: usize) -> String {
        let mut out = format!(
            "  {label:<30} {:>16}",
            range(f(self.logged), f(self.logged), unit, digits)
        );
        for c in self.columns {
            out.push_str(&format!(
                " {:>w$}",
                range(f(&c.best), f(&c.worst), unit, digits),
                w = self.w
            ));
        }
        out.push('\n');
        out
    }

    fn incident_row(&self, label: &str, f: &dyn Fn(&Recovery) -> Option<f64>, n: usize) -> String {
        let get = |fig: &Figures| fig.incidents.get(n).and_then(f);
        let mut out = format!(
            "  {label:<30} {:>16}",
            opt_range(get(self.logged), get(self.logged))
        );
        for c in self.columns {
            out.push_str(&format!(
                " {:>w$}",
                opt_range(get(&c.best), get(&c.worst)),
                w = self.w
            ));
        }
        out.push('\n');
        out
    }
}

fn unknowable(name: &str, u: &Unknowable) -> Option<String> {
    if !u.any() {
        return None;
    }
    let mut parts = Vec::new();
    if u.calls_past_censoring > 0 {
        parts.push(format!(
            "{} calls waited longer than the logs saw the origin take (a call the logs saw cut stays \"slower than that\")",
            u.calls_past_censoring
        ));
    }
    if u.calls_unobserved > 0 {
        parts.push(format!(
            "{} calls fell where the logs saw no call and the calls around disagreed",
            u.calls_unobserved
        ));
    }
    if u.reads > 0 {
        parts.push(format!(
            "{} tier reads waited past a logged timeout or read where the logs saw none",
            u.reads
        ));
    }
    Some(format!(
        "  {name}: {}; its figures are ranges from the best case (each such call answered as soon as it could) to the worst (never).\n",
        parts.join("; ")
    ))
}

/// The human report.
pub fn human(logs: &Logs, r: &Replay) -> String {
    let mut out = format!(
        "Replay of {} (release {}): {} requests over {:.1} s, {} isolate{}\n",
        r.service,
        r.release,
        r.requests,
        r.span_ms as f64 / 1000.0,
        r.isolates,
        if r.isolates == 1 { "" } else { "s" }
    );
    for f in &logs.files {
        out.push_str(&format!(
            "  logs: {} — {}{}, {} records, {} request lines\n",
            f.path.display(),
            f.format.describe(),
            if f.gzip { ", gzip" } else { "" },
            f.records,
            f.request_lines
        ));
    }
    if !logs.skips.is_empty() {
        out.push_str(&format!("  skipped {} records:\n", logs.skips.len()));
        for s in logs.skips.iter().take(MAX_SKIPS_LISTED) {
            out.push_str(&format!("    {}:{}: {}\n", s.file.display(), s.line, s.why));
        }
        if logs.skips.len() > MAX_SKIPS_LISTED {
            out.push_str(&format!(
                "    … and {} more\n",
                logs.skips.len() - MAX_SKIPS_LISTED
            ));
        }
    }
    if !logs.not_replayed.is_empty() {
        let parts: Vec<String> = logs
            .not_replayed
            .iter()
            .map(|(k, n)| format!("{n} {k}"))
            .collect();
        out.push_str(&format!(
            "  not replayed (decided before the breaker and the race): {}\n",
            parts.join(", ")
        ));
    }
    if logs.other > 0 {
        out.push_str(&format!(
            "  left out: {} lines of other services or releases\n",
            logs.other
        ));
    }
    if r.calls_cut_busy > 0 {
        out.push_str(&format!(
            "  {} calls were cut on a busy isolate (its timers ran late; the answer may have waited in its queue): not taken as evidence about the origin\n",
            r.calls_cut_busy
        ));
    }
    for (n, i) in r.incidents.iter().enumerate() {
        let good = i
            .first_good_ms
            .map_or("no good call after it in the logs".to_string(), |g| {
                format!("good again by {:.3} s", g as f64 / 1000.0)
            });
        out.push_str(&format!(
            "  incident {}: the origin failed from {:.3} s (first bad call) until at least {:.3} s (last bad call); {good}\n",
            n + 1,
            i.onset_ms as f64 / 1000.0,
            i.last_bad_ms as f64 / 1000.0
        ));
    }
    if r.incidents.is_empty() {
        out.push_str("  no incident: the origin's calls never mostly failed for a second\n");
    }
    let (ha, hb) = headers(r);
    let w = ha.chars().count().max(hb.chars().count()).max(22);
    out.push_str(&format!(
        "\n  {:<30} {:>16} {:>w$} {:>w$}\n",
        "", "as logged", "logged policy", "candidate"
    ));
    out.push_str(&format!("  {:<30} {:>16} {ha:>w$} {hb:>w$}\n", "", ""));
    let c = Cells {
        logged: &r.as_logged,
        columns: [&r.logged_policy, &r.candidate],
        w,
    };
    out.push_str(&c.row("answers", &|f| f.answers as f64, "", 0));
    out.push_str(&c.row("live", &|f| pct(f.live, f.answers), "%", 1));
    out.push_str(&c.row(
        "degraded (fallback)",
        &|f| pct(f.degraded, f.answers),
        "%",
        1,
    ));
    let mut tiers: Vec<&String> = [
        &r.as_logged,
        &r.logged_policy.best,
        &r.candidate.best,
        &r.candidate.worst,
    ]
    .iter()
    .flat_map(|f| f.by_tier.keys())
    .collect();
    tiers.sort();
    tiers.dedup();
    for t in tiers {
        out.push_str(&c.row(
            &format!("  from {t}"),
            &|f| pct(f.by_tier.get(t).copied().unwrap_or(0), f.answers),
            "%",
            1,
        ));
    }
    out.push_str(&c.row(
        "unavailable (5xx)",
        &|f| pct(f.unavailable, f.answers),
        "%",
        1,
    ));
    out.push_str(&c.row("model calls", &|f| f.model_calls as f64, "", 0));
    out.push_str(&c.row("probes", &|f| f.probes as f64, "", 0));
    out.push_str(&c.row("latency p50", &|f| f.latency_p50_ms as f64, " ms", 0));
    out.push_str(&c.row("latency p95", &|f| f.latency_p95_ms as f64, " ms", 0));
    out.push_str(&c.row("latency p99", &|f| f.latency_p99_ms as f64, " ms", 0));
    for (n, inc) in r.incidents.iter().enumerate() {
        let onset = inc.onset_ms;
        out.push_str(&c.incident_row(
            &format!("incident {}: degraded after", n + 1),
            &|x| secs(x.degraded_at_ms.map(|t| t.saturating_sub(onset))),
            n,
        ));
        out.push_str(&c.incident_row(
            &format!("incident {}: recovered at", n + 1),
            &|x| secs(x.recovered_at_ms),
            n,
        ));
        // After the origin's last failure seen; it may have recovered as late as the
        // first good call after it, which shortens this by the gap.
        let last_bad = inc.last_bad_ms;
        out.push_str(&c.incident_row(
            &format!("incident {}: recovered after", n + 1),
            &|x| secs(x.recovered_at_ms.map(|t| t.saturating_sub(last_bad))),
            n,
        ));
    }
    if !r.incidents.is_empty() {
        out.push_str(
            "  (times in s after the first request; \"degraded after\" counts from the first bad call, \"recovered after\" from the last one; \"not seen\": not within the logs)\n",
        );
    }
    let notes: Vec<String> = [
        ("logged policy", &r.logged_policy),
        ("candidate", &r.candidate),
    ]
    .iter()
    .filter_map(|(what, c)| unknowable(what, &c.unknowable))
    .collect();
    if !notes.is_empty() {
        out.push_str("\nWhat the logs cannot tell:\n");
        for n in notes {
            out.push_str(&n);
        }
    }
    for c in [&r.logged_policy, &r.candidate] {
        if c.lost > 0 {
            out.push_str(&format!(
                "\n{} requests of the {} run were not answered: a defect of the replay, please report it\n",
                c.lost,
                short(&c.name)
            ));
        }
    }
    out
}

/// A policy's name as a column header: its file name.
fn short(name: &str) -> String {
    std::path::Path::new(name)
        .file_name()
        .map_or(name.to_string(), |f| f.to_string_lossy().into_owned())
}

/// The two replayed columns' headers: their file names, or with their directory when the
/// file names are the same.
fn headers(r: &Replay) -> (String, String) {
    let (a, b) = (short(&r.logged_policy.name), short(&r.candidate.name));
    if a != b || r.logged_policy.name == r.candidate.name {
        return (a, b);
    }
    let two = |name: &str| {
        let p = std::path::Path::new(name);
        match (p.parent().and_then(|d| d.file_name()), p.file_name()) {
            (Some(d), Some(f)) => format!("{}/{}", d.to_string_lossy(), f.to_string_lossy()),
            _ => name.to_string(),
        }
    };
    (two(&r.logged_policy.name), two(&r.candidate.name))
}

/// The JSON report: the input, the incidents, and every column's figures (each replayed
/// column in its best and worst case).
pub fn json(logs: &Logs, r: &Replay) -> Value {
    json!({
        "input": {
            "files": logs.files,
            "skipped": logs.skips.len(),
            "skips": logs.skips.iter().take(MAX_SKIPS_LISTED * 5).collect::<Vec<_>>(),
            "not_replayed": logs.not_replayed,
            "other_services_or_releases": logs.other,
        },
        "replay": r,
    })
}
