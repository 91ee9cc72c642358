//! The answers given without an engine: the isolate has no usable bake, or the engine could
//! not run for a request.

use super::rng::Rng;
use super::trace::{self, Trace};
use super::{meta, report, Incoming, Reply};
use crate::correlation::{self, Provenance};
use crate::disclosure;
use crate::metrics::Outcome;
use crate::time::Millis;

/// The answer when the isolate has no usable bake (missing or corrupt custom section):
/// 503 `BAKE_INVALID`, with a log line. There is no policy to consult.
pub fn unbaked(now: Millis, req: &Incoming<'_>, message: &str, seed: u64) -> Reply {
    let mut rng = Rng::new(seed);
    let (cid, provenance) =
        correlation::resolve(req.header(correlation::HEADER), || rng.bytes::<16>());
    let trace = Trace::resolve(
        req.header(trace::TRACEPARENT),
        req.header(trace::TRACESTATE),
        &mut rng,
    );
    edge_down(now, &cid, provenance, &trace.trace_id, message)
}

/// The answer a driver gives when even the engine cannot run for a request (its code
/// trapped, the runtime threw): 503 `DEPENDENCY_UNAVAILABLE` with the envelope and every
/// header a response carries, rendered once when the isolate starts. `{cid}` stands for the
/// correlation ID the driver fills in; `release` is the bake's (`none` without one).
pub fn last_resort(release: &str) -> Reply {
    let cid = LAST_RESORT_CID;
    let m = meta(cid, release, false);
    let mut r = could_not_complete(&m);
    r.headers.push(("Retry-After", "1".to_string()));
    r.headers.push(("X-Breaker-Mode", MODE_UNKNOWN.to_string()));
    Reply {
        correlation_id: cid.to_string(),
        status: r.status,
        headers: r.headers,
        body: r.body,
        writes: Vec::new(),
        log: String::new(),
        point: None,
        fleet: Vec::new(),
        fleet_wake: None,
    }
}

/// Where [`last_resort`]'s correlation ID goes.
pub const LAST_RESORT_CID: &str = "{cid}";

/// The mode `X-Breaker-Mode` names when there is no breaker to ask: no usable bake.
pub const MODE_UNKNOWN: &str = "UNKNOWN";

/// 503 `BAKE_INVALID` with every header a response carries (`X-Breaker-Mode: UNKNOWN`:
/// without a policy there is no breaker) and its log line.
fn edge_down(
    now: Millis,
    cid: &str,
    provenance: Provenance,
    trace_id: &str,
    message: &str,
) -> Reply {
    let mut r = disclosure::bake_invalid(message, cid);
    r.headers.push(("X-Breaker-Mode", MODE_UNKNOWN.to_string()));
    let log = report::Line {
        correlation_id: cid,
        provenance,
        trace_id,
        at: now,
        outcome: Outcome::BakeInvalid.name(),
        status: r.status,
        tier: None,
        reason: Some(crate::classify::bounded(message)),
        class: None,
        notes: &[],
        tiers: &[],
        attempts: 0,
        calls: &[],
        // The bake-less answer has nothing to time: it does no I/O.
        latency_ms: 0,
        origin_override: false,
        policy_version: "none",
        breaker_mode: MODE_UNKNOWN,
        service: "unknown",
        isolate: "none",
    }
    .to_json();
    Reply {
        correlation_id: cid.to_string(),
        status: r.status,
        headers: r.headers,
        body: r.body,
        writes: Vec::new(),
        log,
        point: None,
        fleet: Vec::new(),
        fleet_wake: None,
    }
}

/// The 503 envelope of a request the edge could not complete (the last resort, and
/// [`super::Engine::failed`]), before its `Retry-After`.
pub(super) fn could_not_complete(m: &disclosure::Meta<'_>) -> disclosure::Rendered {
    disclosure::error(
        503,
        "DEPENDENCY_UNAVAILABLE",
        "the edge could not complete this request",
        true,
        m,
    )
}
