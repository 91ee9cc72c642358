//! A request after its start: the storm limiter's verdict, breaker admission, the race and
//! the cascade, and what each origin attempt tells the breaker.

use crate::breaker::{Admission, Mode, Outcome as BreakerOutcome};
use crate::cascade::KvRead;
use crate::classify::{Class, FailureReason};
use crate::disclosure;
use crate::exchange::{self, Gate};
use crate::metrics::Outcome;
use crate::policy::TierKind;
use crate::time::Millis;

use super::action::{Action, Event, Prefetch};
use super::finish::{answered, finish_early, storm_limited};
use super::flight::{Flight, Stage};
use super::outbound;
use super::{meta, Engine, Race};

pub(super) fn step<'p>(
    engine: &mut Engine<'p>,
    f: &mut Flight<'p>,
    now: Millis,
    event: Event,
) -> Action<'p> {
    match (std::mem::replace(&mut f.stage, Stage::Done), event) {
        (Stage::Limiting(race), Event::Limited(verdict)) => match verdict {
            Ok(true) => admit(engine, f, now, race),
            Ok(false) => storm_limited(engine, f, now),
            Err(e) => {
                f.note("STORM_LIMITER_UNAVAILABLE", e);
                admit(engine, f, now, race)
            }
        },
        // A driver that skips the limiter's verdict: the request goes through, noted.
        (Stage::Limiting(race), _) => {
            f.note(
                "STORM_LIMITER_UNAVAILABLE",
                "no verdict was reported".into(),
            );
            admit(engine, f, now, race)
        }
        (Stage::Events(flow), event) => super::events::step(engine, f, now, *flow, event),
        (Stage::Racing(mut race), event) => {
            let is_origin = matches!(event, Event::Origin(_) | Event::OriginHedged { .. });
            let ev = match event {
                Event::Origin(o) => {
                    f.hedge_won = false;
                    if std::mem::take(&mut f.hedge_token) {
                        // A driver that did not hedge: the token goes back.
                        engine.refund_hedge();
                    }
                    exchange::Event::Origin(o)
                }
                Event::OriginHedged {
                    observed,
                    sent,
                    won,
                } => {
                    if std::mem::take(&mut f.hedge_token) && !sent {
                        engine.refund_hedge();
                    }
                    f.hedge_won = sent && won;
                    engine.counters.hedges_sent += u64::from(sent);
                    engine.counters.hedges_won += u64::from(sent && won);
                    exchange::Event::Origin(observed)
                }
                Event::Http(o) => exchange::Event::Http(o),
                Event::Kv(r) => exchange::Event::Kv(r),
                Event::Woke | Event::Limited(_) | Event::Body(_) | Event::Shards(_) => {
                    exchange::Event::Woke
                }
            };
            if is_origin {
                f.lease = None; // the call ended: its bulkhead slot is free
            }
            if let (exchange::Event::Kv(read), Some((binding, key))) = (&ev, f.pending_kv.take()) {
                engine.kv_cache.put(binding, &key, now, read);
            }
            race.set_origin_open(engine.origin_open());
            race.set_model_heard(engine.verdicts.heard());
            let next = race.step(now, ev);
            if is_origin {
                record(engine, f, &race);
            }
            drive(engine, f, now, race, next)
        }
        // Events after the answer (a driver bug) change nothing and answer nothing new.
        (Stage::Done, _) => {
            let m = meta(&f.correlation_id, &engine.bake.release_id, f.credentialed);
            let r = disclosure::error(
                503,
                "DEPENDENCY_UNAVAILABLE",
                "the request was already answered",
                true,
                &m,
            );
            finish_early(engine, f, now, r, Outcome::Unavailable { reason: "" }, None)
        }
    }
}

/// [E-BREAKER] The breaker decides whether this request may call the model.
pub(super) fn admit<'p>(
    engine: &mut Engine<'p>,
    f: &mut Flight<'p>,
    now: Millis,
    mut race: Box<Race<'p>>,
) -> Action<'p> {
    engine.verdicts.sweep(now, &mut engine.breaker);
    f.admission = engine.breaker.admit(now);
    let gate = if f.admission.calls_origin() {
        Gate::Allow
    } else {
        Gate::Open
    };
    race.set_origin_open(engine.origin_open());
    let next = race.step(now, exchange::Event::Start(gate));
    drive(engine, f, now, race, next)
}

