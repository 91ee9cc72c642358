//! Why a coordinator refuses a report or a watch, and how the Durable Object answers it.

use super::{MAX_BUCKETS, MAX_ISOLATES};

/// Why a report was not merged (the Durable Object answers 4xx and counts it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    Malformed(String),
    OtherService(String),
    OtherConfig(String),
    TooManyBuckets(usize),
    /// The coordinator already keeps [`MAX_ISOLATES`].
    Full,
}

impl Refusal {
    /// The HTTP status the Durable Object answers it with.
    pub fn status(&self) -> u16 {
        match self {
            Refusal::Malformed(_) => 400,
            Refusal::OtherService(_) | Refusal::OtherConfig(_) => 409,
            Refusal::TooManyBuckets(_) => 413,
            Refusal::Full => 503,
        }
    }

    /// What it says.
    pub fn message(&self) -> String {
        match self {
            Refusal::Malformed(e) => format!("the request is no report or watch: {e}"),
            Refusal::OtherService(s) => format!("a report for service `{s}`, not this one's"),
            Refusal::OtherConfig(c) => {
                format!("a report for breaker settings {c}, not this coordinator's")
            }
            Refusal::TooManyBuckets(n) => format!("a report of {n} buckets, over {MAX_BUCKETS}"),
            Refusal::Full => format!("the coordinator already keeps {MAX_ISOLATES} isolates"),
        }
    }
}
