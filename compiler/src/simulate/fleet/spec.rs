//! The scenario's `[fleet]` table (docs/scenarios.md, "The fleet"), checked.

use std::collections::BTreeMap;

use serde::Deserialize;
use understudy_core::breaker::fleet::place::REGIONS;
use understudy_core::breaker::member::REPORT_TIMEOUT_MS;
use understudy_core::policy::{Breaker, FleetScope, Policy, Scope, DEFAULT_COORDINATOR};
use understudy_core::time::{format_duration as fmt, parse_duration};

use crate::parse::breaker::REPORT_INTERVAL_MS;
use crate::parse::origin::{DAY, MINUTE};

/// Most isolates a simulation runs.
pub const MAX_ISOLATES: u64 = 20_000;

/// `report_delay`'s valid range, in ms: one way, so that a report's round trip fits in the
/// isolate's timeout ([`REPORT_TIMEOUT_MS`]); a longer one is a lost report (`report_loss`).
pub const REPORT_DELAY_MS: (u64, u64) = (0, REPORT_TIMEOUT_MS / 2);
/// `global_delay`'s valid range, in ms: one way, at most the longest report interval the
/// policy allows (the global coordinator merges the regions once an interval).
pub const GLOBAL_DELAY_MS: (u64, u64) = (0, MINUTE);

/// `coordinator_down`'s `from` and `to`, in ms after the scenario's start: within a day (a
/// simulated fleet's run is minutes; the driver's clock is in microseconds).
pub const DOWN_AT_MS: (u64, u64) = (0, DAY);
/// `degrade_within` and `recover_within`: more than nothing (no fleet degrades or recovers
/// at the very instant of a change) and at most a day — the policy's longest breaker clocks
/// (`window`, `hold_down`, `cooldown`) are an hour each.
pub const WITHIN_MS: (u64, u64) = (1, DAY);

/// The scenario's `[fleet]` table.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawFleet {
    /// How many isolates share the traffic (`--isolates` overrides it).
    pub isolates: u64,
    /// `uniform` (default) or `zipf`: isolate k gets a share ∝ 1 / (k + 1)^exponent.
    pub split: Option<String>,
    pub zipf_exponent: Option<f64>,
    /// Overrides the policy's `report_interval` (and sets `verdict_ttl` to three of them).
    pub report_interval: Option<String>,
    /// Share of reports (or their answers) lost on the way: the isolate's driver gives up
    /// after its timeout.
    pub report_loss: Option<f64>,
    /// One way, isolate to coordinator (default 20ms).
    pub report_delay: Option<String>,
    /// A stretch with the coordinator failing.
    pub coordinator_down: Option<RawDown>,
    /// Requests a second one coordinator serves (default 1000: one Durable Object), and
    /// how many may wait before it refuses one (default 1000).
    pub coordinator_capacity: Option<u64>,
    pub coordinator_queue: Option<u64>,
    /// The traffic's split over regions: a share per region (location hints such as
    /// `enam`, `weur`); one coordinator per region and a global one. Default: one region.
    pub regions: Option<BTreeMap<String, f64>>,
    /// One way, a region's coordinator to the global one (default 60ms).
    pub global_delay: Option<String>,
    /// What the fleet scope must achieve (seed 000: `3s` and `45s`).
    pub degrade_within: Option<String>,
    pub recover_within: Option<String>,
    /// How much later than one breaker seeing all the traffic the fleet scope may degrade
    /// (`simulate` runs that breaker too: one isolate, isolate scope) — the bound for an
    /// incident the policy's own rule is slow to see, wherever the evidence is pooled.
    pub degrade_behind_one_breaker: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawDown {
    pub from: String,
    pub to: String,
    /// `error` (answers 500), `hang` (never answers: the driver's timeout), or `reset` (at
    /// `from` the coordinator restarts with nothing; `to` is ignored).
    pub how: String,
    /// Which: `regions` (every region's coordinator, the default), `global`, or one
    /// region by name.
    pub coordinator: Option<String>,
}

/// Which coordinator a stretch down strikes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Struck {
    /// Every coordinator: the regions' and the global one.
    All,
    Regions,
    Global,
    Region(String),
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Split {
    Uniform,
    Zipf(f64),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Down {
    Error,
    Hang,
    Reset,
}

/// The `[fleet]` table, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct FleetSpec {
    pub isolates: u64,
    pub split: Split,
    pub report_interval_ms: Option<u64>,
    pub report_loss: f64,
    pub report_delay_ms: u64,
    /// `[from, to)` in ms after the start.
    pub down: Option<(u64, u64, Down)>,
    pub struck: Struck,
    pub capacity_rps: u64,
    pub queue: u64,
    /// (region, share of the isolates), shares summing to 1; one `("fleet", 1.0)` without
    /// regions.
    pub regions: Vec<(String, f64)>,
    /// Isolate k belongs to region k mod R (`--regions R`, as `drill --regions` spreads its
    /// isolates) rather than by a hash of its index against the shares.
    pub round_robin: bool,
    pub global_delay_ms: u64,
    pub degrade_within_ms: Option<u64>,
    pub recover_within_ms: Option<u64>,
    pub degrade_behind_one_breaker_ms: Option<u64>,
}

