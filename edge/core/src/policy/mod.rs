//! The validated policy model: what a fallback policy *means*, independent of TOML.
//!
//! The compiler parses TOML into these types (keeping spans on the side for its
//! diagnostics), validates them, and bakes them into the Worker. The Worker and
//! `understudy simulate` read them back. Every duration is in milliseconds.
//!
//! These types are serialised with `postcard` into the baked module, so they use only
//! plain serde shapes (no untagged or internally tagged enums, no `skip_serializing_if`).
//!
//! A few parts are declared below the policy, next to the code that applies them, and
//! re-exported here: the tier kinds ([`crate::tier`], one module each), the catalog's rules
//! ([`crate::catalog`]) and `retry_on` ([`crate::classify`]).

pub mod events;

use serde::{Deserialize, Serialize};

pub use crate::catalog::{CatalogRules, OnExpired};
pub use crate::classify::RetryOn;
pub use crate::http::Method;
pub use crate::tier::embedded::{EmbeddedTier, NoMatch};
pub use crate::tier::http::HttpTier;
pub use crate::tier::kv::KvTier;
pub use crate::tier::TierKind;

/// One endpoint's fallback policy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Policy {
    /// The policy's own version label (free text, e.g. `2026-11-30.1`).
    pub version: String,
    pub service: Service,
    pub params: Vec<Param>,
    pub budget: Budget,
    pub origin: Origin,
    pub breaker: Breaker,
    pub cascade: Cascade,
    pub disclosure: Disclosure,
    pub storm: Option<Storm>,
    pub catalog: Option<CatalogRules>,
    pub identity: Option<IdentityRules>,
    pub admin: Option<Admin>,
    /// [V-*] Durable events: ingest, outbox, delivery.
    pub events: Option<events::Events>,
}

/// [P-ROUTE] What the endpoint is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Service {
    pub name: String,
    /// Route path; `{name}` segments are path parameters.
    pub route: String,
    pub methods: Vec<Method>,
    /// Declared peak traffic in requests per second (used to check the breaker can trigger).
    pub expected_rps: Option<u32>,
}

crate::words! {
    /// Where a request parameter comes from.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
    pub enum ParamSource {
        Query = "query",
        Header = "header",
        Path = "path",
        /// A claim of the verified bearer token (see [`IdentityRules`]).
        TokenClaim = "token_claim",
    }
}

crate::words! {
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
    pub enum ParamType {
        String = "string",
        Integer = "integer",
    }
}

/// [P-ROUTE] A request parameter and how it is validated before any I/O.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Param {
    pub name: String,
    pub source: ParamSource,
    /// The query key, header name, path segment name or claim name it is read from.
    pub from: String,
    pub ty: ParamType,
    /// A regular expression the whole value must match.
    pub pattern: Option<String>,
    pub max_len: u32,
    pub required: bool,
    pub default: Option<String>,
    /// The parameter identifies a user: tiers keyed by it are per-user.
    pub identity: bool,
    /// Explicit, warned opt-out: identity taken from an unverified source.
    pub allow_unverified: bool,
}

/// [P-BUDGET] Time allowed for the whole answer and for the origin race.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Budget {
    pub total_ms: u64,
    pub deadline_ms: u64,
}

/// [P-ORIGIN] The model call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Origin {
    pub url: String,
    pub method: Method,
    /// Repeating the call has no side effect: its method is idempotent (RFC 9110), or the
    /// policy says so (`idempotent = true`: a POST that only scores). Retries and hedges of a
    /// call that is not are only made with the client's idempotency key.
    pub idempotent: bool,
    pub attempt_timeout_ms: u64,
    pub connect_timeout_ms: Option<u64>,
    /// Total attempts including the first (1 = no retry).
    pub attempts: u32,
    pub backoff_base_ms: u64,
    pub backoff_max_ms: u64,
    pub retry_on: RetryOn,
    pub honor_retry_after: bool,
    /// Header carrying the idempotency key; required to retry non-idempotent methods.
    pub idempotency_key_header: Option<String>,
    /// Secret binding holding the origin credential.
    pub credential_secret: Option<String>,
    /// Header the credential is sent in (`Authorization` gets a `Bearer ` prefix).
    pub credential_header: String,
    /// Path of the result list inside the origin's JSON body (`["items"]`).
    pub result_path: Vec<String>,
    /// Largest origin body accepted, in bytes.
    pub max_body_bytes: u64,
    /// What the caller gets when the origin refuses the caller's request (a 4xx other than
    /// 401/403/408/429): see [`ClientErrors`].
    pub client_errors: ClientErrors,
    /// The bulkhead: most origin calls in flight per isolate; past it a request goes straight
    /// to the cascade with `BULKHEAD_FULL`. `None`: no cap.
    pub max_in_flight: Option<u32>,
    /// Hedged requests ("The Tail at Scale"): `None`: never hedge.
    pub hedge: Option<Hedge>,
}

