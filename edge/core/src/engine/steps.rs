//! A request after its start: each report of the driver, handed to the part of the request
//! that waits for it — the storm limiter's verdict, the race, the cascade, an event flow —
//! and the instant the request next wants to wake.
//!
//! Every part of a request's handling works on one [`Step`]: the isolate's engine, the
//! request, the instant of the report and the commands the step has given so far.

use crate::disclosure::Answer;
use crate::io::{Done, IoId};
use crate::time::Millis;

use super::command::{Command, Input, Output};
use super::flight::{Flight, Req, Stage};
use super::timers::Timer;
use super::Engine;

/// One step of one request: what the engine does with what happened to `flight` at `now`.
/// The race (`race.rs`), the cascade (`walk.rs`), the answer (`finish.rs`), the request's
/// start (`start.rs`) and the event flows (`events.rs`) are its methods; they ask the
/// engine's components through `engine` and give their commands by pushing to `cmds`, and
/// [`Step::output`] hands them to the driver with the request's next wake-up.
pub(super) struct Step<'a, 'p> {
    pub engine: &'a mut Engine<'p>,
    pub flight: &'a mut Flight<'p>,
    /// When the driver reported what this step handles.
    pub now: Millis,
    /// The commands given so far.
    pub cmds: Vec<Command<'p>>,
}

impl<'a, 'p> Step<'a, 'p> {
    pub(super) fn new(engine: &'a mut Engine<'p>, flight: &'a mut Flight<'p>, now: Millis) -> Self {
        Step {
            engine,
            flight,
            now,
            cmds: Vec::new(),
        }
    }

    /// The step's output: its commands and the request's next wake-up ([`Flight::output`]).
    pub(super) fn output(self) -> Output<'p> {
        self.flight.output(self.cmds)
    }

    /// The driver reported `input`.
    pub(super) fn report(mut self, input: Input) -> Output<'p> {
        let now = self.now;
        let (engine, f) = (&mut *self.engine, &mut *self.flight);
        if input == Input::Timer {
            // How late the timer fired: the isolate's scheduling delay ([`super::lag`]).
            if let Some(due) = f.armed {
                engine.health.lag_sample(now, now.since(due));
            }
            // Which of the request's named timers it was: each is handled by its name below.
            f.timers.expire(now);
        }
        if let Input::Done(io, Done::Kv(read)) = &input {
            engine.reads.ended(now, *io, read);
        }
        // A timed-out fetch the isolate listened to: only the isolate learns from it.
        if let (Input::Done(io, _), true) = (
            &input,
            engine.health.listened(now, &input, &mut engine.counters),
        ) {
            if let Stage::Serving(req) = &mut f.stage {
                ended(req, *io);
            }
            return self.output();
        }
        match std::mem::replace(&mut f.stage, Stage::Done) {
            Stage::Limiting { io, req } => {
                let verdict = match input {
                    Input::Done(got, Done::Limited(verdict)) if got == io => verdict,
                    // The limiter took the race's whole time: the request goes through
                    // without it (the limiter protects the origin; it must not become a way
                    // to fail).
                    Input::Timer if f.timers.fired(Timer::Limiter) => {
                        Err("no verdict before the race deadline".into())
                    }
                    _ => {
                        f.stage = Stage::Limiting { io, req };
                        return self.output();
                    }
                };
                f.timers.stop(Timer::Limiter);
                match verdict {
                    Ok(false) => self.storm_limited(),
                    Ok(true) => self.serve(req, |s, r| s.attempt(r)),
                    Err(e) => {
                        f.note("STORM_LIMITER_UNAVAILABLE", e);
                        self.serve(req, |s, r| s.attempt(r))
                    }
                }
            }
            Stage::Serving(req) => self.serve(req, |s, r| s.serving(r, input)),
            Stage::Events { io, flow, calls } => self.event_heard((io, calls), *flow, input),
            // Reports after the answer: the response is out; only the isolate learns (above).
            Stage::Done => {}
        }
        self.output()
    }

    /// Runs `then` on the request's race and cascade; answers when it gives an answer.
    pub(super) fn serve(
        &mut self,
        mut req: Box<Req<'p>>,
        then: impl FnOnce(&mut Self, &mut Req<'p>) -> Option<Answer>,
    ) {
        match then(self, &mut req) {
            Some(answer) => self.answered(req, answer),
            None => self.flight.stage = Stage::Serving(req),
        }
    }

    fn serving(&mut self, req: &mut Req<'p>, input: Input) -> Option<Answer> {
        match input {
            // Each timer that fired, by its name, until one of them answers.
            Input::Timer => {
                while let Some(timer) = self.flight.timers.next_fired() {
                    let answer = match timer {
                        Timer::Attempt | Timer::Hedge | Timer::Backoff => {
                            self.race_timer(req, timer)
                        }
                        Timer::TierPoll | Timer::TierEnd => self.tier_timer(req, timer),
                        // Not a serving request's.
                        Timer::Limiter | Timer::Shards => None,
                    };
                    if answer.is_some() {
                        return answer;
                    }
                }
                None
            }
            Input::Done(io, done) => {
                ended(req, io);
                match done {
                    Done::Fetched(observed) => {
                        if req.calling.is_some() {
                            self.fetched(req, io, observed)
                        } else {
                            self.tier_http(req, io, observed)
                        }
                    }
                    Done::Kv(read) => self.tier_kv(req, io, read),
                    Done::Limited(_) => None,
                }
            }
            Input::Heard(..) => None,
            Input::Asked => self.asked(req),
        }
    }
}

/// Operation `io` ended: it no longer holds one of the request's connections.
fn ended(req: &mut Req<'_>, io: IoId) {
    req.open.retain(|o| *o != io);
}
