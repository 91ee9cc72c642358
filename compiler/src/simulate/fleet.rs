//! [F-SCOPE] `simulate --isolates N`: the scenario's traffic spread over N isolates — N
//! engines, the very engine code each isolate runs — plus the breaker's coordinator
//! (`breaker::fleet::Coordinator`, the struct the Durable Object drives), in virtual time.
//!
//! Like the one-isolate run, this is a driver and decides nothing: each engine gets its
//! share of the arrivals (uniform, or Zipf-skewed as the scenario's `[fleet]` table says),
//! and a report a reply carries travels to the coordinator after the scenario's delay, is
//! lost as often as it says, meets the coordinator down when it says, and its answer goes
//! back to the engine that sent it. Every isolate's steps interleave in time order, so the
//! coordinator sees reports in the order a real fleet would send them.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use understudy_core::breaker::fleet::place::Role;
use understudy_core::breaker::fleet::{Coordinator, Verdict};
use understudy_core::catalog::Catalog;
use understudy_core::engine::virtual_io::Virtual;
use understudy_core::engine::Engine;
use understudy_core::policy::Policy;
use understudy_core::Millis;

use super::scenario::Scenario;
use super::{arrival, bake, setup, DevBindings, Sent};

/// Replays `sc` over `spec.isolates` isolates of `policy` (whose scope is used as is).
pub fn run(
    policy: &Policy,
    catalog: Option<&Catalog>,
    sc: &Scenario,
    spec: &FleetSpec,
) -> Result<FleetRun, String> {
    let bake = bake(policy, catalog, sc);
    let policy_hash = bake.policy_hash.clone();
    let n = spec.isolates as usize;
    let mut engines = Vec::with_capacity(n);
    for _ in 0..n {
        engines.push(Engine::new(&bake)?);
    }
    let fresh = Fresh::of(policy, &policy_hash);
    let interval_ms = fresh.as_ref().map_or(1_000, |f| f.interval_ms);
    let fresh = || fresh.as_ref().map(Fresh::coordinator);
    let start_us = sc.start_ms * 1000;
    let mut regions: Vec<Region> = spec
        .regions
        .iter()
        .map(|(name, _)| Region {
            coordinator: fresh(),
            server: Server::new(name, spec.capacity_rps, spec.queue, start_us),
            held: Held::new(),
            sent: 0,
            stored: None,
        })
        .collect();
    // The global coordinator: the regions' windows merge there when there are several, and
    // it stands in for a failing region (`member::failover`) in any fleet.
    let merged = regions.len() > 1 && fresh().is_some();
    let mut global = fresh().is_some().then(|| {
        (
            fresh(),
            Server::new("global", spec.capacity_rps, spec.queue, start_us),
        )
    });
    let region_of = regions_of(spec, n);
    let (mut world, plans) = setup(policy, sc);
    let splitter = Splitter::new(spec.split, n);
    let mut virtuals: Vec<Virtual> = (0..n).map(|_| Virtual::new()).collect();
    let mut isolate_of = vec![0u32; plans.len()];
    for p in &plans {
        let k = splitter.isolate(p.index);
        isolate_of[p.index as usize] = k as u32;
        virtuals[k].arrive(start_us + p.due_us, p.index, arrival(p));
    }
    drop(plans);
    if spec.regions.len() > 1 {
        world.region_names = spec.regions.iter().map(|(name, _)| name.clone()).collect();
        world.request_region = isolate_of.iter().map(|&k| region_of[k as usize]).collect();
    }
    let faulty = figures::faulty_phases(sc);
    let struck_isolates: Vec<bool> = region_of
        .iter()
        .map(|&r| {
            let name = spec.regions.get(usize::from(r)).map(|(n, _)| n.as_str());
            faulty.iter().any(|p| p.strikes(name))
        })
        .collect();
    let start = Millis(sc.start_ms);
    let mut due: BinaryHeap<Reverse<(u64, usize)>> = virtuals
        .iter()
        .enumerate()
        .filter_map(|(k, v)| v.next_at_us().map(|t| Reverse((t, k))))
        .collect();
    let mut fleet_q = Queue::default();
    let delay_us = spec.report_delay_ms * 1000;
    let global_us = spec.global_delay_ms * 1000;
    let mut m = Moves {
        start,
        delay_us,
        moves: Vec::new(),
    };
    if let Some((from, _, Down::Reset)) = spec.down {
        fleet_q.push(start_us + from * 1000, Ev::Reset);
    }
    if fresh().is_some() {
        fleet_q.push(start_us + interval_ms * 1000, Ev::Tick);
    }
    let struck = |r: Option<usize>| match (&spec.struck, r) {
        (Struck::All, _) | (Struck::Regions, Some(_)) | (Struck::Global, None) => true,
        (Struck::Region(name), Some(r)) => spec.regions[r].0 == *name,
        _ => false,
    };
    let down_at = |t_ms: u64, r: Option<usize>| {
        spec.down
            .filter(|(from, to, how)| *how != Down::Reset && (*from..*to).contains(&t_ms))
            .filter(|_| struck(r))
            .map(|d| d.2)
    };
    let mut last: Vec<&'static str> = engines.iter_mut().map(|e| e.breaker_mode(start)).collect();
    let mut changes: Vec<Changes> = vec![Vec::new(); n];
    let mut seen = vec![false; isolate_of.len()];
    let (mut reports, mut report_failures, mut watches, mut pushed) = (0u64, 0u64, 0u64, 0u64);
    let mut last_arrival_us = start_us;
    // Reports sent again at once after a failure (`Engine::fleet_heard`): (isolate, call).
    let mut again: Vec<(usize, Sent)> = Vec::new();
    loop {
        for (request, at) in std::mem::take(&mut world.wakes) {
            let k = isolate_of[request as usize] as usize;
            fleet_q.push(at.0 * 1000, Ev::Wake(k, request, at));
        }
        let sent = std::mem::take(&mut world.reports).into_iter();
        for (
            k,
            Sent {
                request,
                at,
                call,
                ask,
            },
        ) in sent
            .map(|s| (isolate_of[s.request as usize] as usize, s))
            .chain(again.drain(..))
            .collect::<Vec<_>>()
        {
            let asking = ask.then_some(request);
            let watch = call.path == "/watch";
            if watch {
                watches += 1;
            } else {
                reports += 1;
            }
            // The global coordinator stands in for a failing region (`member::failover`).
            let to_global = Role::of(&call.object) == Ok(Role::Global);
            let (hop_us, r) = if to_global {
                (global_us, None)
            } else {
                (delay_us, Some(region_of[k] as usize))
            };
            let at_us = at.0 * 1000;
            let lost = unit(mix(request) ^ (reports + watches)) < spec.report_loss;
            let down = down_at(at.since(start), r);
            let failed = |e: String| {
                if watch {
                    Ev::Pushed(k, Err(e))
                } else {
                    Ev::Answer(k, Err(e), asking)
                }
            };
            // A call's answer begins at once (a held watch's verdict streams when the fleet
            // moves): one that has not begun by then failed (`FleetReport::begin_ms`).
            let timeout_ms = call.begin_ms();
            match (lost, down) {
                (true, _) | (_, Some(Down::Hang)) => fleet_q.push(
                    at_us + timeout_ms * 1000,
                    failed(format!("no answer within {timeout_ms} ms")),
                ),
                (_, Some(_)) => fleet_q.push(
                    at_us + 2 * hop_us,
                    failed("the coordinator answered 500".into()),
                ),
                _ if watch => fleet_q.push(at_us + hop_us, Ev::Watch(k, call.body)),
                _ => fleet_q.push(at_us + hop_us, Ev::Deliver(k, call.body, asking, to_global)),
            }
        }
        let tv = due.peek().map(|Reverse((t, _))| *t);
        let tf = fleet_q.next_at();
        let fleet_first = match (tf, tv) {
            (None, None) => break,
            (Some(f), Some(v)) => f <= v,
            (f, _) => f.is_some(),
        };
        if fleet_first {
            let Some((at_us, ev)) = fleet_q.pop() else {
                continue;
            };
            let now = Millis(at_us / 1000);
            match ev {
                Ev::Reset => {
                    for (r, region) in regions.iter_mut().enumerate() {
                        if struck(Some(r)) {
                            // Restarted: empty, then what its storage kept.
                            region.coordinator = fresh();
                            if let (Some(c), Some(snap)) =
                                (region.coordinator.as_mut(), region.stored.clone())
                            {
                                c.restore(now, snap);
                            }
                            for (_, k) in region.held.drain() {
                                let e = Err("the coordinator was reset".to_string());
                                fleet_q.push(at_us + delay_us, Ev::Pushed(k, e));
                            }
                        }
                    }
                    if let Some(g) = global.as_mut().filter(|_| struck(None)) {
                        g.0 = fresh();
                    }
                }
                Ev::Tick => {
                    let t_ms = now.since(start);
                    for (r, region) in regions.iter_mut().enumerate() {
                        let Some(c) = region.coordinator.as_mut() else {
                            continue;
                        };
                        // A hung object runs no alarm: it merges and stores nothing.
                        if down_at(t_ms, Some(r)) == Some(Down::Hang) {
                            continue;
                        }
                        region.stored = Some(c.snapshot(now));
                        if !merged {
                            continue;
                        }
                        region.sent += 1;
                        let report = c.window_report(now, &spec.regions[r].0, region.sent);
                        // The global one down: the region hears nothing and decides alone.
                        if down_at(t_ms, None).is_none() {
                            let text = serde_json::to_string(&report).unwrap_or_default();
                            fleet_q.push(at_us + global_us, Ev::Merge(r, text));
                        }
                    }
                    if !due.is_empty() {
                        fleet_q.push(at_us + interval_ms * 1000, Ev::Tick);
                    }
                }
                Ev::Merge(r, text) => {
                    let Some((Some(g), server)) = global.as_mut() else {
                        continue;
                    };
                    let Some(done) = server.admit(at_us) else {
                        continue;
                    };
                    let at = Millis(done / 1000);
                    if let Ok(v) = Coordinator::parse(&text).and_then(|x| g.report(at, x)) {
                        fleet_q.push(done + global_us, Ev::Heed(r, json(&v)));
                    }
                }
                Ev::Heed(r, text) => {
                    let region = &mut regions[r];
                    let Some(c) = region.coordinator.as_mut() else {
                        continue;
                    };
                    if let Ok(v) = serde_json::from_str::<Verdict>(&text) {
                        c.heed(v);
                        let v = c.verdict(now);
                        m.broadcast(region, &mut fleet_q, at_us, &v);
                    }
                }
                Ev::Deliver(k, text, asking, true) => {
                    // An isolate's report to the global coordinator, standing in for its
                    // region's: answered as a region's merge is, no watch held.
                    let Some((g, server)) = global.as_mut() else {
                        let e = Err("no global coordinator".to_string());
                        fleet_q.push(at_us + global_us, Ev::Answer(k, e, asking));
                        continue;
                    };
                    let Some(done) = server.admit(at_us) else {
                        let e = Err("the coordinator is overloaded".to_string());
                        fleet_q.push(at_us + global_us, Ev::Answer(k, e, asking));
                        continue;
                    };
                    let at = Millis(done / 1000);
                    let answer = match g.as_mut() {
                        None => Err("no coordinator".to_string()),
                        Some(c) => match Coordinator::parse(&text).and_then(|r| c.report(at, r)) {
                            Ok(v) => Ok(json(&v)),
                            Err(refusal) => Err(format!("refused: {refusal:?}")),
                        },
                    };
                    fleet_q.push(done + global_us, Ev::Answer(k, answer, asking));
                }
                Ev::Deliver(k, text, asking, false) => {
                    let region = &mut regions[region_of[k] as usize];
                    let Some(done) = region.server.admit(at_us) else {
                        let e = Err("the coordinator is overloaded".to_string());
                        fleet_q.push(at_us + delay_us, Ev::Answer(k, e, asking));
                        continue;
                    };
                    let at = Millis(done / 1000);
                    let answer = match region.coordinator.as_mut() {
                        None => Err("no coordinator".to_string()),
                        Some(c) => match Coordinator::parse(&text).and_then(|r| c.report(at, r)) {
                            Ok(v) => Ok((json(&v), v)),
                            Err(refusal) => Err(format!("refused: {refusal:?}")),
                        },
                    };
                    let answer = answer.map(|(text, v)| {
                        m.broadcast(region, &mut fleet_q, done, &v);
                        text
                    });
                    fleet_q.push(done + delay_us, Ev::Answer(k, answer, asking));
                }
                Ev::Watch(k, text) => {
                    // As the Durable Object does: hold the watch first, then answer every
                    // held watch if the verdict this arrival computed moved the fleet.
                    let region = &mut regions[region_of[k] as usize];
                    let Some(done) = region.server.admit(at_us) else {
                        let e = Err("the coordinator is overloaded".to_string());
                        fleet_q.push(at_us + delay_us, Ev::Pushed(k, e));
                        continue;
                    };
                    let at = Millis(done / 1000);
                    let Some(c) = region.coordinator.as_mut() else {
                        let e = Err("no coordinator".to_string());
                        fleet_q.push(done + delay_us, Ev::Pushed(k, e));
                        continue;
                    };
                    let got = Coordinator::parse_watch(&text)
                        .and_then(|x| Ok((c.watch(at, &x)?, x.hold_ms())));
                    match got {
                        Ok((None, hold_ms)) => {
                            let token = fleet_q.seq + 1;
                            fleet_q.push(done + hold_ms * 1000, Ev::WatchDue(k, token));
                            let v = c.verdict(at);
                            region.held.insert(token, k);
                            m.broadcast(region, &mut fleet_q, done, &v);
                        }
                        Ok((Some(v), _)) => {
                            m.broadcast(region, &mut fleet_q, done, &v);
                            fleet_q.push(done + delay_us, Ev::Pushed(k, Ok(json(&v))));
                        }
                        Err(refusal) => {
                            let e = Err(format!("refused: {refusal:?}"));
                            fleet_q.push(done + delay_us, Ev::Pushed(k, e));
                        }
                    }
                }
                Ev::WatchDue(k, token) => {
                    let region = &mut regions[region_of[k] as usize];
                    if region.held.remove(&token).is_some() {
                        let answer = match region.coordinator.as_mut() {
                            Some(c) => {
                                let v = c.verdict(now);
                                m.broadcast(region, &mut fleet_q, at_us, &v);
                                Ok(json(&v))
                            }
                            None => Err("no coordinator".to_string()),
                        };
                        fleet_q.push(at_us + delay_us, Ev::Pushed(k, answer));
                    }
                }
                Ev::Wake(k, request, asked) => {
                    for call in engines[k].fleet_wake(now, asked) {
                        let (at, ask) = (now, false);
                        world.reports.push(Sent {
                            request,
                            at,
                            call,
                            ask,
                        });
                    }
                }
                Ev::Answer(k, answer, asking) => {
                    if answer.is_err() {
                        report_failures += 1;
                    }
                    let heard =
                        engines[k].fleet_heard(now, answer.as_deref().map_err(|e| e.as_str()));
                    again.extend(heard.again.map(|call| sent_again(k, now, call)));
                    note_mode(&mut engines[k], now, (start, &mut last[k], &mut changes[k]));
                    if let Some(request) = asking {
                        // The request that asked heeds it, if it still waits.
                        virtuals[k].asked(request, at_us);
                        if let Some(next) = virtuals[k].next_at_us() {
                            due.push(Reverse((next, k)));
                        }
                    }
                }
                Ev::Pushed(k, answer) => {
                    pushed += u64::from(answer.is_ok());
                    let heard =
                        engines[k].fleet_watched(now, answer.as_deref().map_err(|e| e.as_str()));
                    again.extend(heard.again.map(|call| sent_again(k, now, call)));
                    note_mode(&mut engines[k], now, (start, &mut last[k], &mut changes[k]));
                }
            }
            continue;
        }
        let Some(Reverse((t, k))) = due.pop() else {
            break;
        };
        if virtuals[k].next_at_us() != Some(t) {
            continue;
        }
        // Never past the next thing due anywhere else — the coordinator's next event, the
        // other isolates' next steps: a step skips stale wake-ups (a deadline timer after
        // the answer), and must not jump over what happens before its next real one.
        let others = due.peek().map(|Reverse((t, _))| *t);
        let limit = tf.unwrap_or(u64::MAX).min(others.unwrap_or(u64::MAX));
        let stepped = virtuals[k].step_until(limit, &mut engines[k], &DevBindings, &mut world);
        if let Some(next) = virtuals[k].next_at_us() {
            due.push(Reverse((next, k)));
        }
        let Some(stepped) = stepped else {
            continue;
        };
        let now = stepped.at;
        last_arrival_us = last_arrival_us.max(now.0 * 1000);
        let i = stepped.request as usize;
        let mode = engines[k].breaker_mode(now);
        if let Some(s) = seen.get_mut(i).filter(|s| !**s) {
            *s = true;
            world.modes[i] = mode;
            if let Some(Some(r)) = world.results.get_mut(i) {
                r.mode = mode;
            }
        }
        if mode != last[k] {
            changes[k].push((now.since(start), mode));
            last[k] = mode;
        }
    }
    let run_s = last_arrival_us.saturating_sub(start_us) as f64 / 1e6;
    let fault_s = figures::fault_span(sc).map_or((0, 0), |(a, b)| (a / 1000, b.div_ceil(1000)));
    let load = |s: &Server| s.load(run_s, fault_s);
    let mut coordinators: Vec<Load> = regions.iter().map(|r| load(&r.server)).collect();
    if fresh().is_none() {
        coordinators.clear();
    }
    let stood_in = |g: &&(Option<Coordinator>, Server)| merged || g.1.admitted() > 0;
    coordinators.extend(global.iter().filter(stood_in).map(|g| load(&g.1)));
    let mut moves = m.moves;
    moves.sort_by_key(|(t, _)| *t);
    Ok(FleetRun {
        results: world.results.into_iter().flatten().collect(),
        isolate_of,
        changes,
        model_calls: world.model_calls,
        outage_calls: world.outage_calls,
        reports,
        report_failures,
        watches,
        pushed,
        fleet_moves: moves,
        coordinators,
        struck: struck_isolates,
    })
}

mod capacity;
mod coordinators;
mod figures;
pub mod one;
mod outcome;
mod queue;
pub mod spec;
mod split;
pub use capacity::{Load, Server};
use coordinators::{json, Fresh, Held, Moves, Region};
pub use figures::{fault_span, figures, human, unmet, Figures};
pub use outcome::FleetRun;
use outcome::{note_mode, Changes};
use queue::{sent_again, Ev, Queue};
pub use spec::scoped;
pub use spec::{spec, Down, FleetSpec, RawDown, RawFleet, Split, Struck, MAX_ISOLATES};
pub use split::Splitter;
use split::{mix, regions_of, unit};

#[cfg(test)]
mod tests;
