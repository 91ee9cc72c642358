//! [V-*] Event requests in the engine: the flows of [`crate::events::flow`] turned into the
//! engine's commands, and their answers into replies with their own log line. Ingest
//! outcomes are counted per isolate (`counters.events`).

use crate::disclosure::Rendered;
use crate::events::flow::{
    self, Answered, Ctx, Flow, Heard, Io as EventIo, Request, Secrets, Step as FlowStep,
};
use crate::io::IoId;
use crate::policy::events::Events;

use super::command::{Command, Input, Reply};
use super::flight::{Flight, Stage};
use super::steps::Step;
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

impl<'p> Step<'_, 'p> {
    /// An event request (ingest, or the operators' events endpoints) starts its flow.
    pub(super) fn event_start(&mut self, req: &Incoming<'_>, env: &dyn Bindings, ev: &'p Events) {
        let policy = self.engine.policy();
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
        let (flow, next) = flow::start(
            &ctx(self.engine, self.flight, ev),
            self.now,
            &request,
            secrets,
        );
        self.event_drive(flow, next, ev);
    }

    /// The status endpoint with its events block.
    pub(super) fn event_status(&mut self, rendered: &Rendered, ev: &'p Events) {
        let base = serde_json::from_str(&rendered.body).unwrap_or(serde_json::Value::Null);
        let (flow, next) = flow::status(base, ev);
        self.event_drive(flow, next, ev);
    }

    /// The driver reported `input` for an event request waiting for operation `io` (until
    /// its [`Timer::Shards`], for `calls` shard calls).
    pub(super) fn event_heard(&mut self, (io, calls): (IoId, usize), mut flow: Flow, input: Input) {
        let policy = self.engine.policy();
        let Some(ev) = policy.events.as_ref() else {
            let invalid = crate::disclosure::bake_invalid(
                "the policy has no [events]",
                &self.flight.correlation_id,
            );
            self.finish_early(invalid, crate::metrics::Outcome::BakeInvalid, None);
            return;
        };
        let f = &mut *self.flight;
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
                return;
            }
        };
        let next = flow.step(&ctx(self.engine, self.flight, ev), self.now, heard);
        self.event_drive(flow, next, ev);
    }

    /// The flow's next step: an operation to start (and wait for), or its answer.
    fn event_drive(&mut self, flow: Flow, next: FlowStep, ev: &'p Events) {
        match next {
            FlowStep::Io(op) => {
                let io = self.engine.ios.next();
                let f = &mut *self.flight;
                let calls = match &op {
                    EventIo::Call(c) => {
                        f.timers
                            .set(Timer::Shards, self.now.plus(flow::SHARD_TIMEOUT_MS));
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
                self.cmds.push(Command::Events { io, op });
            }
            FlowStep::Answer(a) => {
                let cmd = self.event_answer(*a, ev);
                self.cmds.push(cmd);
            }
        }
    }

    fn event_answer(&mut self, a: Answered, ev: &'p Events) -> Command<'p> {
        let (engine, f) = (&mut *self.engine, &mut *self.flight);
        f.stage = Stage::Done;
        if a.outcome != "ops" {
            engine.counters.record_event(a.outcome);
        }
        let log = flow::log_line(
            &ctx(engine, f, ev),
            &a,
            self.now.since(f.started),
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
}
