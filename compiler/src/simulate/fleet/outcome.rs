//! What a fleet run did: each scope's results, mode changes and calls, and how each isolate's
//! mode is noted as it changes.

use understudy_core::breaker::fleet::FleetMode;
use understudy_core::engine::Engine;
use understudy_core::Millis;

use super::super::RequestResult;
use super::Load;

/// One isolate's mode changes: (ms after the start, new mode).
pub type Changes = Vec<(u64, &'static str)>;

/// What one scope's run did.
pub struct FleetRun {
    pub results: Vec<RequestResult>,
    pub isolate_of: Vec<u32>,
    pub changes: Vec<Changes>,
    pub model_calls: u64,
    pub outage_calls: u64,
    pub reports: u64,
    pub report_failures: u64,
    /// Watches sent, and those answered with a verdict.
    pub watches: u64,
    pub pushed: u64,
    /// When a region's verdict opened or closed (ms since the start, mode).
    pub fleet_moves: Vec<(u64, FleetMode)>,
    /// Each coordinator's load: the regions' in order, then the global one.
    pub coordinators: Vec<Load>,
    /// Per isolate: whether the scenario's fault strikes its region (every isolate's, unless
    /// a phase names `regions`).
    pub struck: Vec<bool>,
}

/// Notes isolate `e`'s mode at `now` when it changed.
pub fn note_mode(
    e: &mut Engine<'_>,
    now: Millis,
    (start, last, changes): (Millis, &mut &'static str, &mut Changes),
) {
    let mode = e.breaker_mode(now);
    if mode != *last {
        changes.push((now.since(start), mode));
        *last = mode;
    }
}
