//! [F-SCOPE] The watches a coordinator holds (ADR 011, "The verdict pushed"): what an
//! isolate sends, how long it may be held, and when it is answered at once.

use serde::{Deserialize, Serialize};

use super::{Coordinator, FleetMode, Refusal, Verdict};
use crate::time::Millis;

/// An isolate's watch (ADR 011, "The verdict pushed"): held by the coordinator until the
/// fleet opens or closes against `seen` — the mode this isolate last heard — or
/// [`WATCH_MS`] passed, then answered with the verdict. The isolate keeps one open under `waitUntil`
/// after a request, so a thin isolate learns an opening or a recovery when it happens, not
/// when its next request's report is answered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Watch {
    pub service: String,
    pub config: String,
    pub isolate: String,
    pub seen: Option<FleetMode>,
    /// How long to hold it at most, when less than [`WATCH_MS`] (a watch sent late in
    /// its request's `waitUntil`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold_ms: Option<u64>,
}

impl Watch {
    /// How long the coordinator holds it at most: [`WATCH_MS`], or less when asked.
    pub fn hold_ms(&self) -> u64 {
        self.hold_ms.map_or(WATCH_MS, |h| h.min(WATCH_MS))
    }
}

/// How long the coordinator holds a watch before it answers it with the verdict as it
/// stands (inside the [`WAIT_UNTIL_MS`] a Worker's `waitUntil` may run after its response,
/// with the driver's half-second timeout on top).
pub const WATCH_MS: u64 = 29_000;
/// How long after its response a Worker's request may keep I/O open (`waitUntil`).
pub const WAIT_UNTIL_MS: u64 = 30_000;

impl Coordinator {
    /// Parses a watch's JSON.
    pub fn parse_watch(text: &str) -> Result<Watch, Refusal> {
        serde_json::from_str(text).map_err(|e| Refusal::Malformed(e.to_string()))
    }

    /// A watch arrived at `now`: the verdict to answer it with at once — the fleet is open
    /// and the isolate last heard it closed, or the other way round — or `None` to hold it.
    pub fn watch(&mut self, now: Millis, watch: &Watch) -> Result<Option<Verdict>, Refusal> {
        if watch.service != self.service {
            return Err(Refusal::OtherService(watch.service.clone()));
        }
        if watch.config != self.config {
            return Err(Refusal::OtherConfig(watch.config.clone()));
        }
        let v = self.verdict(now);
        let seen_closed = watch.seen.is_none_or(|m| m == FleetMode::Closed);
        Ok((seen_closed != (v.mode == FleetMode::Closed)).then_some(v))
    }
}
