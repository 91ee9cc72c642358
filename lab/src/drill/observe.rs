//! What the drill saw: one [`Observed`] per request, as the client received it, and the
//! breaker's transitions as the edge reported them. [`to_run`] turns them into the same
//! [`Run`] that `simulate` produces, so both print one table from one `Summary`.

use serde::Serialize;
use understudy_core::breaker::Mode;
use understudy_core::policy::Policy;

use understudy_compiler::simulate::scenario::{ModelFault, Scenario};
use understudy_compiler::simulate::{source_of, BreakerEvent, RequestResult, Run, Source};

/// The response headers a drill checks (lower-case names on the wire).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Disclosed {
    pub degraded: Option<String>,
    pub reason: Option<String>,
    pub source: Option<String>,
    pub tier: Option<String>,
    pub age: Option<String>,
    pub retry_after: Option<String>,
    pub cache_control: Option<String>,
    pub policy_version: Option<String>,
    pub correlation_id: Option<String>,
    pub breaker_mode: Option<String>,
}

impl Disclosed {
    /// Fills the fields from `(name, value)` header pairs.
    pub fn from_headers<'a>(headers: impl IntoIterator<Item = (&'a str, &'a str)>) -> Disclosed {
        let mut d = Disclosed::default();
        for (k, v) in headers {
            let slot = match k.to_ascii_lowercase().as_str() {
                "x-degraded" => &mut d.degraded,
                "x-degraded-reason" => &mut d.reason,
                "x-result-source" => &mut d.source,
                "x-fallback-tier" => &mut d.tier,
                "x-result-age" => &mut d.age,
                "retry-after" => &mut d.retry_after,
                "cache-control" => &mut d.cache_control,
                "x-policy-version" => &mut d.policy_version,
                "x-correlation-id" => &mut d.correlation_id,
                "x-breaker-mode" => &mut d.breaker_mode,
                _ => continue,
            };
            *slot = Some(v.to_string());
        }
        d
    }
}

/// One request as the client saw it.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Observed {
    pub index: u64,
    /// When it was due, ms after the first arrival (`index × interval`).
    pub scheduled_ms: f64,
    /// When it actually left (later than due when every connection was busy).
    pub sent_ms: f64,
    /// From sending the request to the last byte of the body.
    pub latency_ms: f64,
    /// HTTP status; 0 when no answer came (timeout, connection error: see `error`).
    pub status: u16,
    pub error: Option<String>,
    pub headers: Disclosed,
    /// Length of the body's `items` list, when the body has one.
    pub items: Option<usize>,
    pub body_degraded: Option<bool>,
    pub body_personalized: Option<bool>,
    /// The request's identity parameter (the user), for the write-through check.
    pub user: Option<String>,
}

impl Observed {
    /// A fallback answer, by any of its marks.
    pub fn is_degraded(&self) -> bool {
        self.headers.degraded.as_deref() == Some("true")
            || self.headers.source.as_deref() == Some("fallback")
            || self.body_degraded == Some(true)
    }

    pub fn is_live(&self) -> bool {
        self.status == 200
            && self.headers.source.as_deref() == Some("origin")
            && !self.is_degraded()
    }

    /// Where the answer came from, read from the reply exactly as `simulate` reads it.
    pub fn source(&self) -> Source {
        let d = &self.headers;
        source_of(self.status, |h| match h {
            "x-degraded-reason" => d.reason.clone(),
            "x-result-source" => d.source.clone(),
            "x-fallback-tier" => Some(d.tier.clone().unwrap_or_else(|| "unnamed tier".into())),
            _ => None,
        })
        .0
    }
}

/// A breaker mode name as `simulate` spells it; `UNKNOWN` when the edge did not say.
pub fn mode_name(m: Option<&str>) -> &'static str {
    const NAMES: [&str; 6] = [
        "CLOSED",
        "OPEN",
        "HALF_OPEN",
        "PRIMARY_HEALTHY",
        "DEGRADED_FALLBACK",
        "RECOVERING_PROBE",
    ];
    m.and_then(|m| {
        NAMES
            .iter()
            .find(|n| n.eq_ignore_ascii_case(m.trim()))
            .copied()
    })
    .unwrap_or("UNKNOWN")
}

