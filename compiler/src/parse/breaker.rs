//! `[breaker]`: the circuit breaker's mode and numbers [P-BREAKER]. The mode decides which
//! keys the table has: the schema says so with one branch per mode.

use schemars::JsonSchema;
use toml_span::value::Value;
use toml_span::{DeserError, Deserialize};
use understudy_core::policy::{Breaker, FleetScope, RateBreaker, Scope, DEFAULT_COORDINATOR};

use super::leaf::*;
use super::origin::{HOUR, MINUTE};
use super::route::bug;
use super::strings::Binding;
use super::table::{Problems, Table, Unknown};

understudy_core::words! {
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Mode {
        Off = "off",
        Consecutive = "consecutive",
        Rate = "rate",
    }
}

impl Words for Mode {
    const NAME: &'static str = "BreakerMode";
    const ALL: &'static [(&'static str, Mode)] = Mode::ALL;
}

understudy_core::words! {
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum ScopeWord {
        Isolate = "isolate",
        Fleet = "fleet",
    }
}

impl Words for ScopeWord {
    const NAME: &'static str = "BreakerScope";
    const ALL: &'static [(&'static str, ScopeWord)] = ScopeWord::ALL;
}

/// [F-SCOPE] The report interval when the policy names none: this, or a tenth of the
/// window when that is shorter (the longest interval `ERR_FLEET_REPORT_INTERVAL` allows).
pub const DEFAULT_REPORT_INTERVAL_MS: u64 = 1_000;
/// …and a verdict's lifetime: this many report intervals.
pub const DEFAULT_TTL_INTERVALS: u64 = 3;
/// [F-SCOPE] `report_interval`'s valid range, in ms: the policy's key and a scenario's
/// `[fleet] report_interval` (`simulate::fleet::spec`) are both read against it.
pub const REPORT_INTERVAL_MS: (u64, u64) = (100, MINUTE);

/// [P-BREAKER] Circuit breaker: off, consecutive (seed 002) or rate (seed 000).
#[derive(Debug, Clone, JsonSchema)]
#[serde(tag = "mode", rename_all = "snake_case")]
#[schemars(rename = "Breaker")]
pub enum RawBreaker {
    /// No breaker: every request pays the race.
    Off(RawOff),
    /// Open after N consecutive failures, one half-open trial after the cool-down.
    Consecutive(RawConsecutive),
    /// Seed 000's PRIMARY_HEALTHY / DEGRADED_FALLBACK / RECOVERING_PROBE machine.
    Rate(Box<RawRate>),
}

#[derive(Debug, Clone, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Off")]
pub struct RawOff {
    #[serde(skip)]
    pub unknown: Unknown,
}

#[derive(Debug, Clone, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Consecutive")]
pub struct RawConsecutive {
    /// Consecutive failures that open it (1..=1000).
    pub failures: Spanned<Count<1, 1000>>,
    /// Time open before the half-open trial (1s..=1h).
    pub cooldown: Spanned<Dur<1_000, HOUR>>,
    #[serde(skip)]
    pub unknown: Unknown,
}

#[derive(Debug, Clone, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Rate")]
pub struct RawRate {
    /// Sliding window for the failure ratio and p95 (1s..=1h).
    pub window: Spanned<Dur<1_000, HOUR>>,
    /// Trip at this failure ratio (default 0.15; above 0, up to 1).
    pub failure_ratio: Option<Spanned<Ratio<false>>>,
    /// Calls needed in the window before the ratio counts (default 20).
    pub min_calls: Option<Spanned<Count<1, 1_000_000>>>,
    /// Trip when the window's p95 latency exceeds this (1ms..=1m).
    pub slow_call_p95: Spanned<Dur<1, MINUTE>>,
    /// Time degraded before probing (1s..=1h).
    pub hold_down: Spanned<Dur<1_000, HOUR>>,
    /// Share of traffic probing (default 0.02; above 0, up to 1).
    pub probe_fraction: Option<Spanned<Ratio<false>>>,
    /// Probe calls before a verdict (default 20).
    pub probe_min_calls: Option<Spanned<Count<1, 1_000_000>>>,
    /// Promote at this success ratio (default 0.995; above 0, up to 1).
    pub probe_success_ratio: Option<Spanned<Ratio<false>>>,
    /// Promote when probes' p95 is at most this (1ms..=1m).
    pub probe_p95: Spanned<Dur<1, MINUTE>>,
    /// Extra hold after a failed probe (default 60s, 1s..=1h).
    pub failed_probe_hold: Option<Spanned<Dur<1_000, HOUR>>>,
    /// Whose evidence decides: the fleet's through a coordinator, or this isolate's alone
    /// (default "fleet"; docs/adr/011-fleet-scoped-breaker.md).
    pub scope: Option<Spanned<Word<ScopeWord>>>,
    /// The coordinator's Durable Object binding (fleet scope; default BREAKER_COORDINATOR).
    pub coordinator: Option<Spanned<Binding>>,
    /// How often an isolate with anything abnormal reports (fleet scope; default 1s or a
    /// tenth of the window if shorter, 100ms..=1m; at most a tenth of the window).
    pub report_interval: Option<Spanned<Dur<{ REPORT_INTERVAL_MS.0 }, { REPORT_INTERVAL_MS.1 }>>>,
    /// How long a verdict holds after it arrives (fleet scope; default three report
    /// intervals, 200ms..=1h; at least two).
    pub verdict_ttl: Option<Spanned<Dur<200, HOUR>>>,
    #[serde(skip)]
    pub unknown: Unknown,
}