/// [E-RACE] A second, identical origin request sent when the first has not answered after
/// the origin's observed p95 (or a fixed delay), inside the same race deadline; the first
/// good answer wins and the loser is aborted. Only for requests that may be repeated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hedge {
    /// A fixed delay before the hedge; `None`: the p95 of the isolate's recent origin calls.
    pub after_ms: Option<u64>,
    /// Hedges allowed per origin call, the token bucket's refill (seed: a few percent).
    pub max_share: f64,
    /// Most hedges in a burst (the bucket's size).
    pub burst: u32,
    /// Successful origin calls observed before their p95 is trusted.
    pub min_calls: u32,
}

crate::words! {
    /// [E-CLASSIFY] What the caller gets when the origin answers a 4xx about the caller's
    /// own request. Either way it is never a breaker record and never retried.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
    pub enum ClientErrors {
        /// The origin's status with the error envelope and `retryable: false` (APIs: the
        /// caller must fix the request).
        PassThrough = "pass_through",
        /// A disclosed fallback with reason `ML_4XX` (recommendations: an unknown user still
        /// gets the curated list).
        Fallback = "fallback",
    }
}

/// [P-BREAKER] The circuit breaker guarding the origin.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Breaker {
    /// No breaker: every request pays the race.
    Off,
    /// Open after `failures` consecutive failures, stay open for `cooldown_ms`, then allow
    /// one half-open trial (seed 002).
    Consecutive { failures: u32, cooldown_ms: u64 },
    /// Seed 000's PRIMARY_HEALTHY / DEGRADED_FALLBACK / RECOVERING_PROBE machine.
    Rate(RateBreaker),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RateBreaker {
    /// Sliding window over which the failure ratio and p95 are measured.
    pub window_ms: u64,
    /// Trip when failures / calls ≥ this ratio (seed: 0.15).
    pub failure_ratio: f64,
    /// Calls needed in the window before the ratio counts.
    pub min_calls: u32,
    /// Trip when the window's p95 latency exceeds this (seed: 45 ms).
    pub slow_call_p95_ms: u64,
    /// Stay in DEGRADED_FALLBACK this long before probing (seed: 30 s).
    pub hold_down_ms: u64,
    /// Fraction of traffic sent to the model while probing (seed: 0.02).
    pub probe_fraction: f64,
    /// Probe calls needed before a verdict.
    pub probe_min_calls: u32,
    /// Promote when probe successes / calls ≥ this (seed: 0.995).
    pub probe_success_ratio: f64,
    /// ... and the probes' p95 ≤ this (seed: 40 ms).
    pub probe_p95_ms: u64,
    /// A failed probe re-arms DEGRADED_FALLBACK for this long (seed: 60 s).
    pub failed_probe_hold_ms: u64,
    /// [F-SCOPE] Whose evidence decides: this isolate's, or the fleet's (ADR 011).
    #[serde(default)]
    pub scope: Scope,
}

/// [F-SCOPE] Whose evidence the rate breaker decides on (docs/adr/011-fleet-scoped-breaker.md).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum Scope {
    /// Each isolate decides on its own calls alone (ADR 002).
    #[default]
    Isolate,
    /// Isolates report their window to a coordinator off the request path and apply its
    /// verdict; each still opens on its own evidence, and falls back to isolate scope when
    /// the coordinator is away.
    Fleet(FleetScope),
}

