//! What the engine asks a driver to do ([`Command`], in an [`Output`] with the instant it
//! next wants to wake) and what the driver reports back ([`Input`]) — the only I/O there is
//! (docs/adr/010-the-engine-owns-time.md).
//!
//! Why commands and reports rather than "fetch this within 45 ms"? Because whoever decides
//! when 45 ms have passed decides the race, and that must be the engine: a driver starts an
//! operation, aborts one when told, arms the one timer the engine asks for, and reports what
//! ended, with the time. It never concludes "timed out" and never picks a winner.

use crate::events::flow::{Heard, Io as EventIo};
use crate::io::{Done, IoId, Op};
use crate::metrics::DataPoint;
use crate::time::Millis;
use crate::writethrough::KvWrite;

/// What the driver tells the engine.
#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    /// Operation `io` (an [`Op`]) ended.
    Done(IoId, Done),
    /// The event operation `io` (an [`EventIo`]) ended.
    Heard(IoId, Heard),
    /// The timer armed for [`Output::wake_at`] fired: the engine's table of named timers
    /// says which of the request's waits it ends (`engine/timers.rs`).
    Timer,
    /// [F-SCOPE] The answer to the request's [`Command::Ask`] (or its failure) was handed to
    /// [`super::Engine::fleet_heard`]: the request heeds what the isolate heard.
    Asked,
}

/// What the driver must do.
#[derive(Debug, Clone, PartialEq)]
pub enum Command<'p> {
    /// Start `op`; report [`Input::Done`] with `io` when it ends.
    Start { io: IoId, op: Op<'p> },
    /// Start an event request's `op`; report [`Input::Heard`] with `io` when it ends.
    Events { io: IoId, op: EventIo },
    /// Abort the fetch `io`: its answer is no longer wanted (a report still made is ignored).
    Abort { io: IoId },
    /// The request no longer waits for fetch `io`, but the isolate listens for it: keep it
    /// until `until`, then abort it; report [`Input::Done`] with `io` when it ends — its
    /// answer, or the abort's failure at `until`. Given for a timeout on a busy isolate,
    /// whose answer may already be in the isolate's own queue: a good answer then is the
    /// model's word ([`super::verdict`]).
    Hear { io: IoId, until: Millis },
    /// [F-SCOPE] Send this report to the breaker's coordinator now, with the request's
    /// first model call (an isolate in the dark asks first:
    /// [`crate::breaker::member::Member::ask`]). Hand its answer, or its failure after its
    /// timeout, to [`super::Engine::fleet_heard`] as a [`Reply::fleet`] report's, then —
    /// while the request is not answered — report [`Input::Asked`].
    Ask(crate::breaker::member::FleetReport),
    /// Answer the client (then perform the commands after it).
    Respond(Box<Reply>),
}

/// One step's commands, in order, and when the request next wants [`Input::Timer`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Output<'p> {
    pub commands: Vec<Command<'p>>,
    /// The request's one timer: fire at this instant (the earliest of its named timers).
    /// The driver re-arms it when it changes and clears it when `None` (always `None` once
    /// the request is answered).
    pub wake_at: Option<Millis>,
}

impl<'p> Output<'p> {
    /// The reply, when this step answers the client.
    pub fn reply(&self) -> Option<&Reply> {
        self.commands.iter().find_map(|c| match c {
            Command::Respond(r) => Some(&**r),
            _ => None,
        })
    }

    /// The operations this step starts.
    pub fn starts(&self) -> impl Iterator<Item = (IoId, &Op<'p>)> {
        self.commands.iter().filter_map(|c| match c {
            Command::Start { io, op } => Some((*io, op)),
            _ => None,
        })
    }
}

/// The answer, ready to send, and what goes with it.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    /// The request's correlation ID (also in the headers and the log line).
    pub correlation_id: String,
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: String,
    /// KV writes to run in the background (`waitUntil`); report failures with
    /// [`super::Engine::write_failed`].
    pub writes: Vec<KvWrite>,
    /// The request's one structured log line (JSON).
    pub log: String,
    /// The request's Analytics Engine data point, when it counts as one.
    pub point: Option<DataPoint>,
    /// [F-SCOPE] A report and a watch for the breaker's coordinator, when due: send them in
    /// the background, never before answering, and hand each one's answer (or failure) to
    /// [`super::Engine::fleet_heard`] with its path.
    pub fleet: Vec<crate::breaker::member::FleetReport>,
    /// [F-SCOPE] When to call [`super::Engine::fleet_wake`] from this answer's background
    /// work (`waitUntil`), and send what it returns as [`Reply::fleet`]: an isolate's first
    /// report, when no request may come to carry it.
    pub fleet_wake: Option<Millis>,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}