impl FleetSpec {
    pub fn uniform(isolates: u64) -> FleetSpec {
        FleetSpec {
            isolates,
            split: Split::Uniform,
            report_interval_ms: None,
            report_loss: 0.0,
            report_delay_ms: 20,
            down: None,
            struck: Struck::Regions,
            capacity_rps: 1_000,
            queue: 1_000,
            regions: vec![("fleet".into(), 1.0)],
            round_robin: false,
            global_delay_ms: 60,
            degrade_within_ms: None,
            recover_within_ms: None,
            degrade_behind_one_breaker_ms: None,
        }
    }

    /// `--regions R`: the isolates spread round robin over the first R regions of
    /// [`REGIONS`] (the busiest first), one coordinator each and a global one when R > 1.
    pub fn with_regions(mut self, r: usize) -> Result<FleetSpec, String> {
        if !(1..=REGIONS.len()).contains(&r) {
            return Err(format!(
                "--regions {r}: a whole number from 1 to {}",
                REGIONS.len()
            ));
        }
        if r as u64 > self.isolates {
            return Err(format!(
                "--regions {r}: more regions than the {} isolates",
                self.isolates
            ));
        }
        self.regions = REGIONS[..r]
            .iter()
            .map(|g| (g.name().to_string(), 1.0 / r as f64))
            .collect();
        self.round_robin = true;
        Ok(self)
    }
}

fn dur(what: &str, s: &str) -> Result<u64, String> {
    parse_duration(s).map_err(|e| format!("[fleet] {what}: {e}"))
}

/// Why `degrade_within` and `recover_within` have the range they have.
pub const WITHIN_WHY: &str =
    "a time after the fault's onset or end; the policy's longest breaker clocks are an hour each";

/// A duration of the table within its valid range, the range and why in the refusal.
fn ranged(what: &str, s: &str, (lo, hi): (u64, u64), why: &str) -> Result<u64, String> {
    let ms = dur(what, s)?;
    if (lo..=hi).contains(&ms) {
        return Ok(ms);
    }
    Err(format!(
        "[fleet] {what}: `{s}` is outside its valid range {}..={} ({why})",
        fmt(lo),
        fmt(hi)
    ))
}