/// The fleet scope's settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FleetScope {
    /// The Durable Object namespace binding of the coordinator (`BREAKER_COORDINATOR`).
    pub coordinator: String,
    /// How often an isolate with anything abnormal reports (a healthy one: ten times less).
    pub report_interval_ms: u64,
    /// How long a verdict holds after it arrives, on the isolate's own clock.
    pub verdict_ttl_ms: u64,
}

/// The coordinator's binding name when the policy names none.
pub const DEFAULT_COORDINATOR: &str = "BREAKER_COORDINATOR";

crate::words! {
    /// Whether the cascade promises an answer.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
    pub enum Promise {
        /// The last tier is local and always answers.
        AlwaysAnswer = "always_answer",
        /// When no tier answers, the edge returns 504 / 503 with the error envelope.
        BestEffort = "best_effort",
    }
}

/// [P-TIERS] The ordered fallback cascade.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cascade {
    pub promise: Promise,
    pub tiers: Vec<Tier>,
}

/// A tier of the cascade: its name, its kind with the kind's settings ([`crate::tier`]: one
/// module per kind), and what every tier may set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tier {
    pub name: String,
    pub kind: TierKind,
    /// Overrides the disclosure's `Cache-Control` for answers from this tier.
    pub cache_control: Option<String>,
}

/// [P-DISCLOSE] How degraded answers say so.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Disclosure {
    /// `Cache-Control` of degraded answers from shared tiers (seed: `public, max-age=30`).
    pub cache_control: Option<String>,
    /// `Cache-Control` of degraded answers from per-user tiers (must be `private`).
    pub private_cache_control: String,
    /// `Cache-Control` of live answers.
    pub live_cache_control: String,
    /// `Retry-After` seconds on degraded answers and retryable errors (seed: 5).
    pub retry_after_s: Option<u32>,
    /// Put `degraded` and `is_personalized` fields in the body.
    pub body_fields: bool,
}

/// [P-STORM] Client retry-storm limit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Storm {
    /// Rate Limiting binding name.
    pub binding: String,
    /// Retries allowed inside the window (seed: 2); the next is answered 429.
    pub max_retries: u32,
    /// Window length (seed: 10 s; the Workers binding supports 10 s or 60 s).
    pub window_ms: u64,
}

/// Verified identity: HS256 bearer tokens.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IdentityRules {
    /// Secret binding holding the HMAC key.
    pub secret: String,
    pub issuer: String,
    pub audience: String,
    /// Clock skew tolerated on `exp`/`nbf`.
    pub leeway_ms: u64,
}

/// The admin status endpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Admin {
    pub path: String,
    /// Secret binding holding the admin bearer token.
    pub secret: String,
}

impl Policy {
    pub fn param(&self, name: &str) -> Option<&Param> {
        self.params.iter().find(|p| p.name == name)
    }

    /// Whether a tier's answers are per user.
    pub fn tier_is_per_user(&self, tier: &Tier) -> bool {
        tier.is_per_user(&self.params)
    }

    /// The `Cache-Control` a degraded answer from `tier` carries.
    pub fn tier_cache_control<'a>(&'a self, tier: &'a Tier) -> Option<&'a str> {
        tier.cache_control_with(&self.params, &self.disclosure)
    }
}

impl Tier {
    /// Whether the tier's answers are per user, given the policy's parameters.
    pub fn is_per_user(&self, params: &[Param]) -> bool {
        self.kind
            .per_user(&|n| params.iter().any(|p| p.name == n && p.identity))
    }

    /// The `Cache-Control` a degraded answer from this tier carries.
    pub fn cache_control_with<'a>(
        &'a self,
        params: &[Param],
        disclosure: &'a Disclosure,
    ) -> Option<&'a str> {
        if let Some(cc) = &self.cache_control {
            return Some(cc);
        }
        if self.is_per_user(params) {
            Some(&disclosure.private_cache_control)
        } else {
            disclosure.cache_control.as_deref()
        }
    }
}
