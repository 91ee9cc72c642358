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
use std::collections::{BinaryHeap, HashMap};

use understudy_core::breaker::fleet::{settings_hash, Coordinator, FleetMode, Verdict, WATCH_MS};
use understudy_core::catalog::Catalog;
use understudy_core::engine::virtual_io::Virtual;
use understudy_core::engine::Engine;
use understudy_core::policy::{Breaker, FleetScope, Policy, Scope, DEFAULT_COORDINATOR};
use understudy_core::Millis;

use super::scenario::Scenario;
use super::{arrival, bake, setup, DevBindings, RequestResult};

/// What the fleet scope's figures miss of the scenario's `degrade_within` and
/// `recover_within`. The time to degrade is met when the traffic meets it, or when the
/// traffic within reach of the fleet's opening meets it and the traffic as a whole is no
/// later than its floor (what the requests out of reach alone impose; `never` is later than
/// any time).
pub fn unmet(sc: &Scenario, fleet: &Figures) -> Vec<String> {
    let Some(spec) = &sc.fleet else {
        return Vec::new();
    };
    let within = |bound: u64, got: Option<f64>| got.is_some_and(|s| s * 1000.0 <= bound as f64);
    let secs = |got: Option<f64>| got.map_or("never".to_string(), |s| format!("{s:.2} s"));
    let mut out = Vec::new();
    if let Some(bound) = spec.degrade_within_ms {
        let inf = |v: Option<f64>| v.unwrap_or(f64::INFINITY);
        let floor = inf(fleet.degrade_floor_s).max(bound as f64 / 1000.0);
        let met = within(bound, fleet.degrade_s)
            || (within(bound, fleet.degrade_in_reach_s) && inf(fleet.degrade_s) <= floor);
        if !met {
            out.push(format!(
                "fleet scope: time to degrade {} (within reach {}, floor {}), over {:.1} s",
                secs(fleet.degrade_s),
                secs(fleet.degrade_in_reach_s),
                secs(fleet.degrade_floor_s),
                bound as f64 / 1000.0
            ));
        }
    }
    if let Some(bound) = spec.recover_within_ms {
        if !within(bound, fleet.recover_s) {
            out.push(format!(
                "fleet scope: time to recover {}, over {:.1} s",
                secs(fleet.recover_s),
                bound as f64 / 1000.0
            ));
        }
    }
    out
}

/// A 64-bit mix of `x` (splitmix64's finaliser): the split's and the losses' dice.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// A uniform draw in [0, 1) from `x`.
fn unit(x: u64) -> f64 {
    (mix(x) >> 11) as f64 / (1u64 << 53) as f64
}

/// Which isolate request `i` goes to (`simulate --isolates` and `drill --isolates` split
/// the same way).
pub struct Splitter {
    /// Cumulative shares (Zipf), empty for uniform.
    cdf: Vec<f64>,
    n: usize,
}

impl Splitter {
    pub fn new(split: Split, n: usize) -> Splitter {
        let cdf = match split {
            Split::Uniform => Vec::new(),
            Split::Zipf(s) => {
                let w: Vec<f64> = (0..n).map(|k| 1.0 / ((k + 1) as f64).powf(s)).collect();
                let total: f64 = w.iter().sum();
                let mut acc = 0.0;
                w.iter()
                    .map(|x| {
                        acc += x / total;
                        acc
                    })
                    .collect()
            }
        };
        Splitter { cdf, n }
    }

    pub fn isolate(&self, i: u64) -> usize {
        let u = unit(i ^ 0x5eed);
        if self.cdf.is_empty() {
            return ((u * self.n as f64) as usize).min(self.n - 1);
        }
        self.cdf.partition_point(|c| *c <= u).min(self.n - 1)
    }
}

/// One isolate's mode changes: (ms after the start, new mode).
type Changes = Vec<(u64, &'static str)>;

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
    /// When the fleet's verdict opened or closed (ms since the start, mode).
    pub fleet_moves: Vec<(u64, FleetMode)>,
}

enum Ev {
    /// A report reaches the coordinator.
    Deliver(usize, String),
    /// Its answer (or failure) reaches isolate k.
    Answer(usize, Result<String, String>),
    /// A watch reaches the coordinator.
    Watch(usize, String),
    /// The coordinator answers isolate k's held watch `token` with the verdict as it
    /// stands ([`WATCH_MS`] passed).
    WatchDue(usize, u64),
    /// A watch's answer (or failure) reaches isolate k.
    Pushed(usize, Result<String, String>),
    /// The coordinator restarts empty.
    Reset,
}

/// The fleet's events in time order (ties in the order pushed).
#[derive(Default)]
struct Queue {
    q: BinaryHeap<Reverse<(u64, u64)>>,
    evs: HashMap<u64, Ev>,
    seq: u64,
}

impl Queue {
    fn push(&mut self, at_us: u64, e: Ev) {
        self.seq += 1;
        self.q.push(Reverse((at_us, self.seq)));
        self.evs.insert(self.seq, e);
    }

