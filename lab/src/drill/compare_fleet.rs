//! `understudy drill --isolates K --compare-simulate`: the fleet's differential test. The
//! drill's K isolates in workerd and `simulate --isolates K` on the same policy, scenario,
//! split and clock start must agree on each isolate's breaker: the same episodes (from
//! healthy to not healthy and back, counted from the fault's onset) at the same moments,
//! within a stated tolerance. Per request the two cannot agree exactly: a thin isolate's
//! answer depends on when the coordinator's reply lands, which in workerd is a real round
//! trip and in `simulate` a fixed delay.

use understudy_compiler::simulate::fleet::{self, FleetSpec};
use understudy_compiler::simulate::scenario::Scenario;
use understudy_core::breaker::Mode;
use understudy_core::catalog::Catalog;
use understudy_core::policy::{Breaker, Policy, Scope};

use super::observe::{mode_kind, SeenTransition};

/// One way, isolate to coordinator, as `simulate` models it for the drill: both run on this
/// machine, where a Durable Object answers in about a millisecond.
pub const REPORT_DELAY_MS: u64 = 1;

/// An isolate's breaker reduced to what both drivers must agree on: when it left healthy and
/// when it came back, ms after the start, from the fault's onset on.
#[derive(Debug, Clone, PartialEq)]
pub struct Episodes {
    /// (left healthy, back to healthy or `None` if not by the run's end)
    pub spans: Vec<(f64, Option<f64>)>,
}

/// Episodes from a time-ordered list of (ms after the start, mode name).
pub fn episodes<'a>(changes: impl IntoIterator<Item = (f64, &'a str)>, onset: f64) -> Episodes {
    let mut spans: Vec<(f64, Option<f64>)> = Vec::new();
    let (mut down, mut begun) = (false, false);
    for (t, mode) in changes {
        let healthy = mode_kind(mode) == Some(Mode::Healthy);
        if t < onset {
            down = !healthy;
            continue;
        }
        if !begun && down {
            // Not healthy at the onset already: an episode from the onset.
            spans.push((onset, None));
        }
        begun = true;
        match (down, healthy) {
            (false, false) => spans.push((t, None)),
            (true, true) => {
                if let Some(last) = spans.last_mut() {
                    last.1 = Some(t);
                }
            }
            _ => {}
        }
        down = !healthy;
    }
    if !begun && down {
        spans.push((onset, None));
    }
    Episodes { spans }
}

/// The tolerance on each moment: two report intervals (the coordinator's evidence is the
/// reports, which the two drivers send at different instants) plus two of the isolate's mean
/// request gaps (a mode moves at a request or a reply, and requests land on either side).
pub fn tolerance_ms(policy: &Policy, sc: &Scenario, isolates: usize) -> f64 {
    let interval = match &policy.breaker {
        Breaker::Rate(r) => match &r.scope {
            Scope::Fleet(f) => f.report_interval_ms as f64,
            Scope::Isolate => 0.0,
        },
        _ => 0.0,
    };
    2.0 * interval + 2.0 * isolates as f64 * sc.interval_us as f64 / 1000.0
}

/// One isolate's comparison.
#[derive(Debug, Clone, PartialEq)]
pub struct IsolateCompared {
    pub isolate: usize,
    pub edge: Episodes,
    pub simulate: Episodes,
    /// The largest difference between matching moments, ms (`None` when the episodes differ
    /// in number or one side came back and the other did not).
    pub worst_ms: Option<f64>,
}

impl IsolateCompared {
    pub fn agrees(&self, tol_ms: f64) -> bool {
        self.worst_ms.is_some_and(|w| w <= tol_ms)
    }
}

fn worst(a: &Episodes, b: &Episodes) -> Option<f64> {
    if a.spans.len() != b.spans.len() {
        return None;
    }
    let mut worst = 0.0f64;
    for ((a0, a1), (b0, b1)) in a.spans.iter().zip(&b.spans) {
        worst = worst.max((a0 - b0).abs());
        match (a1, b1) {
            (Some(x), Some(y)) => worst = worst.max((x - y).abs()),
            (None, None) => {}
            _ => return None,
        }
    }
    Some(worst)
}

