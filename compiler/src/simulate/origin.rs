//! The scenario's model as a driver sees it: for each attempt, how long it takes and the raw
//! [`Observed`] the Worker's fetch would report — a status and body, a hang cut off by the
//! attempt's timeout, a reset. The engine classifies it, exactly as in the Worker.

use understudy_core::classify::Observed;

use super::scenario::ModelFault;

/// The model's answer body for request `i`.
pub fn model_body(i: u64) -> Vec<u8> {
    format!("{{\"model\":\"sim-1\",\"items\":[{{\"sku\":\"MODEL-{i}\",\"source\":\"model\"}}]}}")
        .into_bytes()
}

fn response(status: u16, retry_after: Option<u64>, body: Vec<u8>) -> Observed {
    Observed::Response {
        status,
        retry_after: retry_after.map(|s| s.to_string()),
        body,
    }
}

/// A uniform draw in `[0, 1_000_000)` for call `call` of request `i` (splitmix64: the same
/// scenario gives the same draws).
pub fn draw(i: u64, call: u64) -> u32 {
    let mut z = i
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(call.wrapping_mul(0xBF58_476D_1CE4_E5B9))
        .wrapping_add(0x94D0_49BB_1331_11EB);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    ((z ^ (z >> 31)) % 1_000_000) as u32
}

/// One call to the model for request `i` (its `call`-th: attempts and hedges count) with
/// `timeout_ms`: (how long until the driver knows, what it observed).
pub fn attempt(fault: ModelFault, timeout_ms: u64, i: u64, call: u64) -> (u64, Observed) {
    let within = |latency_ms: u64, o: Observed| {
        if latency_ms <= timeout_ms {
            (latency_ms, o)
        } else {
            (timeout_ms, Observed::TimedOut)
        }
    };
    match fault {
        ModelFault::Ok { latency_ms } => within(latency_ms, response(200, None, model_body(i))),
        ModelFault::Hang => (timeout_ms, Observed::TimedOut),
        ModelFault::Status { code, latency_ms } => {
            within(latency_ms, response(code, None, Vec::new()))
        }
        ModelFault::RateLimited {
            retry_after_s,
            latency_ms,
        } => within(latency_ms, response(429, retry_after_s, Vec::new())),
        ModelFault::Reset => (
            1.min(timeout_ms),
            Observed::Connect("simulated: connection reset".into()),
        ),
        ModelFault::Malformed { latency_ms } => within(
            latency_ms,
            response(200, None, b"{\"items\": [1, 2,".to_vec()),
        ),
        ModelFault::Empty { latency_ms } => within(
            latency_ms,
            response(200, None, b"{\"model\":\"sim-1\",\"items\":[]}".to_vec()),
        ),
        ModelFault::Bimodal {
            fast_ms,
            slow_ms,
            slow_ppm,
        } => {
            let latency = if draw(i, call) < slow_ppm {
                slow_ms
            } else {
                fast_ms
            };
            within(latency, response(200, None, model_body(i)))
        }
    }
}

/// A hedged call: the first request, and — if it has not answered within `after_ms` — a
/// second; the first good answer wins. (took, observed, hedge sent, hedge won).
pub fn hedged(
    fault: ModelFault,
    timeout_ms: u64,
    after_ms: u64,
    i: u64,
    call: u64,
) -> (u64, Observed, bool, bool) {
    let (t1, o1) = attempt(fault, timeout_ms, i, call);
    let good = |o: &Observed| {
        matches!(
            o,
            Observed::Response {
                status: 200..=299,
                ..
            }
        )
    };
    if t1 <= after_ms {
        return (t1, o1, false, false);
    }
    let (t2, o2) = attempt(fault, timeout_ms.saturating_sub(after_ms), i, call + 1);
    let t2 = after_ms + t2;
    match (good(&o1), good(&o2)) {
        (true, true) if t2 < t1 => (t2, o2, true, true),
        (true, _) => (t1, o1, true, false),
        (false, true) => (t2, o2, true, true),
        // Neither was good: the driver reports the last to end.
        (false, false) if t2 > t1 => (t2.min(timeout_ms), o2, true, false),
        (false, false) => (t1, o1, true, false),
    }
}

/// Whether the model alone (no timeout of ours, no fallback) answers request `i` within
/// `budget_ms`.
pub fn alone_ok(fault: ModelFault, budget_ms: u64, i: u64) -> bool {
    match fault {
        ModelFault::Ok { latency_ms } => latency_ms <= budget_ms,
        ModelFault::Bimodal { .. } => {
            matches!(
                attempt(fault, budget_ms, i, 0).1,
                Observed::Response { status: 200, .. }
            )
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slow_answers_are_cut_off_at_the_timeout() {
        assert_eq!(
            attempt(ModelFault::Ok { latency_ms: 500 }, 45, 1, 0),
            (45, Observed::TimedOut)
        );
        let status = ModelFault::Status {
            code: 404,
            latency_ms: 3,
        };
        let (t, o) = attempt(status, 45, 1, 0);
        assert_eq!(t, 3);
        assert!(matches!(o, Observed::Response { status: 404, .. }));
        assert_eq!(
            attempt(ModelFault::Hang, 45, 1, 0),
            (45, Observed::TimedOut)
        );
    }

    #[test]
    fn a_hedge_beats_a_slow_first_call_and_is_not_sent_for_a_fast_one() {
        let f = ModelFault::Bimodal {
            fast_ms: 20,
            slow_ms: 300,
            slow_ppm: 100_000,
        };
        let slow_call = (0..1000).find(|i| draw(*i, 0) < 100_000 && draw(*i, 1) >= 100_000);
        let i = slow_call.expect("some request's first call is slow and its second fast");
        let (t, o, sent, won) = hedged(f, 500, 40, i, 0);
        assert_eq!((t, sent, won), (60, true, true));
        assert!(matches!(o, Observed::Response { status: 200, .. }));
        let fast = (0..1000).find(|i| draw(*i, 0) >= 100_000).unwrap();
        assert!(!hedged(f, 500, 40, fast, 0).2);
        // About a tenth of draws are slow.
        let slow = (0..10_000).filter(|i| draw(*i, 0) < 100_000).count();
        assert!((800..1200).contains(&slow), "{slow}");
    }
}
