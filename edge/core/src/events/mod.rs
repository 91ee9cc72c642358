//! [V-*] Durable events (seed 004 SRS-RES-002/003, docs/adr/006-durable-events.md).
//!
//! Why an outbox at the edge? The same frontend that calls the model also emits events —
//! orders placed, feedback given — and when the consumer behind them is down they must not
//! be lost or block the caller. So the edge records each event durably *before* it answers
//! `202`, then delivers it with retries, in order per aggregate, never repeating a side
//! effect (the event ID is the `Idempotency-Key` every time), dead-lettering what cannot be
//! delivered, and lets an operator replay or skip.
//!
//! Everything decided is here, sans-IO, tested in virtual time: the envelope
//! ([`envelope`], read by [`json`], which refuses a key given twice), the seal ([`seal`]), the retry schedule ([`schedule`]), one attempt's
//! request ([`delivery`]) and what its answer means ([`attempt`]), the outbox's rules
//! ([`outbox`]), the metrics and alerts ([`stats`]), the shard protocol ([`protocol`]) and
//! the request flows the engine runs ([`flow`]). The Worker and its Durable Object
//! (`edge/worker`) move bytes.

pub mod attempt;
pub mod delivery;
pub mod envelope;
pub mod flow;
pub mod json;
pub mod outbox;
pub mod protocol;
pub mod redact;
pub mod schedule;
pub mod seal;
pub mod stats;

#[cfg(test)]
pub(crate) mod testing;
