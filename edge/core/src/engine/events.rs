//! [V-*] Event requests in the engine: the flows of [`crate::events::flow`] turned into the
//! engine's commands, and their answers into replies with their own log line. Ingest
//! outcomes are counted per isolate (`counters.events`).

use crate::disclosure::Rendered;
use crate::events::flow::{
    self, Answered, Ctx, Flow, Heard, Io as EventIo, Request, Secrets, Step,
};
use crate::io::IoId;
use crate::policy::events::Events;
use crate::time::Millis;

use super::command::{Command, Input, Output, Reply};
use super::flight::{Flight, Stage};
use super::timers::Timer;
use super::{Bindings, Engine, Incoming};

fn ctx<'a>(engine: &'a Engine<'_>, f: &'a Flight<'_>, ev: &'a Events) -> Ctx<'a> {
    Ctx {
        policy: engine.policy(),
        events: ev,
        release_id: &engine.bake.release_id,
        correlation_id: &f.correlation_id,
    }
}

pub(super) fn start<'p>(
    engine: &mut Engine<'p>,
    f: &mut Flight<'p>,
    now: Millis,
    req: &Incoming<'_>,
    env: &dyn Bindings,
    ev: &'p Events,
) -> Output<'p> {
    let policy = engine.policy();
    let mut nonce = [0u8; 12];
    let secrets = Secrets {
        identity_key: policy.identity.as_ref().and_then(|i| env.secret(&i.secret)),
        seal_key: env.secret(&ev.encryption_key_secret),
        admin: policy.admin.as_ref().and_then(|a| env.secret(&a.secret)),
        nonce: env.random_bytes(&mut nonce).then_some(nonce),
    };
    let request = Request {
        method: req.method,
        path: req.path,
        query: req.query,
        authorization: req.header("authorization"),
        content_length: req.header("content-length"),
        content_type: req.header("content-type"),
    };
    let (flow, step) = flow::start(&ctx(engine, f, ev), now, &request, secrets);
    drive(engine, f, now, flow, step, ev, Vec::new())
}

/// The status endpoint with its events block.
pub(super) fn status<'p>(
    engine: &mut Engine<'p>,
    f: &mut Flight<'p>,
    now: Millis,
    rendered: &Rendered,
    ev: &'p Events,
) -> Output<'p> {
    let base = serde_json::from_str(&rendered.body).unwrap_or(serde_json::Value::Null);
    let (flow, step) = flow::status(base, ev);
    drive(engine, f, now, flow, step, ev, Vec::new())
}

/// The driver reported `input` for an event request waiting for operation `io` (until its
/// [`Timer::Shards`], for `calls` shard calls).
pub(super) fn step<'p>(
    engine: &mut Engine<'p>,
    f: &mut Flight<'p>,
    now: Millis,
    (io, calls): (IoId, usize),
    mut flow: Flow,
    input: Input,
    cmds: Vec<Command<'p>>,
) -> Output<'p> {
    let policy = engine.policy();
    let Some(ev) = policy.events.as_ref() else {
        let cmd = super::finish::finish_early(
            engine,
            f,
            now,
            crate::disclosure::bake_invalid("the policy has no [events]", &f.correlation_id),
            crate::metrics::Outcome::BakeInvalid,
            None,
        );
        return f.output(vec![cmd]);
    };
    let heard = match input {
        Input::Heard(got, heard) if got == io => heard,
        // The shards took too long: every call failed (nothing is acknowledged, the caller
        // gets 503 and sends the event again).
        Input::Timer if f.timers.fired(Timer::Shards) => Heard::Shards(
            (0..calls.max(1))
                .map(|_| {
                    Err(format!(
                        "did not answer within {} ms",
                        flow::SHARD_TIMEOUT_MS
                    ))
                })
                .collect(),
        ),
        // Anything else is not what this request waits for: keep waiting.
        _ => {
            f.stage = Stage::Events {
                io,
                flow: Box::new(flow),
                calls,
            };
            return f.output(cmds);
        }
    };
    let next = flow.step(&ctx(engine, f, ev), now, heard);
    drive(engine, f, now, flow, next, ev, cmds)
}

fn drive<'p>(
    engine: &mut Engine<'p>,
    f: &mut Flight<'p>,
    now: Millis,
    flow: Flow,
    step: Step,
    ev: &'p Events,
    mut cmds: Vec<Command<'p>>,
) -> Output<'p> {
    match step {
        Step::Io(op) => {
            let io = engine.ios.next();
            let calls = match &op {
                EventIo::Call(c) => {
                    f.timers
                        .set(Timer::Shards, now.plus(flow::SHARD_TIMEOUT_MS));
                    c.len()
                }
                EventIo::ReadBody { .. } => {
                    f.timers.stop(Timer::Shards);
                    0
                }
            };
            f.stage = Stage::Events {
                io,
                flow: Box::new(flow),
                calls,
            };
            cmds.push(Command::Events { io, op });
        }
        Step::Answer(a) => cmds.push(finish(engine, f, now, *a, ev)),
    }
    f.output(cmds)
}

fn finish<'p>(
    engine: &mut Engine<'p>,
    f: &mut Flight<'p>,
    now: Millis,
    a: Answered,
    ev: &'p Events,
) -> Command<'p> {
    f.stage = Stage::Done;
    if a.outcome != "ops" {
        engine.counters.record_event(a.outcome);
    }
    let log = flow::log_line(
        &ctx(engine, f, ev),
        &a,
        now.since(f.started),
        &engine.policy().service.name,
    );
    Command::Respond(Box::new(Reply {
        correlation_id: f.correlation_id.clone(),
        status: a.rendered.status,
        headers: a.rendered.headers,
        body: a.rendered.body,
        writes: Vec::new(),
        log,
        point: None,
        fleet: Vec::new(),
        fleet_wake: None,
    }))
}
