//! [E-OBSERVE] The one structured log line per request: correlation and trace IDs, when it
//! arrived, outcome, status, tier, reason and its class, the notes of every tier skipped or
//! missed, what each tier consulted found, each call to the origin with how it ended,
//! latency, breaker mode. No secrets, tokens or raw user IDs: parameters never appear, notes
//! are bounded single lines. What a replay needs to rebuild the incident is here
//! (docs/replay.md): the arrivals, the origin's behaviour call by call, the tiers' hits.

use crate::cascade::Note;
use crate::correlation::Provenance;
use crate::tier::Consult;
use crate::time::Millis;

use super::calls::{Call, End};

/// Most notes written per line (a cascade has a handful of tiers; the rest are counted).
pub const MAX_NOTES: usize = 16;

pub struct Line<'a> {
    pub correlation_id: &'a str,
    pub provenance: Provenance,
    pub trace_id: &'a str,
    /// When the request arrived (the Worker's clock).
    pub at: Millis,
    pub outcome: &'static str,
    pub status: u16,
    pub tier: Option<&'a str>,
    pub reason: Option<String>,
    pub class: Option<&'static str>,
    pub notes: &'a [Note],
    pub tiers: &'a [Consult],
    pub attempts: usize,
    pub calls: &'a [Call],
    pub latency_ms: u64,
    pub origin_override: bool,
    pub policy_version: &'a str,
    pub breaker_mode: &'static str,
    pub service: &'a str,
    pub isolate: &'a str,
}

impl Line<'_> {
    /// The line as compact JSON. Written field by field into one buffer (strings escaped by
    /// serde_json) rather than through a `Value` tree: this runs on every request.
    pub fn to_json(&self) -> String {
        let mut o = Obj::new();
        o.str("correlation_id", self.correlation_id);
        o.str("correlation", self.provenance.as_str());
        o.str("trace_id", self.trace_id);
        o.num("at_ms", self.at.0);
        o.str("outcome", self.outcome);
        o.num("status", u64::from(self.status));
        o.opt_str("tier", self.tier);
        o.opt_str("reason", self.reason.as_deref());
        o.opt_str("class", self.class);
        o.key("notes");
        o.buf.push(b'[');
        for (i, n) in self.notes.iter().take(MAX_NOTES).enumerate() {
            if i > 0 {
                o.buf.push(b',');
            }
            let mut note = Obj::new();
            note.str("tier", &n.tier);
            note.str("code", n.code);
            note.str("detail", &n.detail);
            o.buf.extend_from_slice(&note.finish());
        }
        o.buf.push(b']');
        o.num(
            "notes_dropped",
            self.notes.len().saturating_sub(MAX_NOTES) as u64,
        );
        o.key("tiers");
        o.buf.push(b'[');
        for (i, t) in self.tiers.iter().take(MAX_NOTES).enumerate() {
            if i > 0 {
                o.buf.push(b',');
            }
            let mut tier = Obj::new();
            tier.str("tier", &t.tier);
            tier.num("start_ms", t.started.since(self.at));
            tier.num("end_ms", t.ended.since(self.at));
            tier.str("read", t.read.as_str());
            tier.opt_num("age_ms", t.age_ms);
            o.buf.extend_from_slice(&tier.finish());
        }
        o.buf.push(b']');
        o.num("attempts", self.attempts as u64);
        o.key("calls");
        o.buf.push(b'[');
        let answered = self.at.plus(self.latency_ms);
        for (i, c) in self.calls.iter().enumerate() {
            if i > 0 {
                o.buf.push(b',');
            }
            // A call still out when the request was answered was abandoned then.
            let (ended, end) = c.end.unwrap_or((answered, End::Abandoned));
            let (status, retry_after_s) = match end {
                End::Failed {
                    status,
                    retry_after_s,
                    ..
                } => (status, retry_after_s),
                _ => (None, None),
            };
            let mut call = Obj::new();
            call.num("start_ms", c.started.since(self.at));
            call.num("end_ms", ended.since(self.at));
            call.num("due_ms", c.due.since(self.at));
            call.str("end", end.word());
            call.opt_num("status", status.map(u64::from));
            call.opt_num("retry_after_s", retry_after_s);
            call.bool("probe", c.probe);
            call.bool("hedge", c.hedge);
            o.buf.extend_from_slice(&call.finish());
        }
        o.buf.push(b']');
        o.num("latency_ms", self.latency_ms);
        o.bool("origin_override", self.origin_override);
        o.str("policy_version", self.policy_version);
        o.str("breaker_mode", self.breaker_mode);
        o.str("service", self.service);
        o.str("isolate", self.isolate);
        String::from_utf8(o.finish()).unwrap_or_default() // ok: JSON written from UTF-8 only
    }
}

