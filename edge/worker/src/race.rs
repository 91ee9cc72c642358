//! [E-RACE] An HTTP call (the origin, or an HTTP tier) raced against its timeout: headers
//! *and* body must arrive in time, and the loser is cancelled with `AbortController::abort()`
//! (dropping a fetch does not cancel the subrequest; an aborted fetch frees its connection
//! slot). The race itself runs in JavaScript ([`crate::shim::race`]: one crossing, one
//! awaited promise); what happened is reported raw ([`Observed`]) and the engine classifies it.

use understudy_core::engine::{Event, Outbound};

/// The origin call, hedged when the engine says so.
pub async fn origin(o: &Outbound, timeout_ms: u64, hedge_after_ms: Option<u64>) -> Event {
    let r = crate::shim::race(
        &o.url,
        o.method.as_str(),
        &o.headers,
        o.body.clone(),
        timeout_ms,
        o.max_body_bytes,
        hedge_after_ms,
    )
    .await;
    match hedge_after_ms {
        None => Event::Origin(r.observed),
        Some(_) => Event::OriginHedged {
            observed: r.observed,
            sent: r.hedge_sent,
            won: r.hedge_won,
        },
    }
}

/// An HTTP tier's call (never hedged).
pub async fn tier(o: &Outbound, timeout_ms: u64) -> Event {
    let r = crate::shim::race(
        &o.url,
        o.method.as_str(),
        &o.headers,
        o.body.clone(),
        timeout_ms,
        o.max_body_bytes,
        None,
    )
    .await;
    Event::Http(r.observed)
}
