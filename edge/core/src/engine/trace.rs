//! [E-OBSERVE] W3C Trace Context: seed 004 verifies its deadline NFR "by distributed
//! tracing", so the edge joins the caller's trace. A valid incoming `traceparent` is kept
//! (its trace ID; the edge's own span ID becomes the parent of everything it sends) and
//! forwarded to the origin with `tracestate`; an absent or invalid one starts a new trace.
//! The log line carries the trace ID.
//!
//! <https://www.w3.org/TR/trace-context/>: `version-traceid-parentid-flags`, lower-case hex,
//! version `ff` and all-zero IDs invalid; a future version may append fields after the flags.

use super::rng::Rng;

pub const TRACEPARENT: &str = "traceparent";
pub const TRACESTATE: &str = "tracestate";
/// `tracestate` longer than this is dropped rather than forwarded (the spec's own ceiling is
/// 32 list members; 512 bytes is what it asks vendors to keep at least).
pub const MAX_TRACESTATE: usize = 512;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trace {
    pub trace_id: String,
    /// The edge's span: the `parent-id` of the requests it sends.
    pub span_id: String,
    pub flags: u8,
    pub state: Option<String>,
    /// The trace came from the caller (`true`) or was started here.
    pub joined: bool,
}

impl Trace {
    /// Joins the caller's trace when `traceparent` is valid, starts one otherwise.
    pub fn resolve(traceparent: Option<&str>, tracestate: Option<&str>, rng: &mut Rng) -> Trace {
        let span_id = nonzero_hex::<8>(rng);
        match traceparent.and_then(parse) {
            Some((trace_id, flags)) => Trace {
                trace_id,
                span_id,
                flags,
                state: tracestate
                    .map(str::trim)
                    .filter(|s| {
                        !s.is_empty()
                            && s.len() <= MAX_TRACESTATE
                            && s.bytes().all(|b| (0x20..=0x7e).contains(&b))
                    })
                    .map(str::to_string),
                joined: true,
            },
            None => Trace {
                trace_id: nonzero_hex::<16>(rng),
                span_id,
                // Sampled: the edge's log line records every request.
                flags: 0x01,
                state: None,
                joined: false,
            },
        }
    }

    /// The `traceparent` the edge sends.
    pub fn traceparent(&self) -> String {
        format!("00-{}-{}-{:02x}", self.trace_id, self.span_id, self.flags)
    }
}

fn nonzero_hex<const N: usize>(rng: &mut Rng) -> String {
    let mut b = rng.bytes::<N>();
    if b.iter().all(|x| *x == 0) {
        b[N - 1] = 1;
    }
    hex::encode(b)
}

fn is_lower_hex(s: &str) -> bool {
    s.bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The trace ID and flags of a valid `traceparent`.
fn parse(v: &str) -> Option<(String, u8)> {
    let v = v.trim();
    if v.len() < 55 || !v.is_ascii() {
        return None;
    }
    let (version, trace_id, parent_id, flags) = (&v[0..2], &v[3..35], &v[36..52], &v[53..55]);
    let dashes = [2, 35, 52].iter().all(|&i| v.as_bytes()[i] == b'-');
    let ok = dashes
        && is_lower_hex(version)
        && version != "ff"
        && is_lower_hex(trace_id)
        && is_lower_hex(parent_id)
        && is_lower_hex(flags)
        && trace_id.bytes().any(|b| b != b'0')
        && parent_id.bytes().any(|b| b != b'0')
        // Version 00 is exactly 55 characters; later versions may add `-`-led fields.
        && (v.len() == 55 || (version != "00" && v.as_bytes()[55] == b'-'));
    ok.then(|| {
        (
            trace_id.to_string(),
            u8::from_str_radix(flags, 16).unwrap_or(0),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_valid_traceparent_is_joined_with_a_new_span() {
        let t = Trace::resolve(Some(GOOD), Some("congo=t61rcWkgMzE"), &mut Rng::new(1));
        assert!(t.joined);
        assert_eq!(t.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_ne!(t.span_id, "00f067aa0ba902b7");
        assert_eq!(t.state.as_deref(), Some("congo=t61rcWkgMzE"));
        let sent = t.traceparent();
        assert!(sent.starts_with("00-4bf92f3577b34da6a3ce929d0e0e4736-"));
        assert!(sent.ends_with("-01"));
        assert_eq!(sent.len(), 55);
    }

    #[test]
    fn an_invalid_or_absent_traceparent_starts_a_trace() {
        for bad in [
            "",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ] {
            let t = Trace::resolve(Some(bad), Some("a=b"), &mut Rng::new(2));
            assert!(!t.joined, "{bad}");
            assert_eq!(t.state, None, "tracestate needs a valid traceparent");
            assert_eq!(t.trace_id.len(), 32);
            assert_ne!(t.trace_id, "0".repeat(32));
        }
        let later = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-comes";
        assert!(Trace::resolve(Some(later), None, &mut Rng::new(3)).joined);
    }

    #[test]
    fn an_oversized_or_unprintable_tracestate_is_dropped() {
        let big = "a=".to_string() + &"b".repeat(600);
        assert_eq!(
            Trace::resolve(Some(GOOD), Some(&big), &mut Rng::new(4)).state,
            None
        );
        assert_eq!(
            Trace::resolve(Some(GOOD), Some("a=b\r\nx: y"), &mut Rng::new(4)).state,
            None
        );
    }
}
