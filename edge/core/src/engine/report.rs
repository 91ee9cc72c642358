//! [E-OBSERVE] The one structured log line per request: correlation and trace IDs, outcome,
//! status, tier, reason and its class, the notes of every tier skipped or missed, attempts,
//! latency, breaker mode. No secrets, tokens or raw user IDs: parameters never appear, notes
//! are bounded single lines.

use crate::cascade::Note;
use crate::correlation::Provenance;

/// Most notes written per line (a cascade has a handful of tiers; the rest are counted).
pub const MAX_NOTES: usize = 16;

pub struct Line<'a> {
    pub correlation_id: &'a str,
    pub provenance: Provenance,
    pub trace_id: &'a str,
    pub outcome: &'static str,
    pub status: u16,
    pub tier: Option<&'a str>,
    pub reason: Option<String>,
    pub class: Option<&'static str>,
    pub notes: &'a [Note],
    pub attempts: usize,
    pub latency_ms: u64,
    pub origin_override: bool,
    pub policy_version: &'a str,
    pub breaker_mode: &'static str,
    pub service: &'a str,
}

impl Line<'_> {
    /// The line as compact JSON. Written field by field into one buffer (strings escaped by
    /// serde_json) rather than through a `Value` tree: this runs on every request.
    pub fn to_json(&self) -> String {
        let mut o = Obj::new();
        o.str("correlation_id", self.correlation_id);
        o.str("correlation", self.provenance.as_str());
        o.str("trace_id", self.trace_id);
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
        o.num("attempts", self.attempts as u64);
        o.num("latency_ms", self.latency_ms);
        o.bool("origin_override", self.origin_override);
        o.str("policy_version", self.policy_version);
        o.str("breaker_mode", self.breaker_mode);
        o.str("service", self.service);
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

    #[test]
    fn the_line_is_valid_json_with_every_field_and_escaped_strings() {
        let notes = vec![Note {
            tier: "user".into(),
            code: "KV_TIMEOUT",
            detail: "no \"answer\" within 8 ms".into(),
        }];
        let l = Line {
            correlation_id: "c\"1",
            provenance: Provenance::Kept,
            trace_id: "t",
            outcome: "fallback",
            status: 200,
            tier: Some("user"),
            reason: None,
            class: Some("dependency"),
            notes: &notes,
            attempts: 1,
            latency_ms: 47,
            origin_override: true,
            policy_version: "r-1",
            breaker_mode: "CLOSED",
            service: "s",
        };
        let v: serde_json::Value = serde_json::from_str(&l.to_json()).unwrap();
        assert_eq!(v["correlation_id"], "c\"1");
        assert_eq!(v["reason"], serde_json::Value::Null);
        assert_eq!(v["notes"][0]["detail"], "no \"answer\" within 8 ms");
        assert_eq!(v["latency_ms"], 47);
        assert_eq!(v["origin_override"], true);
        assert_eq!(v.as_object().unwrap().len(), 16);
    }
}
