//! [E-RACE] Retries inside the budget.
//!
//! Why not just "retry N times"? Because every retry spends the same deadline the fallback
//! tiers need, and because synchronized retries turn an origin's brown-out into a
//! stampede. So a retry happens only when all of these hold: the outcome is retryable by
//! the policy (`retry_on`), the request is idempotent (or carries an idempotency key),
//! attempts are left, and the wait still fits before the race deadline. The wait is full
//! jitter — uniform in `[0, min(max, base × 2^(n-1)))` — and an origin's `Retry-After` is
//! honoured when it fits the remaining budget; when it does not, the attempt is skipped
//! rather than made early.
//!
//! The random source is injected so tests assert exact waits.

use crate::classify::Failure;
use crate::policy::Origin;

/// A source of uniform numbers in `[0, 1)`.
pub trait Random {
    fn unit(&mut self) -> f64;
}

impl<F: FnMut() -> f64> Random for F {
    fn unit(&mut self) -> f64 {
        self()
    }
}

/// The policy's retry rules for one request.
pub struct Backoff<'p, R: Random> {
    origin: &'p Origin,
    /// The request may be repeated: an idempotent method, or an idempotency key present.
    repeatable: bool,
    random: R,
    /// Every wait decided, in order (for logs and tests).
    pub waits: Vec<u64>,
}

impl<'p, R: Random> Backoff<'p, R> {
    pub fn new(origin: &'p Origin, has_idempotency_key: bool, random: R) -> Self {
        let repeatable =
            origin.idempotent || (has_idempotency_key && origin.idempotency_key_header.is_some());
        Backoff {
            origin,
            repeatable,
            random,
            waits: Vec::new(),
        }
    }

    /// The full-jitter ceiling before attempt `attempt + 1`.
    pub fn ceiling_ms(&self, attempt: u32) -> u64 {
        let shift = attempt.saturating_sub(1).min(32);
        self.origin
            .backoff_base_ms
            .saturating_mul(1u64 << shift)
            .min(self.origin.backoff_max_ms)
    }
}