impl<'de> Deserialize<'de> for RawBreaker {
    fn deserialize(v: &mut Value<'de>) -> Result<Self, DeserError> {
        let mut t = Table::new(v)?;
        let Some(mode) = t.req::<Word<Mode>>("mode") else {
            // Without a mode its keys cannot be judged: report the mode alone.
            return Err(DeserError {
                errors: t.th.errors,
            });
        };
        Ok(match mode.value.0 {
            Mode::Off => RawBreaker::Off(RawOff {
                unknown: Unknown(t.finish()?),
            }),
            Mode::Consecutive => {
                let failures = t.req("failures");
                let cooldown = t.req("cooldown");
                let unknown = Unknown(t.finish()?);
                RawBreaker::Consecutive(RawConsecutive {
                    failures: failures.ok_or_else(bug)?,
                    cooldown: cooldown.ok_or_else(bug)?,
                    unknown,
                })
            }
            Mode::Rate => {
                let window = t.req("window");
                let failure_ratio = t.opt("failure_ratio");
                let min_calls = t.opt("min_calls");
                let slow_call_p95 = t.req("slow_call_p95");
                let hold_down = t.req("hold_down");
                let probe_fraction = t.opt("probe_fraction");
                let probe_min_calls = t.opt("probe_min_calls");
                let probe_success_ratio = t.opt("probe_success_ratio");
                let probe_p95 = t.req("probe_p95");
                let failed_probe_hold = t.opt("failed_probe_hold");
                let scope = t.opt("scope");
                let coordinator = t.opt("coordinator");
                let report_interval = t.opt("report_interval");
                let verdict_ttl = t.opt("verdict_ttl");
                let unknown = Unknown(t.finish()?);
                RawBreaker::Rate(Box::new(RawRate {
                    window: window.ok_or_else(bug)?,
                    failure_ratio,
                    min_calls,
                    slow_call_p95: slow_call_p95.ok_or_else(bug)?,
                    hold_down: hold_down.ok_or_else(bug)?,
                    probe_fraction,
                    probe_min_calls,
                    probe_success_ratio,
                    probe_p95: probe_p95.ok_or_else(bug)?,
                    failed_probe_hold,
                    scope,
                    coordinator,
                    report_interval,
                    verdict_ttl,
                    unknown,
                }))
            }
        })
    }
}

impl Problems for RawBreaker {
    fn problems(&self, out: &mut Vec<toml_span::Error>) {
        match self {
            RawBreaker::Off(o) => o.unknown.problems(out),
            RawBreaker::Consecutive(c) => c.unknown.problems(out),
            RawBreaker::Rate(r) => r.unknown.problems(out),
        }
    }
}

impl RawRate {
    /// The scope and, in fleet scope, its settings with their defaults.
    pub fn lower_scope(&self) -> Scope {
        match self.scope.map(|s| s.value.0) {
            Some(ScopeWord::Fleet) | None => {
                let interval = self.report_interval.map_or(
                    DEFAULT_REPORT_INTERVAL_MS.min(self.window.value.0 / 10),
                    |v| v.value.0,
                );
                Scope::Fleet(FleetScope {
                    coordinator: self
                        .coordinator
                        .as_ref()
                        .map_or(DEFAULT_COORDINATOR.to_string(), |b| b.value.0.clone()),
                    report_interval_ms: interval,
                    verdict_ttl_ms: self
                        .verdict_ttl
                        .map_or(DEFAULT_TTL_INTERVALS * interval, |v| v.value.0),
                })
            }
            Some(ScopeWord::Isolate) => Scope::Isolate,
        }
    }
}

impl RawBreaker {
    pub fn lower(&self) -> Breaker {
        match self {
            RawBreaker::Off(_) => Breaker::Off,
            RawBreaker::Consecutive(c) => Breaker::Consecutive {
                failures: c.failures.value.0 as u32,
                cooldown_ms: c.cooldown.value.0,
            },
            RawBreaker::Rate(r) => Breaker::Rate(RateBreaker {
                window_ms: r.window.value.0,
                failure_ratio: r.failure_ratio.map_or(0.15, |v| v.value.0),
                min_calls: r.min_calls.map_or(20, |v| v.value.0 as u32),
                slow_call_p95_ms: r.slow_call_p95.value.0,
                hold_down_ms: r.hold_down.value.0,
                probe_fraction: r.probe_fraction.map_or(0.02, |v| v.value.0),
                probe_min_calls: r.probe_min_calls.map_or(20, |v| v.value.0 as u32),
                probe_success_ratio: r.probe_success_ratio.map_or(0.995, |v| v.value.0),
                probe_p95_ms: r.probe_p95.value.0,
                failed_probe_hold_ms: r.failed_probe_hold.map_or(60_000, |v| v.value.0),
                scope: r.lower_scope(),
            }),
        }
    }
}
