//! The scenario's model as a driver sees it: for each call, how long it takes and the raw
//! [`Observed`] the Worker's fetch would report — a status and body, a reset — or that it
//! never ends (a hang). The engine times it out and classifies it, exactly as in the Worker.

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

/// One call to the model for request `i` (its `call`-th: attempts and hedges count): how
/// long until it ends and what the driver observes then — `None` when it never ends (a
/// hang). No timeout here: when to stop waiting is the engine's decision (docs/adr/010).
pub fn attempt(fault: ModelFault, i: u64, call: u64) -> Option<(u64, Observed)> {
    Some(match fault {
        ModelFault::Ok { latency_ms } => (latency_ms, response(200, None, model_body(i))),
        ModelFault::Hang => return None,
        ModelFault::Status { code, latency_ms } => (latency_ms, response(code, None, Vec::new())),
        ModelFault::RateLimited {
            retry_after_s,
            latency_ms,
        } => (latency_ms, response(429, retry_after_s, Vec::new())),
        ModelFault::Reset => (1, Observed::Connect("simulated: connection reset".into())),
        ModelFault::Malformed { latency_ms } => (
            latency_ms,
            response(200, None, b"{\"items\": [1, 2,".to_vec()),
        ),
        ModelFault::Empty { latency_ms } => (
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
            (latency, response(200, None, model_body(i)))
        }
    })
}

/// Whether the model alone (no timeout of ours, no fallback) answers request `i` within
/// `budget_ms`.
pub fn alone_ok(fault: ModelFault, budget_ms: u64, i: u64) -> bool {
    match fault {
        ModelFault::Ok { latency_ms } => latency_ms <= budget_ms,
        ModelFault::Bimodal { .. } => attempt(fault, i, 0).is_some_and(|(ms, _)| ms <= budget_ms),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_fault_ends_as_scripted_and_a_hang_never_does() {
        let (t, o) = attempt(ModelFault::Ok { latency_ms: 500 }, 1, 0).unwrap();
        assert_eq!(t, 500, "slow, not cut off: the engine's timer does that");
        assert!(matches!(o, Observed::Response { status: 200, .. }));
        let status = ModelFault::Status {
            code: 404,
            latency_ms: 3,
        };
        let (t, o) = attempt(status, 1, 0).unwrap();
        assert_eq!(t, 3);
        assert!(matches!(o, Observed::Response { status: 404, .. }));
        assert_eq!(attempt(ModelFault::Hang, 1, 0), None);
    }

    #[test]
    fn a_bimodal_model_is_slow_for_its_share_of_calls_drawn_per_call() {
        let f = ModelFault::Bimodal {
            fast_ms: 20,
            slow_ms: 300,
            slow_ppm: 100_000,
        };
        let slow = (0..10_000)
            .filter(|i| attempt(f, *i, 0).is_some_and(|(t, _)| t == 300))
            .count();
        assert!((800..1200).contains(&slow), "{slow}");
        // A request's second call draws afresh: a hedge can be fast where the first was slow.
        let i = (0..1000)
            .find(|i| draw(*i, 0) < 100_000 && draw(*i, 1) >= 100_000)
            .expect("some request's first call is slow and its second fast");
        assert_eq!(attempt(f, i, 0).unwrap().0, 300);
        assert_eq!(attempt(f, i, 1).unwrap().0, 20);
    }
}
