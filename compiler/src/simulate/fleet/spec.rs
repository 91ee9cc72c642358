//! The scenario's `[fleet]` table (docs/scenarios.md, "The fleet"), checked.

use serde::Deserialize;
use understudy_core::time::parse_duration;

/// Most isolates a simulation runs.
pub const MAX_ISOLATES: u64 = 20_000;

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
    /// What the fleet scope must achieve (seed 000: `3s` and `45s`).
    pub degrade_within: Option<String>,
    pub recover_within: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawDown {
    pub from: String,
    pub to: String,
    /// `error` (answers 500), `hang` (never answers: the driver's timeout), or `reset` (at
    /// `from` the coordinator restarts with nothing; `to` is ignored).
    pub how: String,
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
    pub degrade_within_ms: Option<u64>,
    pub recover_within_ms: Option<u64>,
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
            degrade_within_ms: None,
            recover_within_ms: None,
        }
    }
}

fn dur(what: &str, s: &str) -> Result<u64, String> {
    parse_duration(s).map_err(|e| format!("[fleet] {what}: {e}"))
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
            let (from, to) = (
                dur("coordinator_down.from", &d.from)?,
                dur("coordinator_down.to", &d.to)?,
            );
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
            .map(|s| dur("report_interval", s))
            .transpose()?,
        report_loss,
        report_delay_ms: raw
            .report_delay
            .as_deref()
            .map_or(Ok(20), |s| dur("report_delay", s))?,
        down,
        degrade_within_ms: raw
            .degrade_within
            .as_deref()
            .map(|s| dur("degrade_within", s))
            .transpose()?,
        recover_within_ms: raw
            .recover_within
            .as_deref()
            .map(|s| dur("recover_within", s))
            .transpose()?,
    })
}
