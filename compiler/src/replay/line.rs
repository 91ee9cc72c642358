//! The edge's request log line (docs/observability.md, `understudy_core::engine::report`),
//! read back: the fields a replay needs — when the request arrived, how it ended, what each
//! call to the origin and each tier consulted saw. The replayed runs produce the same lines,
//! so one set of figures reads all three columns.

use serde::Deserialize;
use serde_json::Value;
use understudy_core::classify::FailureReason;
use understudy_core::engine::BUSY_MS;
use understudy_core::tier::Read;

/// Outcomes a replay plays again: the request reached the breaker and the race. The others
/// (refused before any I/O, the admin endpoint, an edge without a bake) are counted and
/// left out: nothing of the policy under test decided them.
pub const REPLAYED: &[&str] = &["live", "fallback", "unavailable", "origin_rejected"];

/// One request's log line.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Line {
    /// Arrival, ms since the epoch (the Worker's clock).
    pub at_ms: u64,
    pub outcome: String,
    pub status: u16,
    #[serde(default)]
    pub tier: Option<String>,
    #[serde(default)]
    pub reason: Option<String>,
    pub tiers: Vec<TierSeen>,
    pub calls: Vec<CallSeen>,
    pub latency_ms: u64,
    pub policy_version: String,
    pub breaker_mode: String,
    pub service: String,
    #[serde(default)]
    pub isolate: String,
}

/// One call to the origin as the line reports it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct CallSeen {
    pub start_ms: u64,
    pub end_ms: u64,
    /// When its attempt's timer was due.
    #[serde(default)]
    pub due_ms: Option<u64>,
    #[serde(deserialize_with = "end")]
    pub end: End,
    #[serde(default)]
    pub status: Option<u16>,
    #[serde(default)]
    pub retry_after_s: Option<u64>,
    #[serde(default)]
    pub probe: bool,
    #[serde(default)]
    pub hedge: bool,
}

/// How a call ended: a good answer, a failure the model (or the way to it) gave, or no
/// answer by then — censored: slower than `end_ms - start_ms`, by how much nobody saw;
/// `busy`: cut on a busy isolate, where the answer may have waited in its own queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    Ok,
    Failed(FailureReason),
    Censored { busy: bool },
}

impl CallSeen {
    pub fn took_ms(&self) -> u64 {
        self.end_ms.saturating_sub(self.start_ms)
    }

    /// Cut on a busy isolate (the engine said so, or its timer fired more than [`BUSY_MS`]
    /// late): the model's answer may have been waiting in the isolate's queue — no evidence
    /// about the origin.
    pub fn cut_busy(&self) -> bool {
        match self.end {
            End::Censored { busy } => {
                busy || self.due_ms.is_some_and(|d| self.end_ms > d + BUSY_MS)
            }
            _ => false,
        }
    }
}

/// One tier consulted.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct TierSeen {
    pub tier: String,
    pub start_ms: u64,
    pub end_ms: u64,
    #[serde(deserialize_with = "read")]
    pub read: Read,
    #[serde(default)]
    pub age_ms: Option<u64>,
}

impl TierSeen {
    pub fn took_ms(&self) -> u64 {
        self.end_ms.saturating_sub(self.start_ms)
    }
}

fn end<'de, D: serde::Deserializer<'de>>(d: D) -> Result<End, D::Error> {
    let s = String::deserialize(d)?;
    match s.as_str() {
        "ok" => Ok(End::Ok),
        "cut" | "abandoned" => Ok(End::Censored { busy: false }),
        "cut_busy" => Ok(End::Censored { busy: true }),
        code => FailureReason::ALL
            .iter()
            .find(|r| r.code() == code)
            .map(|r| End::Failed(*r))
            .ok_or_else(|| {
                serde::de::Error::custom(format!("`end` = {code:?} is not one the edge writes"))
            }),
    }
}

fn read<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Read, D::Error> {
    let s = String::deserialize(d)?;
    Read::ALL
        .iter()
        .find(|(w, _)| *w == s)
        .map(|(_, r)| *r)
        .ok_or_else(|| {
            serde::de::Error::custom(format!("`read` = {s:?} is not one the edge writes"))
        })
}

/// What a JSON value is, as far as the replay is concerned.
pub enum Kind {
    /// A request's line.
    Request(Box<Line>),
    /// Another line of the edge's own (`{"event": …}`: a failed write-through, a lost
    /// coordinator): no request to replay.
    EdgeEvent(String),
    /// The edge's request line, without what a replay needs (an older edge, or a field of
    /// the wrong type): why.
    Unreadable(String),
    /// Not the edge's.
    Foreign,
}

/// Keys every request line has had since the first edge.
const OURS: &[&str] = &["correlation_id", "outcome", "policy_version", "service"];

pub fn kind(v: &Value) -> Kind {
    let Some(o) = v.as_object() else {
        return Kind::Foreign;
    };
    if let Some(Value::String(e)) = o.get("event") {
        if o.contains_key("correlation_id") || o.contains_key("binding") || o.contains_key("alert")
        {
            return Kind::EdgeEvent(e.clone());
        }
    }
    if !OURS.iter().all(|k| o.contains_key(*k)) {
        return Kind::Foreign;
    }
    for k in ["at_ms", "calls", "tiers"] {
        if !o.contains_key(k) {
            return Kind::Unreadable(format!(
                "the edge's line without `{k}`: written by an edge older than the replay (rebuild and redeploy, then replay the new logs)"
            ));
        }
    }
    match Line::deserialize(v) {
        Ok(l) => Kind::Request(Box::new(l)),
        Err(e) => Kind::Unreadable(format!("the edge's line, but {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    pub(crate) fn sample() -> Value {
        json!({"correlation_id":"c","correlation":"minted","trace_id":"t","at_ms":1000,
            "outcome":"fallback","status":200,"tier":"user","reason":"ML_TIMEOUT: x","class":"dependency",
            "notes":[],"notes_dropped":0,
            "tiers":[{"tier":"user","start_ms":45,"end_ms":48,"read":"hit","age_ms":3600000}],
            "attempts":1,
            "calls":[{"start_ms":0,"end_ms":45,"end":"cut","status":null,"retry_after_s":null,"probe":false,"hedge":false}],
            "latency_ms":48,"origin_override":true,"policy_version":"r-1","breaker_mode":"PRIMARY_HEALTHY",
            "service":"s","isolate":"ab"})
    }

    #[test]
    fn a_request_line_reads_with_its_calls_and_tiers() {
        let Kind::Request(l) = kind(&sample()) else {
            panic!("not read")
        };
        assert_eq!(l.calls[0].end, End::Censored { busy: false });
        assert_eq!(l.calls[0].took_ms(), 45);
        assert_eq!(l.tiers[0].read, Read::Hit);
        assert_eq!(l.isolate, "ab");
    }

    #[test]
    fn other_lines_are_told_apart() {
        assert!(matches!(
            kind(&json!({"event":"write_through_failed","correlation_id":"c","binding":"B","error":"e"})),
            Kind::EdgeEvent(e) if e == "write_through_failed"
        ));
        assert!(matches!(kind(&json!({"hello":1})), Kind::Foreign));
        assert!(matches!(kind(&json!([1, 2])), Kind::Foreign));
        let mut old = sample();
        old.as_object_mut().unwrap().remove("calls");
        assert!(matches!(kind(&old), Kind::Unreadable(w) if w.contains("`calls`")));
        let mut bad = sample();
        bad["calls"][0]["end"] = json!("EXPLODED");
        assert!(matches!(kind(&bad), Kind::Unreadable(w) if w.contains("EXPLODED")));
    }
}
