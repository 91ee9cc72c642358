//! What the simulated origin does with one model request: answer, or misbehave in one of
//! the ways a real model origin does (slow, silent, failing, throttled, cut off, garbled).
//!
//! A [`Fault`] is one misbehaviour; a [`Behavior`] is a fault plus an optional delay before
//! it acts (a `503` that arrives after 2 s tests a different edge path than a fast `503`).
//! Both come from script files, the control API and Rust callers, so every value is bounded
//! by [`Behavior::validate`] before the server uses it.

use serde::{Deserialize, Deserializer, Serialize};

/// The longest delay any fault may ask for (10 minutes). Longer values are almost always a
/// unit mistake (seconds written as milliseconds twice over), and they would outlive any test.
pub const MAX_DELAY_MS: u64 = 10 * 60 * 1000;
/// The largest `huge` body (64 MiB): large enough to trip any edge size limit, small enough
/// not to exhaust a laptop.
pub const MAX_HUGE_BYTES: u64 = 64 * 1024 * 1024;
/// Default size of a `huge` body (4 MiB).
pub const DEFAULT_HUGE_BYTES: u64 = 4 * 1024 * 1024;
/// Default number of chunks a `slow_body` answer is dripped in.
pub const DEFAULT_SLOW_CHUNKS: u64 = 10;
/// Most chunks a `slow_body` answer may be split into.
pub const MAX_SLOW_CHUNKS: u64 = 1000;
/// Longest `Retry-After` a `rate_limited` answer may carry (one day).
pub const MAX_RETRY_AFTER_S: u64 = 24 * 60 * 60;

/// One way of answering a model request. In JSON: `{"kind": "status", "code": 503}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Fault {
    /// `200` with the normal model answer.
    Healthy,
    /// The normal answer, after `ms` milliseconds before the headers.
    Latency {
        #[serde(deserialize_with = "non_negative")]
        ms: u64,
    },
    /// Never answer; hold the connection until the client goes away.
    Hang,
    /// An error status (400–599) with a JSON error body.
    Status {
        #[serde(deserialize_with = "non_negative")]
        code: u64,
    },
    /// `429` with `Retry-After: retry_after_s`.
    RateLimited {
        #[serde(deserialize_with = "non_negative")]
        retry_after_s: u64,
    },
    /// Reset the TCP connection (RST) without answering.
    Reset,
    /// Headers at once, then the body dripped in `chunks` pieces over `ms` milliseconds.
    SlowBody {
        #[serde(deserialize_with = "non_negative")]
        ms: u64,
        #[serde(default = "default_slow_chunks", deserialize_with = "non_negative")]
        chunks: u64,
    },
    /// `200` whose body is not valid JSON.
    Malformed,
    /// `200` with `{"model":"sim-1","items":[]}`.
    Empty,
    /// `200` with valid JSON that has no `items` list.
    WrongShape,
    /// The normal answer after `fast_ms`, or — for `slow_per_mille` of every thousand calls,
    /// drawn per call — after `slow_ms`: a model with a long tail (what hedging is for).
    Bimodal {
        #[serde(deserialize_with = "non_negative")]
        fast_ms: u64,
        #[serde(deserialize_with = "non_negative")]
        slow_ms: u64,
        #[serde(deserialize_with = "non_negative")]
        slow_per_mille: u64,
    },
    /// `200` with a valid answer of about `bytes` bytes (default 4 MiB).
    Huge {
        #[serde(default = "default_huge_bytes", deserialize_with = "non_negative")]
        bytes: u64,
    },
}

fn default_slow_chunks() -> u64 {
    DEFAULT_SLOW_CHUNKS
}

fn default_huge_bytes() -> u64 {
    DEFAULT_HUGE_BYTES
}

/// Reads an integer that must not be negative, with a message that says so (serde's own
/// would read "invalid value: integer `-5`, expected u64").
fn non_negative<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    let v = i64::deserialize(d)?;
    if v < 0 {
        return Err(serde::de::Error::custom(format!(
            "negative number {v}: this value must be 0 or more"
        )));
    }
    u64::try_from(v).map_err(|_| serde::de::Error::custom(format!("number {v} is too large")))
}

impl Fault {
    /// The fault's kind as written in JSON, also the key of the per-fault counts.
    pub fn kind(&self) -> &'static str {
        match self {
            Fault::Healthy => "healthy",
            Fault::Latency { .. } => "latency",
            Fault::Hang => "hang",
            Fault::Status { .. } => "status",
            Fault::RateLimited { .. } => "rate_limited",
            Fault::Reset => "reset",
            Fault::SlowBody { .. } => "slow_body",
            Fault::Malformed => "malformed",
            Fault::Empty => "empty",
            Fault::WrongShape => "wrong_shape",
            Fault::Huge { .. } => "huge",
            Fault::Bimodal { .. } => "bimodal",
        }
    }

    /// Checks every value is within its bound; the message names the field and the limit.
    pub fn validate(&self) -> Result<(), String> {
        match *self {
            Fault::Latency { ms } => check_delay("ms", ms),
            Fault::Bimodal {
                fast_ms,
                slow_ms,
                slow_per_mille,
            } => {
                check_delay("fast_ms", fast_ms)?;
                check_delay("slow_ms", slow_ms)?;
                if slow_per_mille <= 1000 {
                    Ok(())
                } else {
                    Err(format!(
                        "slow_per_mille: {slow_per_mille} must be 1000 or less"
                    ))
                }
            }
            Fault::Status { code } => {
                if (400..=599).contains(&code) && code != 429 {
                    Ok(())
                } else if code == 429 {
                    Err("code: use the `rate_limited` fault for 429 (it sends Retry-After)".into())
                } else {
                    Err(format!(
                        "code: {code} is not an error status; use 400-599 (e.g. 500, 502, 503, 408)"
                    ))
                }
            }
            Fault::RateLimited { retry_after_s } => {
                if retry_after_s <= MAX_RETRY_AFTER_S {
                    Ok(())
                } else {
                    Err(format!(
                        "retry_after_s: {retry_after_s} s is more than the limit of {MAX_RETRY_AFTER_S} s (one day)"
                    ))
                }
            }
            Fault::SlowBody { ms, chunks } => {
                check_delay("ms", ms)?;
                if (1..=MAX_SLOW_CHUNKS).contains(&chunks) {
                    Ok(())
                } else {
                    Err(format!(
                        "chunks: {chunks} must be between 1 and {MAX_SLOW_CHUNKS}"
                    ))
                }
            }
            Fault::Huge { bytes } => {
                if (1..=MAX_HUGE_BYTES).contains(&bytes) {
                    Ok(())
                } else {
                    Err(format!(
                        "bytes: {bytes} must be between 1 and {MAX_HUGE_BYTES} (64 MiB)"
                    ))
                }
            }
            Fault::Healthy
            | Fault::Hang
            | Fault::Reset
            | Fault::Malformed
            | Fault::Empty
            | Fault::WrongShape => Ok(()),
        }
    }
}

