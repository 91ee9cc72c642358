//! [E-OBSERVE] The one structured log line per request: correlation and trace IDs, outcome,
//! status, tier, reason and its class, the notes of every tier skipped or missed, attempts,
//! latency, breaker mode. No secrets, tokens or raw user IDs: parameters never appear, notes
//! are bounded single lines.

use serde_json::json;

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
    pub fn to_json(&self) -> String {
        let notes: Vec<_> = self
            .notes
            .iter()
            .take(MAX_NOTES)
            .map(|n| json!({"tier": n.tier, "code": n.code, "detail": n.detail}))
            .collect();
        json!({
            "correlation_id": self.correlation_id,
            "correlation": self.provenance.as_str(),
            "trace_id": self.trace_id,
            "outcome": self.outcome,
            "status": self.status,
            "tier": self.tier,
            "reason": self.reason,
            "class": self.class,
            "notes": notes,
            "notes_dropped": self.notes.len().saturating_sub(MAX_NOTES),
            "attempts": self.attempts,
            "latency_ms": self.latency_ms,
            "origin_override": self.origin_override,
            "policy_version": self.policy_version,
            "breaker_mode": self.breaker_mode,
            "service": self.service,
        })
        .to_string()
    }
}
