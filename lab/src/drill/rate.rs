//! `understudy drill --find-rate`: the highest sustained arrival rate at which a scenario
//! keeps every invariant (its `[drill]` limits included: seed 000's p95 ≤ 55 ms). A bisection
//! over rates: each probe is a whole drill at that rate (the run keeps its duration), and a
//! rate passes when no invariant is broken. Machine noise makes the boundary fuzzy, so the
//! report lists every probe with its p95, not only the answer.

use anyhow::Result;
use serde::Serialize;

use super::{run, Options};

/// One probe of the search.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Probe {
    pub rate: f64,
    pub passed: bool,
    pub p95_ms: Option<f64>,
    /// The invariants that broke.
    pub broken: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Found {
    /// The highest rate that passed (None: not even the lowest).
    pub sustained_rps: Option<f64>,
    pub probes: Vec<Probe>,
}

/// Bisects `[lo, hi]` in `steps` probes of `probe(rate)`. The bounds are probed first: a
/// failing `lo` ends the search, a passing `hi` is the answer.
pub fn bisect(lo: f64, hi: f64, steps: usize, mut probe: impl FnMut(f64) -> Probe) -> Found {
    let mut probes = Vec::new();
    let first = probe(lo);
    let lo_ok = first.passed;
    probes.push(first);
    if !lo_ok {
        return Found {
            sustained_rps: None,
            probes,
        };
    }
    let top = probe(hi);
    let hi_ok = top.passed;
    probes.push(top);
    if hi_ok {
        return Found {
            sustained_rps: Some(hi),
            probes,
        };
    }
    let (mut good, mut bad) = (lo, hi);
    for _ in 0..steps {
        let mid = ((good + bad) / 2.0).round();
        if mid <= good || mid >= bad {
            break;
        }
        let p = probe(mid);
        if p.passed {
            good = mid;
        } else {
            bad = mid;
        }
        probes.push(p);
    }
    Found {
        sustained_rps: Some(good),
        probes,
    }
}

/// Runs the search with whole drills.
pub fn find(opts: &Options, lo: f64, hi: f64, steps: usize) -> Result<Found> {
    let mut error = None;
    let found = bisect(lo, hi, steps, |rate| {
        let o = Options {
            rate: Some(rate),
            report: None,
            logs: None,
            compare_simulate: false,
            ..opts.clone()
        };
        eprintln!("drill --find-rate: probing {rate:.0} req/s…");
        match run(&o) {
            Ok(Some(out)) => {
                // An inconclusive check counts against the rate too: at that rate the host
                // stalled the run, which says it cannot carry it here either.
                let broken: Vec<String> = out
                    .broken()
                    .iter()
                    .map(|v| v.name.to_string())
                    .chain(
                        out.inconclusive()
                            .iter()
                            .map(|v| format!("{} (inconclusive)", v.name)),
                    )
                    .collect();
                let p95 = out.json["figures"]["latency"]["p95_ms"].as_f64();
                eprintln!(
                    "drill --find-rate: {rate:.0} req/s: p95 {} ms, {}",
                    p95.map_or("?".into(), |p| format!("{p:.1}")),
                    if broken.is_empty() {
                        "held".to_string()
                    } else {
                        format!("broke {}", broken.join(", "))
                    }
                );
                Probe {
                    rate,
                    passed: broken.is_empty(),
                    p95_ms: p95,
                    broken,
                }
            }
            Ok(None) | Err(_) => {
                if error.is_none() {
                    error = Some(format!("the drill at {rate} req/s could not run"));
                }
                Probe {
                    rate,
                    passed: false,
                    p95_ms: None,
                    broken: vec!["RUN".into()],
                }
            }
        }
    });
    if let Some(e) = error {
        if found.probes.iter().all(|p| p.broken == ["RUN"]) {
            anyhow::bail!("{e}");
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(limit: f64) -> impl FnMut(f64) -> Probe {
        move |rate| Probe {
            rate,
            passed: rate <= limit,
            p95_ms: None,
            broken: vec![],
        }
    }

    #[test]
    fn bisection_finds_the_boundary_within_its_steps() {
        let f = bisect(50.0, 2400.0, 8, at(333.0));
        let got = f.sustained_rps.unwrap();
        assert!((300.0..=333.0).contains(&got), "{got}");
        assert_eq!(f.probes.len(), 10);
        assert_eq!(bisect(50.0, 2400.0, 8, at(10.0)).sustained_rps, None);
        assert_eq!(
            bisect(50.0, 2400.0, 8, at(5000.0)).sustained_rps,
            Some(2400.0)
        );
    }
}