/// [E-CLASSIFY] The last origin attempt, as the breaker and the counters see it: dependency
/// and credential failures count against the origin; a caller's 4xx is no news about it;
/// and neither is an attempt the edge itself could not serve in time:
/// - an attempt started while the isolate was still cold (before its first origin attempt
///   had ended: the first wave of a fresh isolate pays for instantiation and connection
///   set-up, and must not open the breaker on a healthy model);
/// - a late timer while the model answered other calls (`EDGE_OVERLOADED`);
/// - while the isolate is busy, a success's latency (it counts as a success, never as a slow
///   call: its latency is the queue's as much as the model's);
/// - a timeout on a busy isolate (late timer, or saturated) unless the model stays silent
///   for one more timeout-length ([`super::verdict`]).
///
/// What the model said is always its own: a status, a malformed body or a refused
/// connection counts however busy the isolate, and so does a timeout after which it
/// answered nobody — a saturated isolate must not hide a hung model from its breaker.
fn record(engine: &mut Engine<'_>, f: &Flight<'_>, race: &Race<'_>) {
    let Some(a) = race.attempts().last() else {
        return;
    };
    let latency = a.latency_ms();
    let class = a.result.as_ref().err().map(|r| r.class());
    if class == Some(Class::Credential) {
        engine.counters.credential_refused += 1;
    }
    let heard_meanwhile = engine.verdicts.heard_since(a.started);
    if a.result == Err(FailureReason::MlTimeout) {
        engine.last_timeout = Some(engine.last_timeout.map_or(a.ended, |t| t.max(a.ended)));
    }
    if a.result
        .map_or_else(FailureReason::model_answered, |()| true)
    {
        let acquitted = engine.verdicts.model_answered(a.ended, &mut engine.breaker);
        engine.counters.unrecorded += u64::from(acquitted.acquitted);
    }
    engine.verdicts.sweep(a.ended, &mut engine.breaker);
    let cold = match engine.warm_since {
        None => {
            engine.warm_since = Some(a.ended);
            true
        }
        Some(warm) => a.started < warm,
    };
    if f.admission == Admission::Reject {
        return;
    }
    // An isolate that knows it is busy — its timers fire more than [`BUSY_MS`] late —
    // cannot tell the model's latency from its own queue.
    let saturated = engine.queue_delay_ms > BUSY_MS;
    if cold || class == Some(Class::Edge) {
        engine.counters.unrecorded += 1;
        engine.breaker.release(f.admission);
        return;
    }
    // A timeout on a busy isolate: the model's only if it stays silent ([`super::verdict`]).
    let late = latency > a.timeout_ms.saturating_add(BUSY_MS);
    if a.result == Err(FailureReason::MlTimeout) && (saturated || late) {
        let waiting = !heard_meanwhile
            && engine.verdicts.timeout_in_silence(
                a.started,
                a.ended,
                a.timeout_ms,
                f.admission,
                latency,
            );
        if !waiting {
            engine.counters.unrecorded += 1;
            engine.breaker.release(f.admission);
        }
        return;
    }
    // What the answer spent waiting in the isolate's own queue is the edge's, not the
    // model's: the slow-call judgement sees the latency without it. A busy isolate (its
    // timers run late at all) cannot see how long answers waited for it, so its successes
    // count as successes — the failure ratio must not lean towards failures — but are never
    // judged slow.
    //
    // And a success came before its attempt's timer fired: by the runtime's own clock it took
    // at most the timeout. What the engine's clock adds on top is the request's start — the
    // turn that armed the timer, which workerd counts from its end — and is the edge's too.
    let mut model_latency = latency
        .saturating_sub(engine.queue_delay_ms)
        .min(a.timeout_ms);
    if engine.queue_delay_ms > CALM_MS {
        model_latency = model_latency.min(engine.slow_call_ms());
    }
    if a.result.is_ok() {
        // The hedge's delay follows the origin's own answer times: an answer the hedge won
        // took what it took from when the hedge went out. Counted from the first request's
        // start, every won hedge would push the p95 — and the next hedge — later, until the
        // hedges came too late to win (the bench's long-tail case settled at 0.97 live).
        let own = match (f.hedge_won, f.hedge_after_ms) {
            (true, Some(after)) => model_latency.saturating_sub(after),
            _ => model_latency,
        };
        engine.origin_latency.record(a.ended, true, own, false);
    }
    let outcome = match a.result {
        Ok(()) => BreakerOutcome::success(model_latency),
        Err(r) if r.class() == Class::Caller => {
            engine.breaker.release(f.admission);
            return;
        }
        Err(FailureReason::MlTimeout) => BreakerOutcome::timeout(latency),
        Err(_) => BreakerOutcome::failure(latency),
    };
    let shunned = engine.breaker.mode(a.ended) != Mode::Healthy;
    engine.breaker.record(a.ended, f.admission, outcome);
    if shunned && engine.breaker.mode(a.ended) == Mode::Healthy {
        // The breaker closed: the whole load turns to the model at once, on connections
        // the open breaker let go cold. That wave is judged as a fresh isolate's first is.
        engine.warm_since = None;
    }
}

/// The largest scheduling delay (ms) at which the isolate still measures the model's latency:
/// above it, successes are never judged slow.
const CALM_MS: u64 = 2;

/// How late a timeout's timer may fire (or the isolate's timers run) and the timeout still
/// be the model's at once. What an on-time timer shows on top of its timeout is the turn
/// that armed it (the request's start, ~1 ms of CPU) and the runtime timer's own jitter (a
/// no-op Worker's `setTimeout(45)`: p99 1.5–4 ms late on the bench machine). Later than
/// that, the isolate was busy when the deadline came, and the model's answer may have sat
/// in its queue: the timeout waits for the model's word ([`super::verdict`]). This is the
/// breaker's evidence only; which reason the answer discloses (`ML_TIMEOUT` or
/// `EDGE_OVERLOADED`) follows [`crate::classify::late_tolerance_ms`]. Measured: a healthy
/// 25 ms model and a burst of 16 concurrent requests on a busy host gave timeouts whose
/// timers fired 11–13 ms late — inside that tolerance (11 ms for 45 ms), so they counted
/// as the model's; short benches opened the breaker on a healthy model in 7 runs of 12
/// with that rule, 3 of 12 with this one (docs/observability.md).
const BUSY_MS: u64 = 5;

