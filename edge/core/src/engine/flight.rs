//! One request's state between two steps: what [`super::start`] resolved before any I/O,
//! the stage it is at, the origin attempt and the tier read in flight, and the named timers
//! they arm ([`Timers`]). Data only: what moves it is a [`super::steps::Step`], whose
//! methods live in `start`, `race`, `walk`, `finish`, `events` and `steps`.

use crate::breaker::Admission;
use crate::cascade::{Ctx, Note, Walker};
use crate::classify::Failure;
use crate::classify::FailureReason;
use crate::correlation::Provenance;
use crate::events::flow::Flow;
use crate::http::Credential;
use crate::io::IoId;
use crate::retry::Backoff;
use crate::time::Millis;

use super::bulkhead::Lease;
use super::command::{Command, Output};
use super::hedge::Pair;
use super::outbound::Common;
use super::rng::Rng;
use super::timers::Timers;
use super::trace::Trace;

/// One request in flight. Created by [`super::Engine::start`], advanced by
/// [`super::Engine::step`].
pub struct Flight<'p> {
    pub(super) started: Millis,
    pub(super) correlation_id: String,
    pub(super) provenance: Provenance,
    pub(super) trace: Trace,
    pub(super) credentialed: bool,
    pub(super) origin_url: String,
    pub(super) origin_override: bool,
    pub(super) idempotency_key: Option<String>,
    pub(super) origin_credential: Option<Credential>,
    /// Resolved secret of each HTTP tier's credential, by tier index.
    pub(super) tier_secrets: Vec<Option<String>>,
    /// The request may be repeated: an idempotent call, or the client's idempotency key.
    pub(super) repeatable: bool,
    /// Speculative tier reads this request asked for and has not read yet.
    pub(super) prefetched: Vec<(&'p str, String)>,
    /// Notes of the engine's own (a missing secret, an unreachable limiter).
    pub(super) notes: Vec<Note>,
    /// The instant the driver was last asked to wake this request at.
    pub(super) armed: Option<Millis>,
    /// What the request waits for with a limit, by name; the earliest is `armed`.
    pub(super) timers: Timers,
    pub(super) stage: Stage<'p>,
}

pub(super) enum Stage<'p> {
    /// Waiting for the rate limiter's verdict (operation `io`).
    Limiting {
        io: IoId,
        req: Box<Req<'p>>,
    },
    /// Racing the origin (an attempt in flight, or waiting to retry) or walking the cascade.
    Serving(Box<Req<'p>>),
    /// [V-*] An event request waiting for its operation `io`: until its
    /// [`super::timers::Timer::Shards`] for shard calls (`calls` of them), with no limit for
    /// the body.
    Events {
        io: IoId,
        flow: Box<Flow>,
        calls: usize,
    },
    Done,
}

/// The race and the cascade of one request.
pub(super) struct Req<'p> {
    /// What every tier decision needs: policy, catalog, validated parameters, deadline.
    pub ctx: Ctx<'p>,
    pub retry: Backoff<'p, Rng>,
    /// Every origin attempt that ended, in order (the breaker's evidence, the log line's).
    pub attempts: Vec<Attempt>,
    /// Every request to the origin, first requests and hedges (the log line's `calls`).
    pub calls: super::calls::Calls,
    /// The attempt in flight.
    pub calling: Option<Calling>,
    /// The failure of the last attempt (what a retry the breaker refuses falls back with).
    pub last_failure: Option<Failure>,
    /// Set once the request walks the cascade.
    pub walker: Option<Walker>,
    /// The tier read in flight.
    pub tier: Option<TierWait<'p>>,
    /// Operations this request started that still hold one of its connections (see
    /// [`crate::cascade::MAX_CONNECTIONS`]): fetches not yet ended or aborted, KV reads not
    /// yet ended (a read the engine stopped waiting for still holds one).
    pub open: Vec<IoId>,
    /// [F-SCOPE] The request asked the coordinator with its first call and has not heard
    /// back ([`super::steps::Step::asked`]).
    pub asking: bool,
}

/// An origin attempt in flight.
pub(super) struct Calling {
    pub started: Millis,
    pub timeout_ms: u64,
    /// `started + timeout_ms`: the race's end.
    pub due: Millis,
    pub admission: Admission,
    /// Its bulkhead slot, held for its `Drop`: given back when the attempt ends (or the
    /// flight is dropped).
    pub _lease: Lease,
    /// The attempt's requests: the first and its hedge.
    pub pair: Pair,
}

/// An origin attempt that ended, for the breaker and the log line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    pub started: Millis,
    pub ended: Millis,
    /// The attempt's timeout (what "late" is measured against).
    pub timeout_ms: u64,
    pub result: Result<(), FailureReason>,
}

impl Attempt {
    pub fn latency_ms(&self) -> u64 {
        self.ended.since(self.started)
    }
}

/// A tier's read in flight.
pub(super) struct TierWait<'p> {
    pub io: IoId,
    /// When the engine stops waiting (the tier's timeout).
    pub due: Millis,
    /// An HTTP tier (a fetch, aborted at its timeout) rather than a KV read.
    pub http: bool,
    /// A read another request started (binding, key): its result is looked for in the
    /// isolate's cache each time this request's [`super::timers::Timer::TierPoll`] fires
    /// ([`super::reads`]).
    pub shared: Option<(&'p str, String)>,
}

impl Flight<'_> {
    pub fn correlation_id(&self) -> &str {
        &self.correlation_id
    }

    pub fn trace_id(&self) -> &str {
        &self.trace.trace_id
    }

    pub fn is_done(&self) -> bool {
        matches!(self.stage, Stage::Done)
    }

    pub(super) fn note(&mut self, code: &'static str, detail: String) {
        self.notes.push(Note {
            tier: String::new(),
            code,
            detail: crate::classify::bounded(&detail),
        });
    }

    pub(super) fn common(&self) -> Common<'_> {
        Common {
            correlation_id: &self.correlation_id,
            trace: &self.trace,
        }
    }

    /// The step's output: `commands` and the request's next wake-up, its earliest named
    /// timer (none once it is answered), remembered to measure how late the timer fires.
    pub(super) fn output<'c>(&mut self, commands: Vec<Command<'c>>) -> Output<'c> {
        if self.is_done() {
            self.timers.clear();
        }
        let wake_at = self.timers.earliest();
        self.armed = wake_at;
        Output { commands, wake_at }
    }
}
