//! Every diagnostic code, with the page `understudy explain CODE` prints.
//!
//! Codes are stable: tools and CI scripts match on them. A test keeps them unique and
//! checks that `docs/diagnostics.md` documents each one.

pub const TOML_SYNTAX: &str = "ERR_TOML_SYNTAX";
pub const UNKNOWN_KEY: &str = "ERR_UNKNOWN_KEY";
pub const MISSING_KEY: &str = "ERR_MISSING_KEY";
pub const WRONG_TYPE: &str = "ERR_WRONG_TYPE";
pub const BAD_DURATION: &str = "ERR_BAD_DURATION";
pub const INVALID_VALUE: &str = "ERR_INVALID_VALUE";
pub const BAD_TEMPLATE: &str = "ERR_BAD_TEMPLATE";
pub const UNKNOWN_TEMPLATE_PARAM: &str = "ERR_UNKNOWN_TEMPLATE_PARAM";
pub const DUPLICATE_TIER: &str = "ERR_DUPLICATE_TIER";
pub const EMPTY_CASCADE: &str = "ERR_EMPTY_CASCADE";
pub const BUDGET_EXCEEDED: &str = "ERR_BUDGET_EXCEEDED";
pub const FINAL_TIER_NOT_LOCAL: &str = "ERR_FINAL_TIER_NOT_LOCAL";
pub const SHARED_FAILURE_DOMAIN: &str = "ERR_SHARED_FAILURE_DOMAIN_DETECTED";
pub const UNTESTED_COMPENSATION: &str = "ERR_UNTESTED_COMPENSATION_REJECTED";
pub const SHARED_CACHE_PER_USER: &str = "ERR_SHARED_CACHE_PER_USER";
pub const UNVERIFIED_IDENTITY: &str = "ERR_UNVERIFIED_IDENTITY";
pub const UNVERIFIED_IDENTITY_OPT_OUT: &str = "WARN_UNVERIFIED_IDENTITY_OPT_OUT";
pub const UNTHROTTLED_DEGRADATION: &str = "ERR_UNTHROTTLED_DEGRADATION";
pub const UNSAFE_RETRY: &str = "ERR_UNSAFE_RETRY";
pub const BREAKER_NEVER_TRIGGERS: &str = "ERR_BREAKER_NEVER_TRIGGERS";
pub const CATALOG_UNREADABLE: &str = "ERR_CATALOG_UNREADABLE";
pub const CATALOG_MALFORMED: &str = "ERR_CATALOG_MALFORMED";
pub const POLICY_UNREADABLE: &str = "ERR_POLICY_UNREADABLE";
pub const MODULE_TOO_LARGE: &str = "ERR_MODULE_TOO_LARGE";
pub const EVENTS_PERMANENT_RETRY: &str = "ERR_EVENTS_PERMANENT_RETRY";
pub const EVENTS_RETRY_WINDOW: &str = "ERR_EVENTS_RETRY_WINDOW";
pub const EVENTS_SCHEMA_VERSIONS: &str = "ERR_EVENTS_SCHEMA_VERSIONS";
pub const EVENTS_UNAUTHENTICATED: &str = "ERR_EVENTS_UNAUTHENTICATED";
pub const EVENTS_ORDER_RELAXED: &str = "WARN_EVENTS_ORDER_RELAXED";

/// One code's documentation.
pub struct CodeDoc {
    pub code: &'static str,
    /// The spec rule it enforces (`C-BUDGET`, …) or the kind of input problem.
    pub rule: &'static str,
    pub title: &'static str,
    /// Why it is a problem and how to fix it.
    pub page: &'static str,
}

