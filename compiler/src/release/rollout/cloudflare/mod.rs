//! [R-VERSION] [R-GRADUAL] The rollout's Cloudflare driver (ADR 012): wrangler for uploads
//! and deployments, the Analytics Engine SQL API for each version's figures, credentials
//! from the environment wrangler reads (`CLOUDFLARE_API_TOKEN`, `CLOUDFLARE_ACCOUNT_ID`,
//! `CLOUDFLARE_API_BASE_URL`).
//!
//! This module builds what is sent — every wrangler command line, the two SQL queries — and
//! reads what comes back; [`driver`] runs them. The queries are in docs/rollout.md ("The
//! queries it sends"), and a test keeps the two equal.

pub mod driver;

use serde::Deserialize;

use super::latency::{Histogram, TOP};
use super::Figures;
use crate::dist::wrangler::worker_name;

/// Where the Cloudflare API is when `CLOUDFLARE_API_BASE_URL` does not say.
pub const API_BASE: &str = "https://api.cloudflare.com/client/v4";

/// The Analytics Engine dataset the built Worker writes to (its `wrangler.toml`).
pub fn dataset(service: &str) -> String {
    format!("understudy_{}", worker_name(service).replace('-', "_"))
}

/// `wrangler versions upload`, run in the release's directory: a version tagged with the
/// release ID, its message naming the policy version and the catalog.
pub fn upload_args(
    release: &str,
    policy_version: &str,
    catalog_sha256: Option<&str>,
) -> Vec<String> {
    let catalog = catalog_sha256.map_or("no catalog".to_string(), |h| {
        format!("catalog {}", &h[..h.len().min(12)])
    });
    vec![
        "versions".into(),
        "upload".into(),
        "--tag".into(),
        release.into(),
        "--message".into(),
        format!("understudy release {release}: policy {policy_version}, {catalog}"),
    ]
}

/// `wrangler versions deploy`, run in the new release's directory: the new version at
/// `new_percent`, the old at the rest; a version at 0% is left out (a deployment names at
/// most two versions, and the percentages sum to 100).
pub fn deploy_args(
    old_version: &str,
    new_version: &str,
    new_percent: u8,
    message: &str,
) -> Vec<String> {
    let p = new_percent.min(100);
    let mut args = vec!["versions".to_string(), "deploy".to_string()];
    if p < 100 {
        args.push(format!("{old_version}@{}%", 100 - p));
    }
    if p > 0 {
        args.push(format!("{new_version}@{p}%"));
    }
    args.extend(["--yes".into(), "--message".into(), message.into()]);
    args
}

/// The version ID in `wrangler versions upload`'s output (`Worker Version ID: <uuid>`).
pub fn parse_version_id(output: &str) -> Option<String> {
    output.lines().find_map(|l| {
        let id = l.trim().strip_prefix("Worker Version ID:")?.trim();
        let ok = id.len() == 36 && id.chars().all(|c| c.is_ascii_hexdigit() || c == '-');
        ok.then(|| id.to_ascii_lowercase())
    })
}

/// A release ID as a SQL string literal: release IDs are `r-` and hex digits, checked
/// before they reach a query, so no quoting is needed beyond the quotes.
fn lit(release: &str) -> String {
    let safe: String = release
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
        .collect();
    format!("'{safe}'")
}

/// The rows both queries read: this service's answers (no refusals of bad requests, no
/// fleet points) from the two releases, in `[from, to)` (whole seconds: the SQL API's
/// timestamps are).
fn filter(service: &str, old: &str, new: &str, from_ms: u64, to_ms: u64) -> String {
    let service: String = service
        .chars()
        .filter(|c| *c != '\'' && *c != '\\')
        .collect();
    format!(
        "WHERE index1 = '{service}'\n  AND blob1 IN ({}, {})\n  AND blob2 IN ('live', 'fallback', 'unavailable', 'bake_invalid')\n  AND timestamp >= toDateTime({}) AND timestamp < toDateTime({})",
        lit(old),
        lit(new),
        from_ms / 1000,
        to_ms.div_ceil(1000)
    )
}

/// Each version's answers, degraded answers and no-tier 5xx answers, weighted by
/// `_sample_interval` (Analytics Engine samples at high rates), and the rows sampled
/// (`sampled`): the evidence behind the estimates.
pub fn counts_sql(service: &str, old: &str, new: &str, from_ms: u64, to_ms: u64) -> String {
    format!(
        "SELECT blob1 AS release,\n  count() AS sampled,\n  SUM(_sample_interval) AS answers,\n  sumIf(_sample_interval, blob2 IN ('fallback', 'unavailable', 'bake_invalid')) AS degraded,\n  sumIf(_sample_interval, blob2 IN ('unavailable', 'bake_invalid')) AS unavailable\nFROM {}\n{}\nGROUP BY release\nFORMAT JSON",
        dataset(service),
        filter(service, old, new, from_ms, to_ms)
    )
}