impl<R: Random> Backoff<'_, R> {
    /// Whether to try again after attempt `attempt` (1 after the first) failed with
    /// `failure`, with `origin_left_ms` left before the race deadline: `Some(wait_ms)`
    /// retries after `wait_ms` (always less than `origin_left_ms`).
    pub fn after_failure(
        &mut self,
        attempt: u32,
        failure: &Failure,
        origin_left_ms: u64,
    ) -> Option<u64> {
        if attempt >= self.origin.attempts
            || !self.repeatable
            || !failure.reason.retryable(&self.origin.retry_on)
        {
            return None;
        }
        let ceiling = self.ceiling_ms(attempt);
        let jitter = ((self.random.unit().clamp(0.0, 1.0) * ceiling as f64) as u64)
            .min(ceiling.saturating_sub(1));
        let wait = match failure.retry_after_s {
            Some(s) if self.origin.honor_retry_after => {
                let asked = s.saturating_mul(1000);
                if asked >= origin_left_ms {
                    // The origin asked for more time than the race has: skip the attempt.
                    return None;
                }
                asked.max(jitter)
            }
            _ => jitter,
        };
        if wait >= origin_left_ms {
            return None;
        }
        self.waits.push(wait);
        Some(wait)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classify::FailureReason;
    use crate::policy::{ClientErrors, Method, RetryOn};

    fn origin(attempts: u32, method: Method) -> Origin {
        Origin {
            url: "https://m.example".into(),
            method,
            idempotent: method.is_idempotent(),
            attempt_timeout_ms: 5_000,
            connect_timeout_ms: Some(2_000),
            attempts,
            backoff_base_ms: 100,
            backoff_max_ms: 1_000,
            retry_on: RetryOn {
                timeout: true,
                connect: true,
                status_408: false,
                status_429: true,
                status_5xx: true,
            },
            honor_retry_after: true,
            idempotency_key_header: Some("Idempotency-Key".into()),
            credential_secret: None,
            credential_header: "Authorization".into(),
            result_path: vec!["items".into()],
            max_body_bytes: 1 << 20,
            client_errors: ClientErrors::PassThrough,
            max_in_flight: None,
            hedge: None,
        }
    }

    fn seq(values: Vec<f64>) -> impl FnMut() -> f64 {
        let mut i = 0;
        move || {
            let v = values[i % values.len()];
            i += 1;
            v
        }
    }

    fn fail(reason: FailureReason) -> Failure {
        Failure::new(reason, "test")
    }

    #[test]
    fn full_jitter_waits_are_exact_for_a_given_random_source() {
        let o = origin(3, Method::Get);
        let mut b = Backoff::new(&o, false, seq(vec![0.5, 0.25]));
        assert_eq!(
            b.after_failure(1, &fail(FailureReason::Ml5xx), 9_000),
            Some(50),
            "0.5 × min(1000, 100)"
        );
        assert_eq!(
            b.after_failure(2, &fail(FailureReason::MlConnect), 9_000),
            Some(50),
            "0.25 × min(1000, 200)"
        );
        assert_eq!(
            b.after_failure(3, &fail(FailureReason::Ml5xx), 9_000),
            None,
            "three attempts made"
        );
        assert_eq!(b.waits, vec![50, 50]);
        assert_eq!(b.waits.iter().sum::<u64>(), 100);
    }

    #[test]
    fn ceilings_double_up_to_the_max() {
        let o = origin(10, Method::Get);
        let b = Backoff::new(&o, false, seq(vec![0.0]));
        assert_eq!(
            (1..=6).map(|n| b.ceiling_ms(n)).collect::<Vec<_>>(),
            vec![100, 200, 400, 800, 1000, 1000]
        );
    }

    #[test]
    fn only_retryable_outcomes_are_retried() {
        let o = origin(3, Method::Get);
        let mut b = Backoff::new(&o, false, seq(vec![0.1]));
        assert_eq!(
            b.after_failure(1, &fail(FailureReason::Ml408), 9_000),
            None,
            "408 not in retry_on"
        );
        assert_eq!(b.after_failure(1, &fail(FailureReason::Ml4xx), 9_000), None);
        assert_eq!(
            b.after_failure(1, &fail(FailureReason::MlBadResponse), 9_000),
            None
        );
        assert!(b
            .after_failure(1, &fail(FailureReason::Ml429), 9_000)
            .is_some());
        assert!(b
            .after_failure(1, &fail(FailureReason::MlTimeout), 9_000)
            .is_some());
    }

    #[test]
    fn non_idempotent_requests_need_a_key() {
        let o = origin(3, Method::Post);
        assert_eq!(
            Backoff::new(&o, false, seq(vec![0.1])).after_failure(
                1,
                &fail(FailureReason::Ml5xx),
                9_000
            ),
            None
        );
        assert!(Backoff::new(&o, true, seq(vec![0.1]))
            .after_failure(1, &fail(FailureReason::Ml5xx), 9_000)
            .is_some());
        let mut no_header = origin(3, Method::Post);
        no_header.idempotency_key_header = None;
        assert_eq!(
            Backoff::new(&no_header, true, seq(vec![0.1])).after_failure(
                1,
                &fail(FailureReason::Ml5xx),
                9_000
            ),
            None
        );
    }

    #[test]
    fn retry_after_is_honoured_when_it_fits_and_skips_the_attempt_otherwise() {
        let o = origin(3, Method::Get);
        let mut b = Backoff::new(&o, false, seq(vec![0.1]));
        let mut f = fail(FailureReason::Ml429);
        f.retry_after_s = Some(2);
        assert_eq!(b.after_failure(1, &f, 9_000), Some(2_000));
        assert_eq!(
            b.after_failure(1, &f, 1_500),
            None,
            "2 s does not fit 1.5 s left"
        );
    }

    #[test]
    fn a_wait_that_does_not_fit_the_deadline_is_not_taken() {
        let o = origin(3, Method::Get);
        let mut b = Backoff::new(&o, false, seq(vec![0.99]));
        assert_eq!(
            b.after_failure(2, &fail(FailureReason::Ml5xx), 150),
            None,
            "198 ms wait, 150 ms left"
        );
        assert!(b.waits.is_empty());
    }
}
