//! `understudy drill --compare-simulate`: the differential test of the two drivers of one
//! engine. The scenario is played against the real Worker in workerd, then replayed by
//! `simulate` on the same policy, catalog, KV entries and clock start, and every request's
//! status, `X-Degraded-Reason` and answering tier must agree. The Worker and `simulate`
//! share the engine, so a disagreement is a driver doing something the engine did not ask
//! (or the runtime behaving unlike its model) — the drift this exists to catch.

use understudy_compiler::simulate::{self, scenario::Scenario, RequestResult, Source};
use understudy_core::catalog::Catalog;
use understudy_core::policy::Policy;

use super::observe::Observed;

/// What a client saw of one request, reduced to what both drivers must agree on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub status: u16,
    pub reason: Option<String>,
    pub tier: Option<String>,
}

impl std::fmt::Display for Seen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {} {}",
            self.status,
            self.reason.as_deref().unwrap_or("-"),
            self.tier.as_deref().unwrap_or("-")
        )
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Disagreement {
    pub index: u64,
    pub edge: Seen,
    pub simulate: Option<Seen>,
}

fn of_simulate(r: &RequestResult) -> Seen {
    Seen {
        status: r.status,
        reason: r.reason.clone(),
        tier: match &r.source {
            Source::Tier(t) => Some(t.clone()),
            _ => None,
        },
    }
}

fn of_edge(o: &Observed) -> Seen {
    let tier = match o.source() {
        Source::Tier(t) => Some(t),
        _ => None,
    };
    Seen {
        status: o.status,
        reason: o.headers.reason.clone(),
        tier,
    }
}

/// Replays `sc` (with its clock starting at `start_ms`, the drill's own start) through
/// `simulate` and lists every request whose answer differs from what the edge gave.
pub fn compare(
    policy: &Policy,
    catalog: Option<&Catalog>,
    sc: &Scenario,
    start_ms: u64,
    obs: &[Observed],
) -> Vec<Disagreement> {
    let mut sc = sc.clone();
    sc.start_ms = start_ms;
    let run = simulate::run(policy, catalog, &sc);
    let mut out = Vec::new();
    for o in obs {
        let edge = of_edge(o);
        let sim = run
            .results
            .iter()
            .find(|r| r.index == o.index)
            .map(of_simulate);
        if sim.as_ref() != Some(&edge) {
            out.push(Disagreement {
                index: o.index,
                edge,
                simulate: sim,
            });
        }
    }
    out
}

/// The first `n` disagreements, one line each.
pub fn describe(d: &[Disagreement], n: usize) -> Vec<String> {
    d.iter()
        .take(n)
        .map(|x| {
            format!(
                "request {:>5}: edge {} | simulate {}",
                x.index,
                x.edge,
                x.simulate
                    .as_ref()
                    .map_or_else(|| "no answer".to_string(), ToString::to_string)
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::drill::observe::Disclosed;

    #[test]
    fn a_different_reason_is_a_disagreement_and_the_same_answer_is_not() {
        let seen = |reason: &str| Seen {
            status: 200,
            reason: Some(reason.into()),
            tier: Some("keyword".into()),
        };
        let o = Observed {
            index: 3,
            status: 200,
            headers: Disclosed {
                reason: Some("ML_5XX".into()),
                source: Some("fallback".into()),
                tier: Some("keyword".into()),
                degraded: Some("true".into()),
                ..Disclosed::default()
            },
            ..Observed::default()
        };
        assert_eq!(of_edge(&o), seen("ML_5XX"));
        assert_ne!(of_edge(&o), seen("ML_TIMEOUT"));
        let lines = describe(
            &[Disagreement {
                index: 3,
                edge: seen("ML_5XX"),
                simulate: Some(seen("ML_TIMEOUT")),
            }],
            10,
        );
        assert_eq!(
            lines,
            ["request     3: edge 200 ML_5XX keyword | simulate 200 ML_TIMEOUT keyword"]
        );
    }
}