pub const ALL: &[CodeDoc] = &[
    CodeDoc {
        code: POLICY_UNREADABLE,
        rule: "input",
        title: "the policy file cannot be read",
        page: "The file does not exist, is not readable, is larger than 1 MiB or is not UTF-8.\n\
               Check the path; policies are small UTF-8 TOML files.",
    },
    CodeDoc {
        code: TOML_SYNTAX,
        rule: "input",
        title: "the policy is not valid TOML",
        page: "The file could not be parsed as TOML (an unterminated string, a missing `=`, a\n\
               duplicate key or table, …). The span points at where the parser stopped. Fix the\n\
               syntax; nothing else can be checked until the file parses.",
    },
    CodeDoc {
        code: UNKNOWN_KEY,
        rule: "input",
        title: "a key the policy language does not have",
        page: "Every table accepts a fixed set of keys (see docs/policy.md). An unknown key is\n\
               usually a typo, and silently ignoring it would drop a setting you meant to make.\n\
               The message lists the expected keys and suggests the closest one.",
    },
    CodeDoc {
        code: MISSING_KEY,
        rule: "input",
        title: "a required key is missing",
        page: "Some keys have no safe default: the route, the budget, the origin URL, a tier's\n\
               kind… Add the key named in the message; docs/policy.md gives its meaning.",
    },
    CodeDoc {
        code: WRONG_TYPE,
        rule: "input",
        title: "a value of the wrong type",
        page: "The key exists but its value has another TOML type (a number where a string is\n\
               expected, a table where an array is expected…). Change the value to the type the\n\
               message names.",
    },
    CodeDoc {
        code: BAD_DURATION,
        rule: "input",
        title: "a duration that cannot be read",
        page: "Durations are strings with a unit, written as humans write them: `45ms`, `5s`,\n\
               `30m`, `4h`, `1d`, or combined (`1m30s`). A bare number is refused because its unit\n\
               would be a guess.",
    },
    CodeDoc {
        code: INVALID_VALUE,
        rule: "input",
        title: "a value outside what the key accepts",
        page: "The value has the right type but is not allowed: an unknown enum word, a ratio\n\
               outside 0..1, a count of zero where one is needed, a regular expression that does\n\
               not compile, a storm window the Rate Limiting binding cannot enforce (10s or 60s).",
    },
    CodeDoc {
        code: BAD_TEMPLATE,
        rule: "input",
        title: "a key template that does not parse",
        page: "KV key templates are literal text with `{param}` placeholders, e.g.\n\
               `user_rec:{user_id}`. Braces must pair and hold a parameter name.",
    },
    CodeDoc {
        code: UNKNOWN_TEMPLATE_PARAM,
        rule: "P-TIERS",
        title: "a template or tier refers to a parameter that is not declared",
        page: "Key templates, `by` and `query` read request parameters by name. Declare the\n\
               parameter under `[params.NAME]` (with its source and pattern) or fix the name.",
    },
    CodeDoc {
        code: DUPLICATE_TIER,
        rule: "P-TIERS",
        title: "two tiers share a name",
        page: "Tier names appear in `X-Fallback-Tier`, logs and metrics; two tiers with one name\n\
               make those ambiguous. Rename one.",
    },
    CodeDoc {
        code: EMPTY_CASCADE,
        rule: "P-TIERS",
        title: "the cascade has no tier",
        page: "A policy without a fallback tier protects nothing. Add at least one\n\
               `[[cascade.tiers]]`; an endpoint that must answer ends with an `embedded` tier.",
    },
    CodeDoc {
        code: BUDGET_EXCEEDED,
        rule: "C-BUDGET",
        title: "the worst-case path does not fit the total budget",
        page: "The worst case is the origin race (the deadline, or every attempt with its backoff\n\
               when that is shorter) followed by every fallback tier that can run, each taking its\n\
               full timeout. If that sum exceeds `budget.total`, a request can answer late even\n\
               though every piece behaved as configured. The notes show the arithmetic. Lower the\n\
               deadline, a tier timeout, or the attempts; or raise the budget if the SLA allows.",
    },
    CodeDoc {
        code: FINAL_TIER_NOT_LOCAL,
        rule: "C-LOCAL-LAST",
        title: "a cascade that promises an answer does not end locally",
        page: "With `cascade.promise = \"always_answer\"` the last tier is the final net: it must\n\
               survive total network loss, so it must be `embedded` (answered from the baked\n\
               catalog, no I/O). Add an embedded tier last, or declare `promise = \"best_effort\"`\n\
               and accept 504/503 answers.",
    },
    CodeDoc {
        code: SHARED_FAILURE_DOMAIN,
        rule: "C-DOMAIN",
        title: "a fallback tier shares a failure domain with the origin",
        page: "A fallback that fails together with the origin is no fallback (seed 000,\n\
               ADV-FD-01): an HTTP tier on the origin's host, a tier using the origin's credential\n\
               secret, or a binding name shared with the origin's secrets. Move the tier to its own\n\
               host and credential.",
    },
    CodeDoc {
        code: UNTESTED_COMPENSATION,
        rule: "C-STUBS",
        title: "stub SKUs that did not pass inventory validation",
        page: "Every SKU baked into the embedded catalog must be in the inventory snapshot, active,\n\
               with stock above `catalog.min_stock` (seed: 50), and the snapshot must be younger\n\
               than `catalog.max_age` (seed: 24h). Serving unvalidated stubs sent customers to\n\
               discontinued products (seed 000, ADV-UC-01). Every offending SKU is listed with its\n\
               reason; remove it from the catalog or refresh the snapshot. `--now` fixes the\n\
               clock for reproducible checks.",
    },
    CodeDoc {
        code: SHARED_CACHE_PER_USER,
        rule: "C-PRIVATE",
        title: "a per-user tier would be cached publicly",
        page: "A tier keyed by a user identity answers one user's data; with a shared-cacheable\n\
               `Cache-Control` (public, s-maxage, or without `private`/`no-store`) a CDN could serve\n\
               it to other users. Give the tier (or `disclosure.private_cache_control`) a `private`\n\
               Cache-Control.",
    },
    CodeDoc {
        code: UNVERIFIED_IDENTITY,
        rule: "C-PRIVATE",
        title: "a user identity taken from an unverified source",
        page: "An identity parameter read from the query, a header or the path can be set by anyone,\n\
               so anyone could read anyone's per-user tier. Read it from a verified token claim\n\
               (`source = \"token_claim\"` with an `[identity]` table), or opt out explicitly with\n\
               `allow_unverified_identity = true` (reported as a warning).",
    },
    CodeDoc {
        code: UNVERIFIED_IDENTITY_OPT_OUT,
        rule: "C-PRIVATE",
        title: "warning: an identity parameter is explicitly unverified",
        page: "The policy opted out of verified identity for this parameter. This is allowed for\n\
               development and for non-sensitive data only; any client can read any user's tier.",
    },
    CodeDoc {
        code: UNTHROTTLED_DEGRADATION,
        rule: "C-STORM",
        title: "degraded answers without Retry-After or Cache-Control",
        page: "Clients that retry degraded answers immediately multiplied seed 000's traffic from\n\
               2,400 to 12,000 req/s. Degraded answers must carry `Retry-After`\n\
               (`disclosure.retry_after`) and a `Cache-Control` (`disclosure.cache_control`, or a\n\
               per-tier `cache_control`).",
    },
    CodeDoc {
        code: UNSAFE_RETRY,
        rule: "C-STORM",
        title: "retries of a non-idempotent origin call without an idempotency key",
        page: "Retrying a POST or PATCH can repeat its side effect. Set `origin.attempts = 1`, or\n\
               declare `origin.idempotency_key_header` so every attempt carries the same key.",
    },
    CodeDoc {
        code: BREAKER_NEVER_TRIGGERS,
        rule: "P-BREAKER",
        title: "breaker settings that can never trigger at the declared traffic",
        page: "With `service.expected_rps` declared, a rate breaker whose `min_calls` exceeds the\n\
               calls one window can hold never opens, and a probe whose `probe_min_calls` exceeds\n\
               the probe traffic one window can hold never closes. The notes show the arithmetic.",
    },
    CodeDoc {
        code: CATALOG_UNREADABLE,
        rule: "P-CATALOG",
        title: "the catalog or inventory snapshot cannot be read",
        page: "The file named by `catalog.stubs` or `catalog.inventory` (relative to the policy)\n\
               is missing, unreadable, larger than 64 MiB, or not UTF-8.",
    },
    CodeDoc {
        code: CATALOG_MALFORMED,
        rule: "P-CATALOG",
        title: "the catalog or inventory snapshot is malformed",
        page: "The file is not the expected JSON (see docs/policy.md, \"Catalog files\"): the\n\
               message gives the line and column. Duplicate SKUs, empty SKUs and a snapshot time\n\
               that is not RFC 3339 are reported here too.",
    },
    CodeDoc {
        code: MODULE_TOO_LARGE,
        rule: "B-DIST",
        title: "the baked module is over the platform's size limit",
        page: "Workers refuses a Worker over 64 MiB uncompressed, on every plan (Cloudflare's\n\
               Workers limits page, as of September 2026; the compressed caps of 3 MiB free and\n\
               10 MiB paid are gone). `--size-limit SIZE` checks the raw module against a smaller\n\
               figure, never a larger one; `--gzip-limit SIZE` adds an opt-in budget on the gzipped\n\
               size, for start-up time. The baked catalog is the part that grows: the message gives\n\
               the module's size and the SKU count. Trim the catalog (the final net needs a curated\n\
               list, not the whole inventory).",
    },
    CodeDoc {
        code: EVENTS_PERMANENT_RETRY,
        rule: "V-DELIVER",
        title: "a permanent failure listed as retryable",
        page: "`[events.retry] retry_on` names what is retried: `timeout`, `connect`, `408`, `429`,\n\
               `5xx`. A consumer's other 4xx (`400`, `401`, `403`, `422`, `4xx`…) refuses the event\n\
               itself — its schema or the edge's credential — and repeating it cannot succeed: it\n\
               only delays the dead letter and hammers the consumer (seed 004: \"do not retry\n\
               permanent 4xx schema/authentication errors\"). Remove it; fix the event or the\n\
               credential and replay the dead letter.",
    },
    CodeDoc {
        code: EVENTS_RETRY_WINDOW,
        rule: "V-DELIVER",
        title: "the retry schedule does not fit its window",
        page: "Every attempt of an event must start within `[events.retry] window` (seed 004: 8\n\
               attempts over 15 minutes). The worst case is every full-jitter wait at its ceiling\n\
               (`base`, doubling, at most `max`) plus every attempt taking its whole\n\
               `[events.delivery] attempt_timeout`; the notes show the arithmetic. Lower the\n\
               attempts, the backoff or the attempt timeout, or widen the window. At run time a\n\
               consumer's `Retry-After` may still use the window up sooner: the event is then\n\
               dead-lettered as exhausted.",
    },
    CodeDoc {
        code: EVENTS_SCHEMA_VERSIONS,
        rule: "V-INGEST",
        title: "an event type without its prior schema version, or with one declared twice",
        page: "Producers upgrade one at a time, so the edge accepts the current schema version of\n\
               each type and at least the one before it (seed 004: \"backward compatible for at\n\
               least one prior schema version\"). A type whose highest version N is above 1 must\n\
               also declare N−1 (`[[events.types]]` with the same `name`, `version = N-1` and the\n\
               fields it requires); each (name, version) is declared once.",
    },
    CodeDoc {
        code: EVENTS_UNAUTHENTICATED,
        rule: "V-INGEST",
        title: "events without caller authentication or without an operator secret",
        page: "The edge records each event's tenant from the caller's verified token, so\n\
               `[events]` needs `[identity]` (the token rules); and list, inspect, replay and skip\n\
               are operator endpoints behind `[admin]`'s secret. Add the missing table. The\n\
               encryption key must also be a secret of its own, not the identity, admin or\n\
               consumer secret.",
    },
    CodeDoc {
        code: EVENTS_ORDER_RELAXED,
        rule: "V-ORDER",
        title: "warning: a dead letter does not hold its aggregate",
        page: "With `[events] dead_letter = \"continue\"` an aggregate's later events are delivered\n\
               past its dead letter, and a replayed dead letter then arrives out of order. That is\n\
               a choice for consumers that do not depend on order; the safe default is `\"hold\"`:\n\
               later events wait, reported and alerted, until an operator replays or skips it.",
    },
];

pub fn find(code: &str) -> Option<&'static CodeDoc> {
    ALL.iter().find(|d| d.code.eq_ignore_ascii_case(code))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique() {
        let mut seen = std::collections::BTreeSet::new();
        for d in ALL {
            assert!(seen.insert(d.code), "duplicate code {}", d.code);
        }
    }

    #[test]
    fn every_code_is_documented_in_docs() {
        let doc = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../docs/diagnostics.md"
        ))
        .expect("docs/diagnostics.md exists");
        for d in ALL {
            assert!(
                doc.contains(&format!("## {}", d.code)),
                "docs/diagnostics.md lacks a section for {}",
                d.code
            );
        }
    }
}
