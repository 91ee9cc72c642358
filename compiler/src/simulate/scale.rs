//! `--time-scale F` (0 < F ≤ 1) applied to a policy: a drill shrinks an incident's clock,
//! and the breaker's clocks shrink with it; a replay of such a drill's logs scales the
//! policies it replays the same way, so they meet the incident the drill's edge met.

use understudy_core::policy::{Breaker, Policy};

/// The same time scale applied to the breaker's clocks. Count thresholds (min calls, probe
/// calls) stay, so the probe fraction grows by 1/F: a shortened probe phase still sees as
/// many probe calls at the same arrival rate.
pub fn scale_policy(policy: &Policy, f: f64) -> Policy {
    let mut out = policy.clone();
    if (f - 1.0).abs() < f64::EPSILON {
        return out;
    }
    let s = |x: u64| ((x as f64 * f).round() as u64).max(1);
    match &mut out.breaker {
        Breaker::Off => {}
        Breaker::Consecutive { cooldown_ms, .. } => *cooldown_ms = s(*cooldown_ms),
        Breaker::Rate(r) => {
            r.window_ms = s(r.window_ms);
            r.hold_down_ms = s(r.hold_down_ms);
            r.failed_probe_hold_ms = s(r.failed_probe_hold_ms);
            r.probe_fraction = (r.probe_fraction / f).min(1.0);
            if let understudy_core::policy::Scope::Fleet(fl) = &mut r.scope {
                fl.report_interval_ms = s(fl.report_interval_ms);
                fl.verdict_ttl_ms = s(fl.verdict_ttl_ms);
            }
        }
    }
    out
}