/// Each version's latencies in the rollout's histogram buckets (`release::rollout::latency`:
/// bucket `floor(ln(ms) / ln(1.1)) + 1`, 0 under 1 ms). No branch can throw: the logarithm
/// is taken of `greatest(double1, 1)`, never of a 0 ms answer (one served from memory
/// records 0), whichever branch of the `if` the SQL engine evaluates.
pub fn latency_sql(service: &str, old: &str, new: &str, from_ms: u64, to_ms: u64) -> String {
    format!(
        "SELECT blob1 AS release,\n  if(double1 < 1, 0, toUInt32(log(greatest(double1, 1)) / log(1.1)) + 1) AS bucket,\n  SUM(_sample_interval) AS n\nFROM {}\n{}\nGROUP BY release, bucket\nFORMAT JSON",
        dataset(service),
        filter(service, old, new, from_ms, to_ms)
    )
}

/// The SQL API's JSON answer (`FORMAT JSON`): its rows are in `data`.
#[derive(Deserialize)]
struct Answer {
    data: Vec<serde_json::Map<String, serde_json::Value>>,
}

/// A number the SQL API may send as a number or as a string (64-bit integers are strings).
fn number(row: &serde_json::Map<String, serde_json::Value>, key: &str) -> Result<f64, String> {
    match row.get(key) {
        Some(serde_json::Value::Number(n)) => {
            n.as_f64().ok_or_else(|| format!("`{key}` is not a number"))
        }
        Some(serde_json::Value::String(s)) => s
            .parse::<f64>()
            .map_err(|_| format!("`{key}` is {s:?}, not a number")),
        other => Err(format!("`{key}` is {other:?}, not a number")),
    }
    .and_then(|v| {
        if v.is_finite() && v >= 0.0 {
            Ok(v)
        } else {
            Err(format!("`{key}` is {v}"))
        }
    })
}

/// Both queries' answers read into (old, new) figures.
pub fn read_figures(
    counts: &str,
    latency: &str,
    old: &str,
    new: &str,
) -> Result<(Figures, Figures), String> {
    let counts: Answer = serde_json::from_str(counts)
        .map_err(|e| format!("the counts query's answer is not the SQL API's JSON: {e}"))?;
    let latency: Answer = serde_json::from_str(latency)
        .map_err(|e| format!("the latency query's answer is not the SQL API's JSON: {e}"))?;
    let mut out = [Figures::default(), Figures::default()];
    let which =
        |row: &serde_json::Map<String, serde_json::Value>| -> Result<Option<usize>, String> {
            match row.get("release").and_then(|v| v.as_str()) {
                Some(r) if r == old => Ok(Some(0)),
                Some(r) if r == new => Ok(Some(1)),
                Some(_) => Ok(None),
                None => Err("a row without `release`".into()),
            }
        };
    // Sampled points weigh `_sample_interval` answers each, but they are the evidence: the
    // judgement's bounds are taken over the rows sampled, the estimates scaled down to them
    // (otherwise a sampled window would look `_sample_interval` times surer than it is).
    let mut scale = [1.0f64; 2];
    for row in &counts.data {
        let Some(i) = which(row)? else { continue };
        let answers = number(row, "answers")?;
        let sampled = match row.get("sampled") {
            Some(_) => number(row, "sampled")?,
            None => answers,
        };
        let s = if answers > 0.0 {
            (sampled / answers).min(1.0)
        } else {
            1.0
        };
        scale[i] = s;
        let f = &mut out[i];
        f.answers = (answers * s).round() as u64;
        f.degraded = (number(row, "degraded")? * s).round() as u64;
        f.unavailable = (number(row, "unavailable")? * s).round() as u64;
    }
    for row in &latency.data {
        let Some(i) = which(row)? else { continue };
        let b = (number(row, "bucket")?.round() as u64).min(u64::from(TOP)) as u16;
        let n = (number(row, "n")? * scale[i]).round() as u64;
        *out[i].latency.0.entry(b).or_default() += n;
    }
    let [o, n] = out;
    Ok((o, n))
}

/// Keeps [`Histogram`] in this module's vocabulary for the driver's tests.
pub type Latency = Histogram;

#[cfg(test)]
mod tests;
