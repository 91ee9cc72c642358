//! [F-SCOPE] One breaker seeing all the traffic: the policy's own rule with every call in one
//! window, what no pooling of the same evidence beats. `simulate` runs it beside the fleet when
//! a scenario bounds the fleet scope by it (`[fleet] degrade_behind_one_breaker`): an incident
//! the rule itself is slow to see (a partial outage: seed 000 opens on the p95 of a 30 s
//! window, and 30% of calls slow pass its 5% only some 5 s in) is judged by how much later
//! than that breaker the fleet degrades — the cost of pooling across isolates and regions.

use understudy_core::catalog::Catalog;
use understudy_core::policy::Policy;

use super::super::scenario::Scenario;
use super::spec::{FleetSpec, Split};
use super::{figures, run, scoped, Figures};

/// Its column's name.
pub const ONE_BREAKER: &str = "one breaker";

/// The scenario over one isolate in isolate scope, when `spec` bounds the fleet by it.
pub fn run_one(
    policy: &Policy,
    catalog: Option<&Catalog>,
    sc: &Scenario,
    spec: &FleetSpec,
    (onset, end): (u64, u64),
) -> Result<Option<Figures>, String> {
    if spec.degrade_behind_one_breaker_ms.is_none() {
        return Ok(None);
    }
    let one = FleetSpec {
        isolates: 1,
        split: Split::Uniform,
        ..spec.clone()
    };
    let p = scoped(policy, false, &one)?;
    let r = run(&p, catalog, sc, &one)?;
    Ok(Some(figures(ONE_BREAKER, &r, onset, end)))
}

/// What the fleet scope misses of `degrade_behind_one_breaker` against `one`'s time to
/// degrade (`never` for either misses it unless both are).
pub fn behind(spec: &FleetSpec, fleet: &Figures, one: Option<&Figures>) -> Option<String> {
    let bound = spec.degrade_behind_one_breaker_ms?;
    let one = one?;
    let secs = |v: Option<f64>| v.map_or("never".to_string(), |s| format!("{s:.2} s"));
    let met = match (fleet.degrade_s, one.degrade_s) {
        (Some(f), Some(o)) => (f - o) * 1000.0 <= bound as f64 + 1e-6,
        (None, None) => true,
        (Some(_), None) => true,
        (None, Some(_)) => false,
    };
    (!met).then(|| {
        format!(
            "fleet scope: time to degrade {}, more than {:.1} s after one breaker seeing all the traffic ({})",
            secs(fleet.degrade_s),
            bound as f64 / 1000.0,
            secs(one.degrade_s)
        )
    })
}