/// Whether a mode name is the breaker's healthy / degraded state.
pub fn mode_kind(name: &str) -> Option<Mode> {
    Mode::from_name(name)
}

/// A transition the edge reported, `at_ms` after the first arrival.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SeenTransition {
    pub at_ms: f64,
    pub from: &'static str,
    pub to: &'static str,
    /// What the breaker had counted when an outcome moved it, as the status endpoint gives it
    /// (`calls`, `failures`, `timeouts`, `p95_ms`); absent from the response headers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub evidence: Option<serde_json::Value>,
}

/// One isolate of a drill over several (`--isolates K`).
#[derive(Debug, Clone, Default)]
pub struct IsolateSeen {
    /// Its requests, by index.
    pub requests: Vec<u64>,
    pub transitions: Vec<SeenTransition>,
}

/// The latest request sent at or before `at_ms` (the one whose handling caused it).
fn request_at(obs: &[Observed], at_ms: f64) -> u64 {
    obs.iter()
        .filter(|o| o.sent_ms <= at_ms + 0.5)
        .map(|o| o.index)
        .max()
        .unwrap_or(0)
}

/// Transitions from the response headers alone: a change of `X-Breaker-Mode` between
/// consecutive requests. (Coarser than the status endpoint's log: a trial that opens and
/// closes within one request shows as no change.)
pub fn transitions_from_headers(obs: &[Observed]) -> Vec<SeenTransition> {
    let mut sorted: Vec<&Observed> = obs
        .iter()
        .filter(|o| o.headers.breaker_mode.is_some())
        .collect();
    sorted.sort_by_key(|o| o.index);
    let mut out = Vec::new();
    let mut last: Option<&'static str> = None;
    for o in sorted {
        let m = mode_name(o.headers.breaker_mode.as_deref());
        if m == "UNKNOWN" {
            continue;
        }
        if let Some(prev) = last {
            if prev != m {
                out.push(SeenTransition {
                    at_ms: o.sent_ms + o.latency_ms,
                    from: prev,
                    to: m,
                    evidence: None,
                });
            }
        }
        last = Some(m);
    }
    out
}