    fn next_at(&self) -> Option<u64> {
        self.q.peek().map(|Reverse((t, _))| *t)
    }

    fn pop(&mut self) -> Option<(u64, Ev)> {
        let Reverse((at, id)) = self.q.pop()?;
        Some((at, self.evs.remove(&id)?))
    }
}

/// Notes isolate `e`'s mode at `now` when it changed.
fn note_mode(
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

/// The watches the coordinator holds: the watch's token → its isolate.
type Held = HashMap<u64, usize>;

/// The coordinator's side of the run: its held watches, and when the fleet opened or
/// closed (ms since the start, mode).
struct Watches {
    held: Held,
    delay_us: u64,
    start: Millis,
    moves: Vec<(u64, FleetMode)>,
}

impl Watches {
    /// Answers every held watch with `v` (its JSON `text`) when the fleet just opened or
    /// closed.
    fn broadcast(
        &mut self,
        c: &mut Coordinator,
        q: &mut Queue,
        at_us: u64,
        v: &Verdict,
        text: &str,
    ) {
        if c.moved() {
            self.moves
                .push((Millis(at_us / 1000).since(self.start), v.mode));
            for (_, k) in self.held.drain() {
                q.push(at_us + self.delay_us, Ev::Pushed(k, Ok(text.to_string())));
            }
        }
    }
}

/// `policy` with the breaker's scope set: `fleet` keeps the policy's fleet settings (or
/// takes the defaults), with the spec's report interval if it has one.
pub fn scoped(policy: &Policy, fleet: bool, spec: &FleetSpec) -> Result<Policy, String> {
    let mut p = policy.clone();
    let Breaker::Rate(r) = &mut p.breaker else {
        return Err("the fleet scope needs a rate breaker (`[breaker] mode = \"rate\"`)".into());
    };
    r.scope = if fleet {
        let mut f = match &r.scope {
            Scope::Fleet(f) => f.clone(),
            Scope::Isolate => FleetScope {
                coordinator: DEFAULT_COORDINATOR.into(),
                report_interval_ms: 1_000,
                verdict_ttl_ms: 3_000,
            },
        };
        if let Some(ms) = spec.report_interval_ms {
            f.report_interval_ms = ms;
            f.verdict_ttl_ms = 3 * ms;
        }
        Scope::Fleet(f)
    } else {
        Scope::Isolate
    };
    Ok(p)
}

/// Replays `sc` over `spec.isolates` isolates of `policy` (whose scope is used as is).
pub fn run(
    policy: &Policy,
    catalog: Option<&Catalog>,
    sc: &Scenario,
    spec: &FleetSpec,
) -> Result<FleetRun, String> {
    let bake = bake(policy, catalog, sc);
    let n = spec.isolates as usize;
    let mut engines = Vec::with_capacity(n);
    for _ in 0..n {
        engines.push(Engine::new(&bake)?);
    }
    // A coordinator with nothing heard yet (at the start, and after a reset).
    let fresh = || match &policy.breaker {
        Breaker::Rate(r) => match &r.scope {
            Scope::Fleet(f) => Some(Coordinator::new(
                &policy.service.name,
                &settings_hash(r),
                r.clone(),
                f.report_interval_ms,
            )),
            Scope::Isolate => None,
        },
        _ => None,
    };
    let mut coordinator = fresh();
    let (mut world, plans) = setup(policy, sc);
    let splitter = Splitter::new(spec.split, n);
    let mut virtuals: Vec<Virtual> = (0..n).map(|_| Virtual::new()).collect();
    let mut isolate_of = vec![0u32; plans.len()];
    for p in &plans {
        let k = splitter.isolate(p.index);
        isolate_of[p.index as usize] = k as u32;
        virtuals[k].arrive(sc.start_ms * 1000 + p.due_us, p.index, arrival(p));
    }
    drop(plans);
    let start = Millis(sc.start_ms);
    let mut due: BinaryHeap<Reverse<(u64, usize)>> = virtuals
        .iter()
        .enumerate()
        .filter_map(|(k, v)| v.next_at_us().map(|t| Reverse((t, k))))
        .collect();
    let mut fleet_q = Queue::default();
    let mut w = Watches {
        held: Held::new(),
        delay_us: spec.report_delay_ms * 1000,
        start: Millis(sc.start_ms),
        moves: Vec::new(),
    };
    if let Some((from, _, Down::Reset)) = spec.down {
        fleet_q.push((sc.start_ms + from) * 1000, Ev::Reset);
    }
    let mut last: Vec<&'static str> = engines.iter_mut().map(|e| e.breaker_mode(start)).collect();
    let mut changes: Vec<Changes> = vec![Vec::new(); n];
    let mut seen = vec![false; isolate_of.len()];
    let (mut reports, mut report_failures, mut watches, mut pushed) = (0u64, 0u64, 0u64, 0u64);
    let delay_us = spec.report_delay_ms * 1000;
    loop {
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
            let json = |v: &Verdict| serde_json::to_string(v).unwrap_or_default();
            match ev {
                Ev::Reset => {
                    coordinator = fresh();
                    for (_, k) in w.held.drain() {
                        let e = Err("the coordinator was reset".to_string());
                        fleet_q.push(at_us + delay_us, Ev::Pushed(k, e));
                    }
                }
                Ev::Deliver(k, text) => {
                    let answer = match coordinator.as_mut() {
                        None => Err("no coordinator".to_string()),
                        Some(c) => match Coordinator::parse(&text).and_then(|r| c.report(now, r)) {
                            Ok(v) => {
                                let text = json(&v);
                                w.broadcast(c, &mut fleet_q, at_us, &v, &text);
                                Ok(text)
                            }
                            Err(refusal) => Err(format!("refused: {refusal:?}")),
                        },
                    };
                    fleet_q.push(at_us + delay_us, Ev::Answer(k, answer));
                }
                Ev::Watch(k, text) => {
                    // As the Durable Object does: hold the watch first, then answer every
                    // held watch if the verdict this arrival computed moved the fleet.
                    let Some(c) = coordinator.as_mut() else {
                        let e = Err("no coordinator".to_string());
                        fleet_q.push(at_us + delay_us, Ev::Pushed(k, e));
                        continue;
                    };
                    let got = Coordinator::parse_watch(&text).and_then(|x| c.watch(now, &x));
                    match got {
                        Ok(None) => {
                            let token = fleet_q.seq + 1;
                            fleet_q.push(at_us + WATCH_MS * 1000, Ev::WatchDue(k, token));
                            w.held.insert(token, k);
                            let v = c.verdict(now);
                            w.broadcast(c, &mut fleet_q, at_us, &v, &json(&v));
                        }
                        Ok(Some(v)) => {
                            let text = json(&v);
                            w.broadcast(c, &mut fleet_q, at_us, &v, &text);
                            fleet_q.push(at_us + delay_us, Ev::Pushed(k, Ok(text)));
                        }
                        Err(refusal) => {
                            let e = Err(format!("refused: {refusal:?}"));
                            fleet_q.push(at_us + delay_us, Ev::Pushed(k, e));
                        }
                    }
                }
                Ev::WatchDue(k, token) => {
                    if w.held.remove(&token).is_some() {
                        let answer = match coordinator.as_mut() {
                            Some(c) => {
                                let v = c.verdict(now);
                                let text = json(&v);
                                w.broadcast(c, &mut fleet_q, at_us, &v, &text);
                                Ok(text)
                            }
                            None => Err("no coordinator".to_string()),
                        };
                        fleet_q.push(at_us + delay_us, Ev::Pushed(k, answer));
                    }
                }
                Ev::Answer(k, answer) => {
                    if answer.is_err() {
                        report_failures += 1;
                    }
                    engines[k].fleet_heard(now, answer.as_deref().map_err(|e| e.as_str()));
                    note_mode(&mut engines[k], now, (start, &mut last[k], &mut changes[k]));
                }
                Ev::Pushed(k, answer) => {
                    pushed += u64::from(answer.is_ok());
                    engines[k].fleet_watched(now, answer.as_deref().map_err(|e| e.as_str()));
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
        for (request, at, path, text, timeout_ms) in std::mem::take(&mut world.reports) {
            let watch = path == "/watch";
            if watch {
                watches += 1;
            } else {
                reports += 1;
            }
            let k = isolate_of[request as usize] as usize;
            let at_us = at.0 * 1000;
            let t_ms = at.since(start);
            let lost = unit(mix(request) ^ (reports + watches)) < spec.report_loss;
            let down = spec
                .down
                .filter(|(from, to, how)| *how != Down::Reset && (*from..*to).contains(&t_ms))
                .map(|d| d.2);
            let failed = |e: String| {
                if watch {
                    Ev::Pushed(k, Err(e))
                } else {
                    Ev::Answer(k, Err(e))
                }
            };
            match (lost, down) {
                (true, _) | (_, Some(Down::Hang)) => fleet_q.push(
                    at_us + timeout_ms * 1000,
                    failed(format!("no answer within {timeout_ms} ms")),
                ),
                (_, Some(_)) => fleet_q.push(
                    at_us + 2 * delay_us,
                    failed("the coordinator answered 500".into()),
                ),
                _ if watch => fleet_q.push(at_us + delay_us, Ev::Watch(k, text)),
                _ => fleet_q.push(at_us + delay_us, Ev::Deliver(k, text)),
            }
        }
    }
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
        fleet_moves: w.moves,
    })
}

mod figures;
pub mod spec;
pub use figures::{fault_span, figures, human, Figures};
pub use spec::{spec, Down, FleetSpec, RawDown, RawFleet, Split, MAX_ISOLATES};

#[cfg(test)]
mod tests;
