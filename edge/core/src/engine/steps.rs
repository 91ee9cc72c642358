//! A request after its start: each report of the driver, handed to the part of the request
//! that waits for it — the storm limiter's verdict, the race, the cascade, an event flow —
//! and the instant the request next wants to wake.

use crate::disclosure::Answer;
use crate::io::{Done, IoId};
use crate::time::Millis;

use super::command::{Command, Input, Output};
use super::finish::{answered, storm_limited};
use super::flight::{Flight, Req, Stage};
use super::timers::Timer;
use super::{race, walk, Engine};

pub(super) fn step<'p>(
    engine: &mut Engine<'p>,
    f: &mut Flight<'p>,
    now: Millis,
    input: Input,
) -> Output<'p> {
    let mut cmds = Vec::new();
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
        return f.output(cmds);
    }
    match std::mem::replace(&mut f.stage, Stage::Done) {
        Stage::Limiting { io, req } => {
            let verdict = match input {
                Input::Done(got, Done::Limited(verdict)) if got == io => verdict,
                // The limiter took the race's whole time: the request goes through without
                // it (the limiter protects the origin; it must not become a way to fail).
                Input::Timer if f.timers.fired(Timer::Limiter) => {
                    Err("no verdict before the race deadline".into())
                }
                _ => {
                    f.stage = Stage::Limiting { io, req };
                    return f.output(cmds);
                }
            };
            f.timers.stop(Timer::Limiter);
            match verdict {
                Ok(false) => storm_limited(engine, f, now, &mut cmds),
                Ok(true) => serve(engine, f, now, req, &mut cmds, |e, f, r, c| {
                    race::attempt(e, f, r, now, c)
                }),
                Err(e) => {
                    f.note("STORM_LIMITER_UNAVAILABLE", e);
                    serve(engine, f, now, req, &mut cmds, |e, f, r, c| {
                        race::attempt(e, f, r, now, c)
                    })
                }
            }
        }
        Stage::Serving(req) => serve(engine, f, now, req, &mut cmds, |e, f, r, c| {
            serving(e, f, r, now, input, c)
        }),
        Stage::Events { io, flow, calls } => {
            return super::events::step(engine, f, now, (io, calls), *flow, input, cmds);
        }
        // Reports after the answer: the response is out; only the isolate learns (above).
        Stage::Done => {}
    }
    f.output(cmds)
}

/// Runs `then` on the request's race and cascade; answers when it gives an answer.
fn serve<'p>(
    engine: &mut Engine<'p>,
    f: &mut Flight<'p>,
    now: Millis,
    mut req: Box<Req<'p>>,
    cmds: &mut Vec<Command<'p>>,
    then: impl FnOnce(
        &mut Engine<'p>,
        &mut Flight<'p>,
        &mut Req<'p>,
        &mut Vec<Command<'p>>,
    ) -> Option<Answer>,
) {
    match then(engine, f, &mut req, cmds) {
        Some(answer) => answered(engine, f, now, req, answer, cmds),
        None => f.stage = Stage::Serving(req),
    }
}

fn serving<'p>(
    engine: &mut Engine<'p>,
    f: &mut Flight<'p>,
    req: &mut Req<'p>,
    now: Millis,
    input: Input,
    cmds: &mut Vec<Command<'p>>,
) -> Option<Answer> {
    match input {
        // Each timer that fired, by its name, until one of them answers.
        Input::Timer => {
            while let Some(timer) = f.timers.next_fired() {
                let answer = match timer {
                    Timer::Attempt | Timer::Hedge | Timer::Backoff => {
                        race::timer(engine, f, req, now, timer, cmds)
                    }
                    Timer::TierPoll | Timer::TierEnd => {
                        walk::timer(engine, f, req, now, timer, cmds)
                    }
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
                        race::fetched(engine, f, req, now, io, observed, cmds)
                    } else {
                        walk::http(engine, f, req, now, io, observed, cmds)
                    }
                }
                Done::Kv(read) => walk::kv(engine, f, req, now, io, read, cmds),
                Done::Limited(_) => None,
            }
        }
        Input::Heard(..) => None,
        Input::Asked => race::asked(engine, f, req, now, cmds),
    }
}

/// Operation `io` ended: it no longer holds one of the request's connections.
fn ended(req: &mut Req<'_>, io: IoId) {
    req.open.retain(|o| *o != io);
}