/// The observations as a `simulate` run. `model_calls` is what the origin counted.
pub fn to_run(
    policy: &Policy,
    sc: &Scenario,
    obs: &[Observed],
    transitions: &[SeenTransition],
    model_calls: u64,
) -> Run {
    let budget = policy.budget.total_ms;
    let mut results: Vec<RequestResult> = obs
        .iter()
        .map(|o| {
            let arrival_ms = o.scheduled_ms as u64;
            let fault = sc.fault(o.index, arrival_ms);
            RequestResult {
                index: o.index,
                arrival_ms,
                latency_ms: o.latency_ms.round() as u64,
                status: o.status,
                source: o.source(),
                reason: o.headers.reason.clone(),
                model_attempts: 0,
                mode: mode_name(o.headers.breaker_mode.as_deref()),
                model_alone_ok: matches!(fault, ModelFault::Ok { latency_ms } if latency_ms <= budget),
            }
        })
        .collect();
    results.sort_by_key(|r| r.index);
    let breaker = transitions
        .iter()
        .map(|t| BreakerEvent {
            request: request_at(obs, t.at_ms),
            at_ms: t.at_ms.max(0.0) as u64,
            from: t.from,
            to: t.to,
        })
        .collect();
    Run {
        results,
        breaker,
        model_calls,
        logs: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub fn obs(i: u64, sent: f64, mode: &str) -> Observed {
        Observed {
            index: i,
            scheduled_ms: sent,
            sent_ms: sent,
            latency_ms: 10.0,
            status: 200,
            headers: Disclosed {
                breaker_mode: Some(mode.into()),
                source: Some("origin".into()),
                ..Disclosed::default()
            },
            ..Observed::default()
        }
    }

    #[test]
    fn headers_are_read_case_insensitively() {
        let d = Disclosed::from_headers([
            ("X-Degraded", "true"),
            ("x-fallback-tier", "cache"),
            ("Retry-After", "5"),
            ("X-Other", "x"),
        ]);
        assert_eq!(d.degraded.as_deref(), Some("true"));
        assert_eq!(d.tier.as_deref(), Some("cache"));
        assert_eq!(d.retry_after.as_deref(), Some("5"));
        assert_eq!(d.reason, None);
    }

    #[test]
    fn header_modes_become_transitions_located_at_the_request() {
        let o = vec![
            obs(0, 0.0, "CLOSED"),
            obs(1, 1000.0, "OPEN"),
            obs(2, 2000.0, "open"),
            obs(3, 3000.0, "CLOSED"),
        ];
        let t = transitions_from_headers(&o);
        assert_eq!(t.len(), 2);
        assert_eq!((t[0].from, t[0].to), ("CLOSED", "OPEN"));
        let run = to_run(
            &understudy_compiler::fixtures::sample_policy(),
            &sc(),
            &o,
            &t,
            4,
        );
        assert_eq!(
            run.breaker.iter().map(|e| e.request).collect::<Vec<_>>(),
            vec![1, 3]
        );
        assert_eq!(run.results[1].mode, "OPEN");
        assert_eq!(mode_name(Some("weird")), "UNKNOWN");
    }

    fn sc() -> Scenario {
        Scenario {
            name: "t".into(),
            description: String::new(),
            start_ms: 0,
            requests: 4,
            interval_us: 1_000_000,
            params: Default::default(),
            model_latency_ms: 10,
            phases: Vec::new(),
            kv: Vec::new(),
            kv_latency_ms: 2,
            expect: None,
            fleet: None,
        }
    }

    #[test]
    fn sources_map_like_simulate() {
        let mut o = obs(0, 0.0, "CLOSED");
        assert_eq!(o.source(), Source::Origin);
        o.headers.source = Some("fallback".into());
        o.headers.tier = Some("cache".into());
        assert_eq!(o.source(), Source::Tier("cache".into()));
        o.status = 504;
        assert_eq!(o.source(), Source::Error(504));
        o.status = 0;
        assert_eq!(o.source(), Source::Error(0));
    }
}

/// Observations for the checks' and figures' unit tests: a live answer and a fully
/// disclosed fallback, as the edge sends them.
#[cfg(test)]
pub(crate) mod fixtures {
    use super::{Disclosed, Observed};

    pub fn live(i: u64, t: f64, lat: f64) -> Observed {
        Observed {
            index: i,
            scheduled_ms: t,
            sent_ms: t,
            latency_ms: lat,
            status: 200,
            headers: Disclosed {
                degraded: Some("false".into()),
                source: Some("origin".into()),
                cache_control: Some("private, no-store".into()),
                policy_version: Some("r-1".into()),
                correlation_id: Some(format!("c-{i}")),
                ..Disclosed::default()
            },
            items: Some(3),
            body_degraded: Some(false),
            body_personalized: Some(true),
            ..Observed::default()
        }
    }

    pub fn fallback(i: u64, t: f64, lat: f64) -> Observed {
        let mut o = live(i, t, lat);
        o.headers.degraded = Some("true".into());
        o.headers.source = Some("fallback".into());
        o.headers.reason = Some("ML_TIMEOUT".into());
        o.headers.tier = Some("curated".into());
        o.headers.age = Some("0".into());
        o.headers.retry_after = Some("5".into());
        o.headers.cache_control = Some("public, max-age=30".into());
        o.body_degraded = Some(true);
        o.body_personalized = Some(false);
        o
    }
}
