//! An events scenario (TOML, `kind = "events"`, docs/scenarios.md): how many events over how
//! many aggregates and tenants, how producers misbehave (out of order, duplicates), the
//! consumer's faults, and when the runtime is killed.

use serde::Deserialize;

use crate::origin::ConsumerRule;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventsScenario {
    pub name: String,
    /// Must be `"events"`.
    pub kind: String,
    pub events: Shape,
    /// The consumer's rules during the faulty phase (as `PUT /__origin/consumer`).
    #[serde(default)]
    pub faults: Vec<ConsumerRule>,
    /// Extra rules of the full run (`--full`), e.g. every first delivery reset after its
    /// commit so that every event is delivered again.
    #[serde(default)]
    pub full_faults: Vec<ConsumerRule>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Shape {
    /// Events of the faulty phase.
    pub count: u64,
    /// Events of the faulty phase with `--full`.
    #[serde(default = "full_count")]
    pub full_count: u64,
    /// Events of the healthy phase (the latency figure is measured there).
    pub healthy: u64,
    pub aggregates: u64,
    #[serde(default = "one")]
    pub tenants: u64,
    /// Concurrent producers.
    #[serde(default = "producers")]
    pub producers: usize,
    /// Share of events sent before their predecessor.
    #[serde(default)]
    pub out_of_order: f64,
    /// Share of events sent twice (a producer retrying after a lost answer).
    #[serde(default)]
    pub duplicates: f64,
    /// Kill the runtime (SIGKILL, the whole process group) once this share of the faulty
    /// phase is acknowledged; 0 never kills.
    #[serde(default)]
    pub kill_after: f64,
    /// The retry schedule's clock runs this much faster than the policy's (the drill's
    /// default time scale).
    #[serde(default = "scale")]
    pub time_scale: f64,
    /// Replay the dead letters after the faulty phase, in rounds until none is left (at most
    /// this many).
    #[serde(default = "rounds")]
    pub replay_rounds: u32,
}

fn full_count() -> u64 {
    10_000
}
fn one() -> u64 {
    1
}
fn producers() -> usize {
    16
}
fn scale() -> f64 {
    0.05
}
fn rounds() -> u32 {
    10
}

impl EventsScenario {
    pub fn parse(text: &str) -> Result<EventsScenario, String> {
        let s: EventsScenario = toml::from_str(text).map_err(|e| e.to_string())?;
        if s.kind != "events" {
            return Err(format!("kind is `{}`, not `events`", s.kind));
        }
        let e = &s.events;
        if e.count == 0 || e.aggregates == 0 || e.tenants == 0 || e.producers == 0 {
            return Err("events.count, aggregates, tenants and producers must be above 0".into());
        }
        for (name, v) in [
            ("out_of_order", e.out_of_order),
            ("duplicates", e.duplicates),
            ("kill_after", e.kill_after),
        ] {
            if !(0.0..=1.0).contains(&v) {
                return Err(format!("events.{name} {v} is outside 0..=1"));
            }
        }
        if !(e.time_scale > 0.0 && e.time_scale <= 1.0) {
            return Err(format!(
                "events.time_scale {} must be in (0, 1]",
                e.time_scale
            ));
        }
        for (i, r) in s.faults.iter().chain(&s.full_faults).enumerate() {
            r.fault
                .validate()
                .map_err(|e| format!("faults[{i}].fault.{e}"))?;
        }
        Ok(s)
    }

    /// Whether a scenario file is an events scenario (by its `kind`).
    pub fn is_events(text: &str) -> bool {
        toml::from_str::<toml::Table>(text)
            .ok()
            .and_then(|t| {
                t.get("kind")
                    .and_then(|k| k.as_str().map(|k| k == "events"))
            })
            .unwrap_or(false)
    }
}