/// Replays `sc` (its clock starting at `start_ms`) over the drill's isolates in `simulate`
/// — spread round robin over `regions` regions as the drill spreads them, each region's
/// coordinator and the global one a hop of [`REPORT_DELAY_MS`] away — and compares each
/// isolate's episodes with what the edge's isolates reported.
pub fn compare(
    policy: &Policy,
    catalog: Option<&Catalog>,
    sc: &Scenario,
    (start_ms, regions): (u64, usize),
    edge: &[&[SeenTransition]],
) -> Result<Vec<IsolateCompared>, String> {
    let mut sc = sc.clone();
    sc.start_ms = start_ms;
    let onset = fleet::fault_span(&sc)
        .map(|(from, _)| from as f64)
        .ok_or("the scenario has no fault to compare the fleet's breakers over")?;
    let mut spec = FleetSpec {
        report_delay_ms: REPORT_DELAY_MS,
        global_delay_ms: REPORT_DELAY_MS,
        ..FleetSpec::uniform(edge.len() as u64)
    };
    if regions > 1 {
        spec = spec.with_regions(regions)?;
    }
    let run = fleet::run(policy, catalog, &sc, &spec)?;
    Ok(edge
        .iter()
        .zip(&run.changes)
        .enumerate()
        .map(|(isolate, (seen, changes))| {
            let edge = episodes(seen.iter().map(|t| (t.at_ms, t.to)), onset);
            let simulate = episodes(changes.iter().map(|(t, m)| (*t as f64, *m)), onset);
            IsolateCompared {
                isolate,
                worst_ms: worst(&edge, &simulate),
                edge,
                simulate,
            }
        })
        .collect())
}

fn show(e: &Episodes) -> String {
    if e.spans.is_empty() {
        return "never left healthy".into();
    }
    e.spans
        .iter()
        .map(|(a, b)| match b {
            Some(b) => format!("{a:.0}–{b:.0} ms"),
            None => format!("{a:.0} ms–"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// One line per isolate.
pub fn describe(rows: &[IsolateCompared], tol_ms: f64) -> Vec<String> {
    rows.iter()
        .map(|r| {
            format!(
                "isolate {}: {} — edge {} | simulate {}",
                r.isolate,
                match r.worst_ms {
                    Some(w) if w <= tol_ms => format!("agrees (worst {w:.0} ms)"),
                    Some(w) => format!("DIFFERS by {w:.0} ms"),
                    None => "DIFFERS in its episodes".into(),
                },
                show(&r.edge),
                show(&r.simulate)
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn episodes_count_from_the_onset_and_agree_only_within_the_tolerance() {
        let edge = episodes(
            [
                (10.0, "PRIMARY_HEALTHY"),
                (1_200.0, "DEGRADED_FALLBACK"),
                (4_000.0, "RECOVERING_PROBE"),
                (4_100.0, "DEGRADED_FALLBACK"),
                (6_000.0, "PRIMARY_HEALTHY"),
            ],
            1_000.0,
        );
        assert_eq!(
            edge.spans,
            [(1_200.0, Some(6_000.0))],
            "probing is not healthy"
        );
        let already = episodes([(500.0, "OPEN"), (3_000.0, "CLOSED")], 1_000.0);
        assert_eq!(
            already.spans,
            [(1_000.0, Some(3_000.0))],
            "open at the onset"
        );
        assert_eq!(
            episodes([(500.0, "OPEN")], 1_000.0).spans,
            [(1_000.0, None)]
        );
        let sim = episodes(
            [(1_150.0, "DEGRADED_FALLBACK"), (6_250.0, "PRIMARY_HEALTHY")],
            1_000.0,
        );
        let row = IsolateCompared {
            isolate: 0,
            worst_ms: worst(&edge, &sim),
            edge: edge.clone(),
            simulate: sim,
        };
        assert_eq!(row.worst_ms, Some(250.0));
        assert!(row.agrees(250.0));
        assert!(!row.agrees(249.0));
        // One side back and the other not, or a second episode on one side: they differ.
        let open = episodes([(1_150.0, "DEGRADED_FALLBACK")], 1_000.0);
        assert_eq!(worst(&edge, &open), None);
        let twice = episodes(
            [
                (1_150.0, "OPEN"),
                (5_000.0, "CLOSED"),
                (5_500.0, "OPEN"),
                (6_000.0, "CLOSED"),
            ],
            1_000.0,
        );
        assert_eq!(twice.spans.len(), 2);
        assert_eq!(worst(&edge, &twice), None);
        assert!(describe(
            &[IsolateCompared {
                isolate: 3,
                worst_ms: None,
                edge,
                simulate: open
            }],
            250.0
        )[0]
        .contains("DIFFERS in its episodes"));
    }
}