/// Most speculative tier reads per origin attempt: with the origin call (and a hedge) a
/// request stays well inside [`crate::cascade::MAX_CONNECTIONS`].
const PREFETCH_MAX: usize = 2;

/// [E-CASCADE] The KV tiers this request's cascade would read, in order, up to its first
/// embedded tier (which answers from memory) or the first whose key this isolate holds a
/// recent value of (which will likely answer): their keys, less those the isolate has a
/// recent read of and those this request already asked for. Only asked for when the model
/// has gone silent or the call is a probe: the request will likely need them at the
/// deadline, and a read started now is done by then (issue 13: deadline to answer from KV).
fn prefetch<'p>(
    engine: &mut Engine<'p>,
    f: &mut Flight<'p>,
    race: &Race<'p>,
    now: Millis,
) -> Vec<Prefetch<'p>> {
    let ctx = race.ctx();
    let keep_ms = ctx.deadline.remaining(now);
    let mut out = Vec::new();
    for tier in &ctx.policy.cascade.tiers {
        match &tier.kind {
            TierKind::Embedded(_) => break,
            TierKind::Http(_) => continue,
            TierKind::Kv(kv) => {
                if out.len() >= PREFETCH_MAX {
                    break;
                }
                let Some(key) = kv.key.render(|n| ctx.params.lookup(n)) else {
                    continue;
                };
                let binding = kv.binding.as_str();
                match engine.kv_cache.get(binding, &key, now) {
                    // This tier will most likely answer from the isolate's memory: the
                    // tiers after it will not be read.
                    Some(KvRead::Value { value: Some(_), .. }) => break,
                    // A recent miss: the walk goes on to the next tier.
                    Some(_) => continue,
                    None => {}
                }
                if f.prefetched.iter().any(|(b, k)| *b == binding && *k == key) {
                    continue;
                }
                f.prefetched.push((binding, key.clone()));
                out.push(Prefetch {
                    binding,
                    key,
                    keep_ms,
                });
            }
        }
    }
    engine.counters.kv_prefetched += out.len() as u64;
    out
}

/// Turns the exchange's next step into the driver's action.
fn drive<'p>(
    engine: &mut Engine<'p>,
    f: &mut Flight<'p>,
    now: Millis,
    race: Box<Race<'p>>,
    next: exchange::Action<'p>,
) -> Action<'p> {
    let action = match next {
        exchange::Action::FetchOrigin {
            attempt,
            timeout_ms,
        } => {
            f.lease = Some(super::Lease::take(&engine.origin_in_flight));
            let hedge_after_ms = engine.hedge_after(now, timeout_ms, f.repeatable);
            f.hedge_token = hedge_after_ms.is_some();
            f.hedge_after_ms = hedge_after_ms;
            let prefetch = if engine.model_silent() || f.admission == Admission::Probe {
                prefetch(engine, f, &race, now)
            } else {
                Vec::new()
            };
            Action::FetchOrigin {
                attempt,
                timeout_ms,
                hedge_after_ms,
                prefetch,
                request: outbound::origin(
                    engine.policy(),
                    &f.origin_url,
                    &race.ctx().params,
                    &f.common(),
                    f.idempotency_key.as_deref(),
                    f.origin_credential.as_ref(),
                ),
            }
        }
        exchange::Action::Wait { ms } => Action::Wait { ms },
        exchange::Action::ReadKv {
            tier,
            binding,
            key,
            timeout_ms,
        } => {
            // Read in the last second by this isolate: answered from memory, no I/O.
            if let Some(read) = engine.kv_cache.get(binding, &key, now) {
                let mut race = race;
                race.set_origin_open(engine.origin_open());
                let next = race.step(now, exchange::Event::Kv(read));
                return drive(engine, f, now, race, next);
            }
            f.pending_kv = Some((binding, key.clone()));
            f.prefetched.retain(|(b, k)| !(*b == binding && *k == key));
            Action::ReadKv {
                tier,
                binding,
                key,
                timeout_ms,
            }
        }
        exchange::Action::FetchHttp {
            tier,
            url,
            timeout_ms,
            ..
        } => {
            let secret = f.tier_secrets.get(tier).cloned().flatten();
            Action::FetchHttp {
                tier,
                timeout_ms,
                request: outbound::tier(
                    url,
                    &f.common(),
                    secret.as_deref(),
                    engine.policy().origin.max_body_bytes,
                ),
            }
        }
        exchange::Action::Respond(answer) => return answered(engine, f, now, &race, answer),
    };
    f.stage = Stage::Racing(race);
    action
}
