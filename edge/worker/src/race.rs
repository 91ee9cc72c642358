//! [E-RACE] An HTTP call (the origin, or an HTTP tier) raced against its timeout: headers
//! *and* body must arrive in time, and the loser is cancelled with `AbortController::abort()`
//! (dropping a fetch does not cancel the subrequest; an aborted fetch frees its connection
//! slot). The race itself runs in JavaScript ([`crate::shim::race`]: one crossing, one
//! awaited promise); what happened is reported raw ([`Observed`]) and the engine classifies it.

use understudy_core::classify::Observed;
use understudy_core::engine::Outbound;

pub async fn race(o: &Outbound, timeout_ms: u64) -> Observed {
    crate::shim::race(
        &o.url,
        o.method.as_str(),
        &o.headers,
        o.body.clone(),
        timeout_ms,
        o.max_body_bytes,
    )
    .await
}
