//! A request's end: the answer rendered, write-through planned, counted and logged.

use crate::cascade::KvRead;
use crate::disclosure::{self, Answer};
use crate::metrics::Outcome;

use super::command::{Command, Reply};
use super::flight::{Req, Stage};
use super::steps::Step;
use super::{meta, Facts};

impl<'p> Step<'_, 'p> {
    /// The race and the cascade gave their answer: render it, plan write-through, count,
    /// log.
    pub(super) fn answered(&mut self, req: Box<Req<'p>>, answer: Answer) {
        let (now, engine, f) = (self.now, &mut *self.engine, &mut *self.flight);
        engine
            .counters
            .prefetch_unused(std::mem::take(&mut f.prefetched).len());
        let policy = engine.policy();
        let m = meta(&f.correlation_id, &engine.bake.release_id, f.credentialed);
        let rendered = disclosure::render(&answer, policy, &m);
        let mut writes = Vec::new();
        let failure = req.walker.as_ref().map(|w| &w.failure);
        let (outcome, failure) = match &answer {
            Answer::Live { items, .. } => {
                writes = engine.curated.live(policy, &req.ctx.params, items, now);
                for w in &writes {
                    let read = KvRead::Value {
                        value: Some(w.value.clone()),
                        metadata: Some(w.metadata.clone()),
                    };
                    engine.reads.put(&w.binding, &w.key, now, &read);
                }
                (Outcome::Live, None)
            }
            Answer::Fallback(fb) => {
                engine.curated.fell_back(policy, &fb.tier, fb.age_ms, now);
                (
                    Outcome::Fallback {
                        tier: &fb.tier,
                        reason: fb.reason.code(),
                    },
                    failure,
                )
            }
            Answer::Unavailable { failure, .. } => (
                Outcome::Unavailable {
                    reason: failure.reason.code(),
                },
                Some(failure),
            ),
            Answer::Rejected { failure } => (Outcome::OriginRejected, Some(failure)),
        };
        let mut notes = f.notes.clone();
        if let Some(w) = &req.walker {
            notes.extend_from_slice(&w.notes);
        }
        let tiers = req.walker.as_ref().map_or(&[][..], |w| &w.consulted[..]);
        let facts = Facts {
            started: f.started,
            correlation_id: &f.correlation_id,
            provenance: f.provenance,
            trace_id: &f.trace.trace_id,
            outcome,
            reason: failure.map(|x| format!("{}: {}", x.reason.code(), x.detail)),
            class: failure.map(|x| x.reason.class().as_str()),
            notes: &notes,
            tiers,
            attempts: req.attempts.len(),
            calls: &req.calls.0,
            origin_override: f.origin_override,
            writes,
        };
        let reply = engine.reply(now, rendered, facts);
        self.cmds.push(Command::Respond(Box::new(reply)));
        f.stage = Stage::Done;
    }

    /// [E-STORM] The client is over its retry allowance: 429 with the envelope and
    /// `Retry-After`.
    pub(super) fn storm_limited(&mut self) {
        let policy = self.engine.policy();
        let (max, window_ms) = policy
            .storm
            .as_ref()
            .map_or((0, 1_000), |s| (s.max_retries, s.window_ms));
        let retry_after = (window_ms / 1000).max(1);
        let f = &*self.flight;
        let m = meta(
            &f.correlation_id,
            &self.engine.bake.release_id,
            f.credentialed,
        );
        let mut r = disclosure::error(
            429,
            "ERR_RETRY_STORM_DETECTED",
            &format!(
                "more than {max} retries of this request within {} s; retry after {retry_after} s",
                window_ms / 1000
            ),
            true,
            &m,
        );
        r.headers.push(("Retry-After", retry_after.to_string()));
        self.finish_early(r, Outcome::Storm, Some("ERR_RETRY_STORM_DETECTED".into()));
    }

    /// An answer given before the race (admin, 401, 400/404/405, 429) or instead of it.
    pub(super) fn finish_early(
        &mut self,
        rendered: disclosure::Rendered,
        outcome: Outcome<'_>,
        reason: Option<String>,
    ) {
        let reply = self.early_reply(rendered, outcome, reason);
        self.cmds.push(Command::Respond(Box::new(reply)));
    }

    /// [`Step::finish_early`]'s reply.
    pub(super) fn early_reply(
        &mut self,
        rendered: disclosure::Rendered,
        outcome: Outcome<'_>,
        reason: Option<String>,
    ) -> Reply {
        let f = &mut *self.flight;
        let facts = Facts {
            started: f.started,
            correlation_id: &f.correlation_id,
            provenance: f.provenance,
            trace_id: &f.trace.trace_id,
            outcome,
            reason,
            class: None,
            notes: &f.notes,
            tiers: &[],
            attempts: 0,
            calls: &[],
            origin_override: f.origin_override,
            writes: Vec::new(),
        };
        let reply = self.engine.reply(self.now, rendered, facts);
        f.stage = Stage::Done;
        reply
    }
}
