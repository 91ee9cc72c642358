//! A driver of the engine in virtual time, in the manner of quinn's test `Pair`: a queue of
//! instants, and each step jumps to the next one. `understudy simulate` drives the engine
//! with it, and so do the engine's own tests.
//!
//! It decides nothing (docs/adr/010-the-engine-owns-time.md): a [`World`] says how long each
//! operation takes and what it produces (a hang never ends), and the driver delivers that
//! result when its time comes — unless the engine aborted the operation first. Timers fire
//! exactly when the engine asked (or as late as the world says, to model a busy isolate).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};

use crate::breaker::member::FleetReport;
use crate::classify::Observed;
use crate::events::flow::{Heard, Io as EventIo};
use crate::io::{Done, IoId, Op};
use crate::time::Millis;

use super::command::{Command, Input, Output, Reply};
use super::{Bindings, Engine, Flight, Incoming};

/// What the operations of the simulated world do.
pub trait World<'p> {
    /// Request `request` starts `op` at `now`: how many ms until it ends and what it
    /// produced, or `None` when it never ends (a hang).
    fn perform(&mut self, request: u64, now: Millis, op: &Op<'p>) -> Option<(u64, Done)>;

    /// Request `request` starts an event operation. By default the events outbox is not
    /// modelled: a body reads empty, a shard call fails.
    fn perform_events(&mut self, request: u64, now: Millis, op: &EventIo) -> Option<(u64, Heard)> {
        let _ = (request, now);
        Some(match op {
            EventIo::ReadBody { .. } => (0, Heard::Body(Ok(Vec::new()))),
            EventIo::Call(calls) => (
                1,
                Heard::Shards(
                    calls
                        .iter()
                        .map(|_| Err("simulated: the events outbox is not modelled".into()))
                        .collect(),
                ),
            ),
        })
    }

    /// How many ms after `due` request `request`'s timer fires (0: on time).
    fn timer_late(&mut self, request: u64, due: Millis) -> u64 {
        let _ = (request, due);
        0
    }

    /// [F-SCOPE] Request `request` asks the breaker's coordinator with `call` at `now`
    /// ([`Command::Ask`]). By default no coordinator is modelled: it never answers. A world
    /// that models one hands the answer to [`Engine::fleet_heard`] and then tells the driver
    /// ([`Virtual::asked`]).
    fn ask(&mut self, request: u64, now: Millis, call: FleetReport) {
        let _ = (request, now, call);
    }

    /// Request `request` was answered at `now`.
    fn answered(&mut self, request: u64, now: Millis, reply: Reply);
}

/// An owned request to deliver at its arrival.
#[derive(Debug, Clone)]
pub struct Arrival {
    pub method: String,
    pub path: String,
    pub query: String,
    pub headers: Vec<(String, String)>,
    pub seed: u64,
}

#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Wake {
    Arrive(u64),
    Done(u64, IoId),
    Timer(u64, u64),
    /// The end of a [`Command::Hear`]: the fetch is aborted now if it has not ended.
    Abandon(u64, IoId),
    /// The isolate heard the answer to the request's [`Command::Ask`].
    Asked(u64),
}

struct InFlight<'p> {
    flight: Flight<'p>,
    /// The timer's generation: a queued firing of an older one is stale.
    timer: u64,
    /// Results waiting for their instant, by operation.
    results: HashMap<IoId, Input>,
}

/// The virtual driver. Time is in µs since the epoch (arrivals may fall between ms); the
/// engine sees whole ms.
#[derive(Default)]
pub struct Virtual<'p> {
    queue: BinaryHeap<Reverse<(u64, u64, Wake)>>,
    seq: u64,
    arrivals: HashMap<u64, Arrival>,
    flights: HashMap<u64, InFlight<'p>>,
    /// Results still on their way to requests already answered (the isolate still learns
    /// from them: [`Engine::settle`]).
    orphans: HashMap<(u64, IoId), Input>,
    aborted: HashSet<IoId>,
    /// Fetches the engine listens to after their timeout ([`Command::Hear`]): a result by
    /// then is delivered as any other; at `until` the fetch is aborted, and that is reported
    /// (as the Worker's driver does) instead of a later result.
    hearing: HashSet<IoId>,
    now_us: u64,
}

/// What a step did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stepped {
    pub request: u64,
    pub at: Millis,
}

impl<'p> Virtual<'p> {
    pub fn new() -> Self {
        Virtual::default()
    }

    /// Request `request` arrives at `at_us` (µs since the epoch).
    pub fn arrive(&mut self, at_us: u64, request: u64, arrival: Arrival) {
        self.arrivals.insert(request, arrival);
        self.push(at_us, Wake::Arrive(request));
    }

    /// When the next step happens (µs since the epoch), if anything is left to happen.
    pub fn next_at_us(&self) -> Option<u64> {
        self.queue.peek().map(|Reverse((at, _, _))| *at)
    }

    /// The virtual clock: the instant of the last step.
    pub fn now(&self) -> Millis {
        Millis(self.now_us / 1000)
    }

    fn push(&mut self, at_us: u64, w: Wake) {
        self.seq += 1;
        self.queue.push(Reverse((at_us, self.seq, w)));
    }

    /// Runs every step until nothing is left to happen.
    pub fn run(&mut self, engine: &mut Engine<'p>, env: &dyn Bindings, world: &mut impl World<'p>) {
        while self.step(engine, env, world).is_some() {}
    }

    /// Jumps to the next instant something happens and lets the engine handle it; `None`
    /// when nothing is left.
    pub fn step(
        &mut self,
        engine: &mut Engine<'p>,
        env: &dyn Bindings,
        world: &mut impl World<'p>,
    ) -> Option<Stepped> {
        self.step_until(u64::MAX, engine, env, world)
    }

