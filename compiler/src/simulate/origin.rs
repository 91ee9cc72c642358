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

/// One attempt at request `i` with `timeout_ms`: (how long until the driver knows, what it
/// observed).
pub fn attempt(fault: ModelFault, timeout_ms: u64, i: u64) -> (u64, Observed) {
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
    }
}

/// Whether the model alone (no timeout of ours, no fallback) answers within `budget_ms`.
pub fn alone_ok(fault: ModelFault, budget_ms: u64) -> bool {
    matches!(fault, ModelFault::Ok { latency_ms } if latency_ms <= budget_ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slow_answers_are_cut_off_at_the_timeout() {
        assert_eq!(
            attempt(ModelFault::Ok { latency_ms: 500 }, 45, 1),
            (45, Observed::TimedOut)
        );
        let (t, o) = attempt(
            ModelFault::Status {
                code: 404,
                latency_ms: 3,
            },
            45,
            1,
        );
        assert_eq!(t, 3);
        assert!(matches!(o, Observed::Response { status: 404, .. }));
        assert_eq!(attempt(ModelFault::Hang, 45, 1), (45, Observed::TimedOut));
    }
}