fn check_delay(field: &str, ms: u64) -> Result<(), String> {
    if ms <= MAX_DELAY_MS {
        Ok(())
    } else {
        Err(format!(
            "{field}: {ms} ms is more than the limit of {MAX_DELAY_MS} ms (10 minutes)"
        ))
    }
}

/// A fault and an optional delay before it acts. In JSON:
/// `{"fault": {"kind": "status", "code": 503}, "delay_ms": 2000}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Behavior {
    pub fault: Fault,
    /// Milliseconds to wait before the fault acts (before any headers).
    #[serde(default, deserialize_with = "non_negative")]
    pub delay_ms: u64,
}

impl Behavior {
    /// The fault, acting at once.
    pub fn new(fault: Fault) -> Self {
        Behavior { fault, delay_ms: 0 }
    }

    /// The normal answer at once.
    pub fn healthy() -> Self {
        Behavior::new(Fault::Healthy)
    }

    /// Checks the delay and the fault's values; the message names the field.
    pub fn validate(&self) -> Result<(), String> {
        check_delay("delay_ms", self.delay_ms)?;
        self.fault.validate().map_err(|e| format!("fault.{e}"))
    }
}

impl From<Fault> for Behavior {
    fn from(fault: Fault) -> Self {
        Behavior::new(fault)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Fault, String> {
        serde_json::from_str::<Fault>(s).map_err(|e| e.to_string())
    }

    #[test]
    fn every_kind_parses_and_round_trips() {
        for s in [
            r#"{"kind":"healthy"}"#,
            r#"{"kind":"latency","ms":25}"#,
            r#"{"kind":"hang"}"#,
            r#"{"kind":"status","code":503}"#,
            r#"{"kind":"rate_limited","retry_after_s":7}"#,
            r#"{"kind":"reset"}"#,
            r#"{"kind":"slow_body","ms":300,"chunks":3}"#,
            r#"{"kind":"malformed"}"#,
            r#"{"kind":"empty"}"#,
            r#"{"kind":"wrong_shape"}"#,
            r#"{"kind":"huge","bytes":1000}"#,
        ] {
            let f = parse(s).unwrap();
            assert_eq!(f.validate(), Ok(()), "{s}");
            let back = serde_json::to_string(&f).unwrap();
            assert_eq!(parse(&back).unwrap(), f);
            assert!(s.contains(f.kind()));
        }
    }

    #[test]
    fn defaults_fill_optional_values() {
        assert_eq!(
            parse(r#"{"kind":"slow_body","ms":100}"#).unwrap(),
            Fault::SlowBody {
                ms: 100,
                chunks: DEFAULT_SLOW_CHUNKS
            }
        );
        assert_eq!(
            parse(r#"{"kind":"huge"}"#).unwrap(),
            Fault::Huge {
                bytes: DEFAULT_HUGE_BYTES
            }
        );
    }

    #[test]
    fn unknown_kind_names_the_choices() {
        let e = parse(r#"{"kind":"explode"}"#).unwrap_err();
        assert!(e.contains("unknown variant `explode`"), "{e}");
        assert!(e.contains("rate_limited"), "{e}");
    }

    #[test]
    fn negative_and_unknown_fields_are_rejected() {
        let e = parse(r#"{"kind":"latency","ms":-5}"#).unwrap_err();
        assert!(e.contains("negative number -5"), "{e}");
        let e = parse(r#"{"kind":"latency","ms":5,"extra":1}"#).unwrap_err();
        assert!(e.contains("unknown field `extra`"), "{e}");
    }

    #[test]
    fn bounds_are_enforced() {
        let e = Fault::Latency {
            ms: MAX_DELAY_MS + 1,
        }
        .validate()
        .unwrap_err();
        assert!(e.contains("10 minutes"), "{e}");
        assert!(Fault::Status { code: 200 }.validate().is_err());
        assert!(Fault::Status { code: 429 }.validate().is_err());
        assert!(Fault::Status { code: 408 }.validate().is_ok());
        assert!(Fault::SlowBody { ms: 10, chunks: 0 }.validate().is_err());
        assert!(Fault::Huge {
            bytes: MAX_HUGE_BYTES + 1
        }
        .validate()
        .is_err());
        let b = Behavior {
            fault: Fault::Hang,
            delay_ms: MAX_DELAY_MS + 1,
        };
        assert!(b.validate().unwrap_err().starts_with("delay_ms"));
    }
}