    /// [`Self::step`], but only to an instant at or before `limit_us`: `None` when the next
    /// thing to happen is later (several drivers interleaved in time: `simulate --isolates`).
    pub fn step_until(
        &mut self,
        limit_us: u64,
        engine: &mut Engine<'p>,
        env: &dyn Bindings,
        world: &mut impl World<'p>,
    ) -> Option<Stepped> {
        loop {
            if self.next_at_us()? > limit_us {
                return None;
            }
            let Reverse((at_us, _, wake)) = self.queue.pop()?;
            self.now_us = self.now_us.max(at_us);
            let now = Millis(at_us / 1000);
            let (request, out) = match wake {
                Wake::Arrive(i) => {
                    let Some(a) = self.arrivals.remove(&i) else {
                        continue;
                    };
                    let req = Incoming {
                        method: &a.method,
                        path: &a.path,
                        query: &a.query,
                        headers: &a.headers,
                    };
                    let (flight, out) = engine.start(now, &req, env, a.seed);
                    self.flights.insert(
                        i,
                        InFlight {
                            flight,
                            timer: 0,
                            results: HashMap::new(),
                        },
                    );
                    (i, out)
                }
                Wake::Done(i, io) => {
                    if self.aborted.remove(&io) {
                        continue;
                    }
                    self.hearing.remove(&io);
                    let Some(f) = self.flights.get_mut(&i) else {
                        if let Some(input) = self.orphans.remove(&(i, io)) {
                            engine.settle(now, input);
                        }
                        continue;
                    };
                    let Some(input) = f.results.remove(&io) else {
                        continue;
                    };
                    (i, engine.step(&mut f.flight, now, input))
                }
                Wake::Abandon(i, io) => {
                    if !self.hearing.remove(&io) {
                        continue; // it ended in time
                    }
                    self.orphans.remove(&(i, io));
                    let aborted = Input::Done(
                        io,
                        Done::Fetched(Observed::Connect("aborted: listened to long enough".into())),
                    );
                    let Some(f) = self.flights.get_mut(&i) else {
                        engine.settle(now, aborted);
                        continue;
                    };
                    f.results.remove(&io);
                    (i, engine.step(&mut f.flight, now, aborted))
                }
                Wake::Asked(i) => {
                    let Some(f) = self.flights.get_mut(&i) else {
                        continue;
                    };
                    (i, engine.step(&mut f.flight, now, Input::Asked))
                }
                Wake::Timer(i, generation) => {
                    let Some(f) = self.flights.get_mut(&i) else {
                        continue;
                    };
                    if f.timer != generation {
                        continue;
                    }
                    (i, engine.step(&mut f.flight, now, Input::Timer))
                }
            };
            self.apply(world, request, at_us, out);
            return Some(Stepped { request, at: now });
        }
    }

    /// Performs `out` for request `request` at `at_us`.
    fn apply(&mut self, world: &mut impl World<'p>, request: u64, at_us: u64, out: Output<'p>) {
        let Output { commands, wake_at } = out;
        self.perform(world, request, at_us, commands);
        let late = wake_at.map(|due| (due, world.timer_late(request, due)));
        let Some(f) = self.flights.get_mut(&request) else {
            return;
        };
        if f.flight.is_done() {
            // Answered: what is still on its way only teaches the isolate.
            if let Some(f) = self.flights.remove(&request) {
                for (io, input) in f.results {
                    self.orphans.insert((request, io), input);
                }
            }
            return;
        }
        f.timer += 1;
        let generation = f.timer;
        if let Some((due, late)) = late {
            let at = (due.0 + late) * 1000;
            self.push(at.max(at_us), Wake::Timer(request, generation));
        }
    }

    fn perform(
        &mut self,
        world: &mut impl World<'p>,
        request: u64,
        at_us: u64,
        commands: Vec<Command<'p>>,
    ) {
        let now = Millis(at_us / 1000);
        for c in commands {
            match c {
                Command::Start { io, op } => {
                    if let Some((ms, done)) = world.perform(request, now, &op) {
                        self.deliver(request, io, at_us + ms * 1000, Input::Done(io, done));
                    }
                }
                Command::Events { io, op } => {
                    if let Some((ms, heard)) = world.perform_events(request, now, &op) {
                        self.deliver(request, io, at_us + ms * 1000, Input::Heard(io, heard));
                    }
                }
                Command::Abort { io } => {
                    self.aborted.insert(io);
                }
                Command::Hear { io, until } => {
                    self.hearing.insert(io);
                    self.push((until.0 * 1000).max(at_us), Wake::Abandon(request, io));
                }
                Command::Ask(call) => world.ask(request, now, call),
                Command::Respond(reply) => {
                    world.answered(request, now, *reply);
                }
            }
        }
    }

    fn deliver(&mut self, request: u64, io: IoId, at_us: u64, input: Input) {
        match self.flights.get_mut(&request) {
            Some(f) => {
                f.results.insert(io, input);
            }
            None => {
                self.orphans.insert((request, io), input);
            }
        }
        self.push(at_us, Wake::Done(request, io));
    }

    /// The isolate heard, at `at_us`, the answer to request `request`'s [`Command::Ask`]
    /// (the world handed it to [`Engine::fleet_heard`]): the request, if it still waits,
    /// is told then.
    pub fn asked(&mut self, request: u64, at_us: u64) {
        self.push(at_us.max(self.now_us), Wake::Asked(request));
    }

    /// The requests not answered yet.
    pub fn pending(&self) -> usize {
        self.flights.len() + self.arrivals.len()
    }
}
