//! A scenario file as it is written (docs/scenarios.md): TOML read strictly, every unknown
//! key an error. `build` checks it and turns it into a [`super::Scenario`].

use std::collections::BTreeMap;

use serde::Deserialize;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawScenario {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// Virtual start time (RFC 3339); also the catalog validation time.
    pub start: String,
    pub requests: u64,
    /// Time between arrivals (`1s`), or use `rate`.
    pub interval: Option<String>,
    /// Arrivals per second.
    pub rate: Option<f64>,
    /// Values cycled through, per parameter, one step per request.
    #[serde(default)]
    pub params: BTreeMap<String, Vec<String>>,
    pub model: RawModel,
    #[serde(default)]
    pub kv: Vec<RawKv>,
    /// Time a KV read takes in the simulation (default 2ms).
    pub kv_latency: Option<String>,
    #[serde(default)]
    pub expect: Option<RawExpect>,
    /// `[fleet]`: the traffic over many isolates (`simulate --isolates`, ADR 011).
    #[serde(default)]
    pub fleet: Option<crate::simulate::fleet::spec::RawFleet>,
    /// `[drill]` limits, read by `understudy drill` (see `crate::drill::limits`); ignored here.
    #[serde(default)]
    pub drill: Option<toml::Table>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawModel {
    /// The model's normal latency.
    pub latency: String,
    #[serde(default)]
    pub phase: Vec<RawPhase>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPhase {
    /// Inclusive 0-based request indices `[first, last]`.
    pub requests: Option<[u64; 2]>,
    /// Time since start, `from` inclusive, `to` exclusive.
    pub from: Option<String>,
    pub to: Option<String>,
    /// `ok`, `slow`, `down` (503), `hang`, `5xx` (500), `429`, `reset`, `malformed`, `empty`,
    /// or any other status from 400 to 599 written as a number in a string (`"404"`,
    /// `"401"`, `"408"`, `"502"`).
    pub fault: String,
    /// Latency in this phase (for `ok` and `slow`; default: the model's).
    pub latency: Option<String>,
    /// `Retry-After` seconds for `429`.
    pub retry_after: Option<u64>,
    /// For `bimodal`: the slow latency, and the share of calls that take it.
    pub slow_latency: Option<String>,
    pub slow_share: Option<f64>,
    /// The regions the fault strikes (names of `[fleet] regions`; default: everywhere).
    pub regions: Option<Vec<String>>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawKv {
    pub tier: String,
    pub params: BTreeMap<String, String>,
    pub items: Vec<String>,
    /// Age of the entry at the scenario's start (`1h`); negative ages are written `-5m`.
    pub age: String,
}

#[derive(Debug, Clone, Default, Deserialize, serde::Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RawExpect {
    pub without_shell: Option<u64>,
    pub with_shell: Option<u64>,
    pub tiers: Option<BTreeMap<String, u64>>,
    pub breaker_opened_at: Option<u64>,
}