/// A JSON object written in place.
struct Obj {
    buf: Vec<u8>,
    first: bool,
}

impl Obj {
    fn new() -> Obj {
        Obj {
            buf: Vec::with_capacity(512),
            first: true,
        }
    }

    fn key(&mut self, k: &str) {
        self.buf.push(if self.first { b'{' } else { b',' });
        self.first = false;
        self.buf.push(b'"');
        self.buf.extend_from_slice(k.as_bytes());
        self.buf.extend_from_slice(b"\":");
    }

    fn str(&mut self, k: &str, v: &str) {
        self.key(k);
        // Writing a &str into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut self.buf, v);
    }

    fn opt_str(&mut self, k: &str, v: Option<&str>) {
        match v {
            Some(v) => self.str(k, v),
            None => {
                self.key(k);
                self.buf.extend_from_slice(b"null");
            }
        }
    }

    fn num(&mut self, k: &str, v: u64) {
        self.key(k);
        self.buf.extend_from_slice(v.to_string().as_bytes());
    }

    fn opt_num(&mut self, k: &str, v: Option<u64>) {
        match v {
            Some(v) => self.num(k, v),
            None => {
                self.key(k);
                self.buf.extend_from_slice(b"null");
            }
        }
    }

    fn bool(&mut self, k: &str, v: bool) {
        self.key(k);
        self.buf
            .extend_from_slice(if v { b"true" as &[u8] } else { b"false" });
    }

    fn finish(mut self) -> Vec<u8> {
        if self.first {
            self.buf.push(b'{');
        }
        self.buf.push(b'}');
        self.buf
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classify::FailureReason;
    use crate::io::IoId;
    use crate::tier::Read;

    #[test]
    fn the_line_is_valid_json_with_every_field_and_escaped_strings() {
        let notes = vec![Note {
            tier: "user".into(),
            code: "KV_TIMEOUT",
            detail: "no \"answer\" within 8 ms".into(),
        }];
        let at = Millis(1_000);
        let tiers = vec![Consult {
            tier: "user".into(),
            started: Millis(1_045),
            ended: Millis(1_053),
            read: Read::TimedOut,
            age_ms: None,
        }];
        let calls = vec![
            Call {
                io: IoId(1),
                started: at,
                due: Millis(1_045),
                hedge: false,
                probe: true,
                end: Some((Millis(1_045), End::Cut { busy: false })),
            },
            Call {
                io: IoId(2),
                started: Millis(1_010),
                due: Millis(1_045),
                hedge: true,
                probe: false,
                end: Some((
                    Millis(1_012),
                    End::Failed {
                        reason: FailureReason::Ml429,
                        status: Some(429),
                        retry_after_s: Some(1),
                    },
                )),
            },
            Call {
                io: IoId(3),
                started: Millis(1_020),
                due: Millis(1_065),
                hedge: false,
                probe: false,
                end: None,
            },
        ];
        let l = Line {
            correlation_id: "c\"1",
            provenance: Provenance::Kept,
            trace_id: "t",
            at,
            outcome: "fallback",
            status: 200,
            tier: Some("user"),
            reason: None,
            class: Some("dependency"),
            notes: &notes,
            tiers: &tiers,
            attempts: 1,
            calls: &calls,
            latency_ms: 47,
            origin_override: true,
            policy_version: "r-1",
            breaker_mode: "CLOSED",
            service: "s",
            isolate: "00000000000000ab",
        };
        let v: serde_json::Value = serde_json::from_str(&l.to_json()).unwrap();
        assert_eq!(v["correlation_id"], "c\"1");
        assert_eq!(v["at_ms"], 1_000);
        assert_eq!(v["reason"], serde_json::Value::Null);
        assert_eq!(v["notes"][0]["detail"], "no \"answer\" within 8 ms");
        assert_eq!(v["latency_ms"], 47);
        assert_eq!(v["origin_override"], true);
        assert_eq!(
            v["tiers"][0],
            serde_json::json!({"tier": "user", "start_ms": 45, "end_ms": 53, "read": "timeout", "age_ms": null})
        );
        assert_eq!(
            v["calls"][0],
            serde_json::json!({"start_ms": 0, "end_ms": 45, "due_ms": 45, "end": "cut", "status": null, "retry_after_s": null, "probe": true, "hedge": false})
        );
        assert_eq!(v["calls"][1]["end"], "ML_429");
        assert_eq!(v["calls"][1]["status"], 429);
        assert_eq!(v["calls"][1]["retry_after_s"], 1);
        // Still out when the request was answered: abandoned then.
        assert_eq!(v["calls"][2]["end"], "abandoned");
        assert_eq!(v["calls"][2]["end_ms"], 47);
        assert_eq!(v["isolate"], "00000000000000ab");
        assert_eq!(v.as_object().unwrap().len(), 20);
    }
}