/// Checks a `[fleet]` table.
pub fn spec(raw: &RawFleet) -> Result<FleetSpec, String> {
    if !(1..=MAX_ISOLATES).contains(&raw.isolates) {
        return Err(format!(
            "[fleet] isolates: {} is out of range 1..={MAX_ISOLATES}",
            raw.isolates
        ));
    }
    let split = match raw.split.as_deref().unwrap_or("uniform") {
        "uniform" => Split::Uniform,
        "zipf" => {
            let s = raw.zipf_exponent.unwrap_or(1.0);
            if !(s.is_finite() && (0.0..=4.0).contains(&s)) {
                return Err(format!("[fleet] zipf_exponent: {s} is out of range 0..=4"));
            }
            Split::Zipf(s)
        }
        other => {
            return Err(format!(
                "[fleet] split: `{other}` is not one of `uniform`, `zipf`"
            ))
        }
    };
    let report_loss = raw.report_loss.unwrap_or(0.0);
    if !(0.0..=1.0).contains(&report_loss) {
        return Err(format!(
            "[fleet] report_loss: {report_loss} is not a share 0..=1"
        ));
    }
    let regions = match &raw.regions {
        None => vec![("fleet".to_string(), 1.0)],
        Some(m) => {
            let total: f64 = m.values().sum();
            if m.is_empty() || m.len() > 32 {
                return Err("[fleet] regions: name 1 to 32 regions".into());
            }
            if let Some((name, s)) = m.iter().find(|(_, s)| !(s.is_finite() && **s > 0.0)) {
                return Err(format!(
                    "[fleet] regions: {name} = {s} is not a positive share"
                ));
            }
            if let Some(name) = m.keys().find(|n| n.as_str() == "global" || n.is_empty()) {
                return Err(format!("[fleet] regions: `{name}` cannot name a region"));
            }
            m.iter().map(|(n, s)| (n.clone(), s / total)).collect()
        }
    };
    let struck = match raw
        .coordinator_down
        .as_ref()
        .and_then(|d| d.coordinator.as_deref())
    {
        None | Some("regions") => Struck::Regions,
        Some("all") => Struck::All,
        Some("global") => Struck::Global,
        Some(r) if regions.iter().any(|(n, _)| n == r) => Struck::Region(r.to_string()),
        Some(r) => {
            return Err(format!(
                "[fleet.coordinator_down] coordinator: `{r}` is not `regions`, `global`, `all` or a region of [fleet] regions"
            ))
        }
    };
    let capacity_rps = raw.coordinator_capacity.unwrap_or(1_000);
    if !(1..=1_000_000).contains(&capacity_rps) {
        return Err(format!(
            "[fleet] coordinator_capacity: {capacity_rps} is out of range 1..=1000000"
        ));
    }
    let queue = raw.coordinator_queue.unwrap_or(1_000);
    if queue > 1_000_000 {
        return Err(format!(
            "[fleet] coordinator_queue: {queue} is out of range 0..=1000000"
        ));
    }
    let down = match &raw.coordinator_down {
        None => None,
        Some(d) => {
            let how = match d.how.as_str() {
                "error" => Down::Error,
                "hang" => Down::Hang,
                "reset" => Down::Reset,
                other => {
                    return Err(format!(
                        "[fleet.coordinator_down] how: `{other}` is not one of `error`, `hang`, `reset`"
                    ))
                }
            };
            let at = |key: &str, s: &str| {
                ranged(
                    &format!("coordinator_down.{key}"),
                    s,
                    DOWN_AT_MS,
                    "a time after the scenario's start",
                )
            };
            let (from, to) = (at("from", &d.from)?, at("to", &d.to)?);
            if to <= from && how != Down::Reset {
                return Err("[fleet.coordinator_down] `to` must be after `from`".into());
            }
            Some((from, to, how))
        }
    };
    Ok(FleetSpec {
        isolates: raw.isolates,
        split,
        report_interval_ms: raw
            .report_interval
            .as_deref()
            .map(|s| {
                ranged(
                    "report_interval",
                    s,
                    REPORT_INTERVAL_MS,
                    "the range of the policy's `breaker.report_interval`",
                )
            })
            .transpose()?,
        report_loss,
        report_delay_ms: raw
            .report_delay
            .as_deref()
            .map_or(Ok(20), |s| {
                ranged(
                    "report_delay",
                    s,
                    REPORT_DELAY_MS,
                    "one way: a longer round trip outlasts the isolate's 500 ms timeout; model lost reports with `report_loss`",
                )
            })?,
        down,
        struck,
        capacity_rps,
        queue,
        regions,
        round_robin: false,
        global_delay_ms: raw
            .global_delay
            .as_deref()
            .map_or(Ok(60), |s| {
                ranged(
                    "global_delay",
                    s,
                    GLOBAL_DELAY_MS,
                    "one way: at most the longest report interval a policy allows",
                )
            })?,
        degrade_within_ms: raw
            .degrade_within
            .as_deref()
            .map(|s| ranged("degrade_within", s, WITHIN_MS, WITHIN_WHY))
            .transpose()?,
        recover_within_ms: raw
            .recover_within
            .as_deref()
            .map(|s| ranged("recover_within", s, WITHIN_MS, WITHIN_WHY))
            .transpose()?,
        degrade_behind_one_breaker_ms: raw
            .degrade_behind_one_breaker
            .as_deref()
            .map(|s| ranged("degrade_behind_one_breaker", s, WITHIN_MS, WITHIN_WHY))
            .transpose()?,
    })
}

impl FleetSpec {
    /// The spec against the policy it runs: a `report_interval` that overrides the
    /// policy's is held to the policy's own rule, at most a tenth of `breaker.window`
    /// (`ERR_FLEET_REPORT_INTERVAL`).
    pub fn against(self, policy: &Policy) -> Result<FleetSpec, String> {
        if let (Some(ms), Breaker::Rate(r)) = (self.report_interval_ms, &policy.breaker) {
            if ms * 10 > r.window_ms {
                return Err(format!(
                    "[fleet] report_interval: `{}` is over a tenth of the policy's `breaker.window` ({}): \
                     the fleet would decide later than one isolate, and the policy's own key would be \
                     refused (ERR_FLEET_REPORT_INTERVAL); use at most {}",
                    fmt(ms),
                    fmt(r.window_ms),
                    fmt(r.window_ms / 10)
                ));
            }
        }
        Ok(self)
    }
}

/// `policy` with the breaker's scope set: `fleet` keeps the policy's fleet settings (or
/// takes the defaults), with the spec's report interval if it has one.
pub fn scoped(policy: &Policy, fleet: bool, spec: &FleetSpec) -> Result<Policy, String> {
    let mut p = policy.clone();
    let Breaker::Rate(r) = &mut p.breaker else {
        return Err("the fleet scope needs a rate breaker (`[breaker] mode = \"rate\"`)".into());
    };
    r.scope = if fleet {
        let mut f = match &r.scope {
            Scope::Fleet(f) => f.clone(),
            Scope::Isolate => FleetScope {
                coordinator: DEFAULT_COORDINATOR.into(),
                report_interval_ms: 1_000,
                verdict_ttl_ms: 3_000,
            },
        };
        if let Some(ms) = spec.report_interval_ms {
            f.report_interval_ms = ms;
            f.verdict_ttl_ms = 3 * ms;
        }
        Scope::Fleet(f)
    } else {
        Scope::Isolate
    };
    Ok(p)
}
