//! `understudy schema`: the JSON Schema of the policy format, for editors with TOML
//! language servers (Taplo, Even Better TOML): completion, hover docs, validation.
//!
//! The schema is written out here next to nothing else so it reads like the format's
//! reference; tests check it against docs/policy.md and the shipped policies.

use std::process::ExitCode;

use serde_json::{json, Map, Value};

use crate::args::SchemaArgs;

const DURATION: &str = "^([0-9]+(ms|s|m|h|d))+$";

fn duration(desc: &str) -> Value {
    json!({"type": "string", "pattern": DURATION, "description": desc})
}

fn string(desc: &str) -> Value {
    json!({"type": "string", "description": desc})
}

fn boolean(desc: &str) -> Value {
    json!({"type": "boolean", "description": desc})
}

fn integer(desc: &str, min: u64) -> Value {
    json!({"type": "integer", "minimum": min, "description": desc})
}

fn ratio(desc: &str) -> Value {
    json!({"type": "number", "minimum": 0, "maximum": 1, "description": desc})
}

fn choice(desc: &str, values: &[&str]) -> Value {
    json!({"type": "string", "enum": values, "description": desc})
}

fn table(desc: &str, required: &[&str], props: Vec<(&str, Value)>) -> Value {
    let mut map = Map::new();
    for (k, v) in props {
        map.insert(k.to_string(), v);
    }
    json!({"type": "object", "description": desc, "additionalProperties": false, "required": required, "properties": map})
}

/// The whole schema.
pub fn schema() -> Value {
    let param = table(
        "A request parameter, validated before any I/O.",
        &["source"],
        vec![
            ("source", choice("Where the value comes from.", &["query", "header", "path", "token_claim"])),
            ("from", string("Query key, header name, path segment or claim name (default: the parameter's name).")),
            ("type", choice("Value type (default string).", &["string", "integer"])),
            ("pattern", string("Regular expression the whole value must match (regex-lite syntax).")),
            ("max_len", integer("Longest accepted value in bytes (default 256).", 0)),
            ("required", boolean("Reject requests without it (default false).")),
            ("default", string("Value used when absent.")),
            ("identity", boolean("The parameter identifies a user: tiers keyed by it are per-user.")),
            ("allow_unverified_identity", boolean("Explicit, warned opt-out: identity from an unverified source.")),
        ],
    );
    let tier = table(
        "A fallback tier, tried in order.",
        &["name", "kind"],
        vec![
            (
                "name",
                string("Tier name (X-Fallback-Tier, logs, metrics)."),
            ),
            (
                "kind",
                choice(
                    "kv: Workers KV; embedded: the baked catalog; http: a secondary source.",
                    &["kv", "embedded", "http"],
                ),
            ),
            (
                "cache_control",
                string("Cache-Control for answers from this tier (overrides disclosure)."),
            ),
            ("binding", string("kv: KV namespace binding.")),
            ("key", string("kv: key template, e.g. user_rec:{user_id}.")),
            (
                "max_staleness",
                duration("kv: entries older than this are a miss."),
            ),
            ("read_timeout", duration("kv: read timeout.")),
            (
                "write_through",
                boolean("kv: write live answers back to this tier."),
            ),
            (
                "refresh",
                duration("kv: rewrite a key only when its copy is older than this (default 1m)."),
            ),
            (
                "mode",
                choice(
                    "embedded: curated list or keyword search.",
                    &["curated", "keyword"],
                ),
            ),
            (
                "by",
                string("embedded curated: parameter holding the category."),
            ),
            (
                "query",
                string("embedded keyword: parameter holding the query."),
            ),
            (
                "limit",
                integer("embedded: most items answered (default 10).", 0),
            ),
            ("url", string("http: URL of the secondary source.")),
            ("timeout", duration("http: timeout.")),
            (
                "credential_secret",
                string("http: secret binding with its credential."),
            ),
            (
                "result_path",
                string("http: dotted path of the result list."),
            ),
        ],
    );
    let params = json!({"type": "object", "description": "Request parameters by name.", "additionalProperties": param});
    table(
        "An Understudy fallback policy (docs/policy.md).",
        &["service", "budget", "origin", "cascade"],
        vec![
            ("version", string("The policy's version label.")),
            (
                "service",
                table(
                    "[P-ROUTE] The endpoint.",
                    &["name", "route"],
                    vec![
                        ("name", string("Service name.")),
                        ("route", string("Route path; {name} segments are path parameters.")),
                        ("methods", json!({"type": "array", "items": choice("HTTP method", &["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"]), "description": "Accepted methods (default [\"GET\"])."})),
                        ("expected_rps", integer("Declared peak traffic, to check the breaker can trigger.", 0)),
                    ],
                ),
            ),
            ("params", params),
            (
                "identity",
                table(
                    "Verified identity: HS256 bearer tokens.",
                    &["secret", "issuer", "audience"],
                    vec![
                        ("secret", string("Secret binding holding the HMAC key.")),
                        ("issuer", string("Required `iss`.")),
                        ("audience", string("Required `aud`.")),
                        ("leeway", duration("Clock skew tolerated on exp/nbf (default 30s).")),
                    ],
                ),
            ),
            (
                "budget",
                table(
                    "[P-BUDGET] Time allowed.",
                    &["total", "deadline"],
                    vec![("total", duration("Total budget for the answer.")), ("deadline", duration("Origin race deadline."))],
                ),
            ),
            (
                "origin",
                table(
                    "[P-ORIGIN] The model call.",
                    &["url", "attempt_timeout"],
                    vec![
                        ("url", string("Origin URL.")),
                        ("method", choice("Method used to call the origin (default POST).", &["GET", "POST", "PUT", "PATCH", "DELETE"])),
                        ("attempt_timeout", duration("Per-attempt timeout.")),
                        ("connect_timeout", duration("Connect timeout, where the runtime allows.")),
                        ("attempts", integer("Attempts including the first (default 1).", 1)),
                        (
                            "backoff",
                            table("Full-jitter exponential backoff.", &[], vec![("base", duration("First backoff ceiling (default 10ms).")), ("max", duration("Largest backoff (default 8 × base)."))]),
                        ),
                        ("retry_on", json!({"type": "array", "items": choice("outcome", &["timeout", "connect", "408", "429", "5xx"]), "description": "Retryable outcomes (default all)."})),
                        ("honor_retry_after", boolean("Honour Retry-After when it fits the budget (default true).")),
                        ("idempotency_key_header", string("Header carrying the idempotency key.")),
                        ("credential_secret", string("Secret binding holding the origin credential.")),
                        ("credential_header", string("Header the credential goes in (default Authorization).")),
                        ("result_path", string("Dotted path of the result list in the origin's JSON (default items).")),
                        ("max_body_bytes", integer("Largest origin body accepted (default 1 MiB).", 0)),
                        ("idempotent", boolean("The call has no side effect and may be repeated (default: true for GET/HEAD/PUT/DELETE, false for POST/PATCH).")),
                        ("hedge", table("Hedged requests: a second, identical origin request after the origin's p95 (or a delay), first good answer wins.", &[], vec![
                            ("after", string("\"p95\" (the isolate's observed p95 of the origin, default) or a duration.")),
                            ("max_share", json!({"type": "number", "exclusiveMinimum": 0, "maximum": 0.5, "description": "Hedges per origin call, the token bucket's refill (default 0.05)."})),
                            ("burst", integer("Most hedges in a burst (default 10).", 1)),
                            ("min_calls", integer("Successful origin calls before their p95 is trusted (default 20).", 1)),
                        ])),
                        ("max_in_flight", integer("The bulkhead: most origin calls in flight per isolate; past it requests go to the cascade with BULKHEAD_FULL (default: no cap).", 1)),
                        ("client_errors", choice("What the caller gets when the origin refuses its request with a 4xx other than 401/403/408/429 (default pass_through).", &["pass_through", "fallback"])),
                    ],
                ),
            ),
            (
                "breaker",
                table(
                    "[P-BREAKER] Circuit breaker.",
                    &["mode"],
                    vec![
                        ("mode", choice("off, consecutive (seed 002) or rate (seed 000).", &["off", "consecutive", "rate"])),
                        ("failures", integer("consecutive: failures that open it.", 1)),
                        ("cooldown", duration("consecutive: time open before the half-open trial.")),
                        ("window", duration("rate: sliding window.")),
                        ("failure_ratio", ratio("rate: trip at this failure ratio (default 0.15).")),
                        ("min_calls", integer("rate: calls needed before the ratio counts (default 20).", 0)),
                        ("slow_call_p95", duration("rate: trip when p95 exceeds this.")),
                        ("hold_down", duration("rate: time degraded before probing.")),
                        ("probe_fraction", ratio("rate: share of traffic probing (default 0.02).")),
                        ("probe_min_calls", integer("rate: probe calls before a verdict (default 20).", 0)),
                        ("probe_success_ratio", ratio("rate: promote at this success ratio (default 0.995).")),
                        ("probe_p95", duration("rate: promote when probes' p95 ≤ this.")),
                        ("failed_probe_hold", duration("rate: extra hold after a failed probe (default 60s).")),
                    ],
                ),
            ),
            (
                "cascade",
                table(
                    "[P-TIERS] The fallback cascade.",
                    &["tiers"],
                    vec![
                        ("promise", choice("always_answer (last tier must be embedded) or best_effort (504/503 when nothing answers).", &["always_answer", "best_effort"])),
                        ("tiers", json!({"type": "array", "minItems": 1, "items": tier, "description": "Tiers in order."})),
                    ],
                ),
            ),
            (
                "disclosure",
                table(
                    "[P-DISCLOSE] How degraded answers say so.",
                    &[],
                    vec![
                        ("cache_control", string("Cache-Control of degraded answers from shared tiers.")),
                        ("private_cache_control", string("Cache-Control of degraded answers from per-user tiers (default private, max-age=30).")),
                        ("live_cache_control", string("Cache-Control of live answers (default private, no-store).")),
                        ("retry_after", duration("Retry-After on degraded answers and retryable errors.")),
                        ("body_fields", boolean("Add degraded / is_personalized to the body (default true).")),
                    ],
                ),
            ),
            (
                "storm",
                table(
                    "[P-STORM] Client retry-storm limit.",
                    &["binding"],
                    vec![
                        ("binding", string("Rate Limiting binding.")),
                        ("max_retries", integer("Retries allowed in the window (default 2).", 0)),
                        ("window", choice("Window (the binding supports 10s or 60s).", &["10s", "60s"])),
                    ],
                ),
            ),
            (
                "catalog",
                table(
                    "[P-CATALOG] The stub catalog.",
                    &["stubs", "inventory"],
                    vec![
                        ("stubs", string("Catalog JSON, relative to the policy.")),
                        ("inventory", string("Inventory snapshot JSON, relative to the policy.")),
                        ("max_age", duration("Stubs must be validated within this (default 24h).")),
                        ("min_stock", integer("Stubs need stock above this (default 50).", 0)),
                        ("on_expired", choice("What the edge does with stubs past max_age.", &["refuse", "disclose"])),
                    ],
                ),
            ),
            (
                "admin",
                table(
                    "The admin status endpoint.",
                    &["secret"],
                    vec![("path", string("Path (default /__understudy/status).")), ("secret", string("Secret binding with the admin bearer token."))],
                ),
            ),
            (
                "events",
                table(
                    "Durable events: ingest, outbox, delivery (seed 004).",
                    &["route", "encryption_key_secret", "types", "delivery"],
                    vec![
                        ("route", string("POST path of the ingest endpoint.")),
                        ("tenant_claim", string("Token claim naming the caller's tenant (default tenant).")),
                        ("max_body_bytes", integer("Largest event body in bytes (default 65536, at most 1 MiB).", 1)),
                        ("shards", integer("Outbox shards, fixed once deployed (default 16, at most 256).", 1)),
                        ("encryption_key_secret", string("Secret binding with the AES-256-GCM key material.")),
                        ("redact", json!({"type": "array", "items": {"type": "string"}, "description": "Payload fields (dotted paths) never logged and masked in inspect."})),
                        ("dead_letter", choice("What a dead letter does to its aggregate's later events (default hold).", &["hold", "continue"])),
                        ("replay", boolean("Whether dead letters may be replayed (default false).")),
                        ("retention", duration("Delivered payloads are erased after this (default 7d).")),
                        (
                            "types",
                            json!({"type": "array", "description": "Accepted event types, one entry per schema version.", "items": table(
                                "One schema version of an event type.",
                                &["name", "version"],
                                vec![
                                    ("name", string("Event type, e.g. order.placed.")),
                                    ("version", integer("Schema version (N and N-1 are both declared).", 1)),
                                    ("required", json!({"type": "array", "items": {"type": "string"}, "description": "Payload fields this version requires."})),
                                ],
                            )}),
                        ),
                        (
                            "delivery",
                            table(
                                "Where events are delivered.",
                                &["url"],
                                vec![
                                    ("url", string("Consumer URL (http or https).")),
                                    ("credential_secret", string("Secret binding with the consumer credential.")),
                                    ("credential_header", string("Header the credential goes in (default Authorization, with Bearer).")),
                                    ("attempt_timeout", duration("One attempt's limit (default 10s).")),
                                    ("concurrency", integer("Deliveries a shard runs at once (1-6, default 4).", 1)),
                                ],
                            ),
                        ),
                        (
                            "retry",
                            table(
                                "The retry schedule (default: 8 attempts, 7s doubling to 5m, within 15m).",
                                &[],
                                vec![
                                    ("attempts", integer("Attempts including the first.", 1)),
                                    ("backoff", table("Full-jitter backoff.", &[], vec![("base", duration("First ceiling.")), ("max", duration("Largest ceiling."))])),
                                    ("window", duration("Every attempt starts within this of the first.")),
                                    ("retry_on", json!({"type": "array", "items": {"enum": ["timeout", "connect", "408", "429", "5xx"]}, "description": "Retryable outcomes; permanent 4xx are refused."})),
                                    ("honor_retry_after", boolean("Wait at least the consumer's Retry-After (default true).")),
                                ],
                            ),
                        ),
                        (
                            "alerts",
                            table(
                                "Alert thresholds.",
                                &[],
                                vec![
                                    ("oldest_pending", duration("Alert when the oldest pending event is older (default 60s).")),
                                    ("dead_letters", integer("Alert above this many dead letters (default 0).", 0)),
                                    ("gap", duration("Report a missing predecessor after this (default 60s).")),
                                ],
                            ),
                        ),
                    ],
                ),
            ),
        ],
    )
    .as_object()
    .map(|o| {
        let mut o = o.clone();
        o.insert("$schema".into(), json!("https://json-schema.org/draft/2020-12/schema"));
        o.insert("title".into(), json!("Understudy policy"));
        Value::Object(o)
    })
    .unwrap_or(Value::Null)
}

pub fn run(args: SchemaArgs) -> anyhow::Result<ExitCode> {
    let text = serde_json::to_string_pretty(&schema())? + "\n";
    match args.out {
        Some(path) => std::fs::write(&path, text)
            .map_err(|e| anyhow::anyhow!("cannot write `{}`: {e}", path.display()))?,
        None => print!("{text}"),
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(v: &Value, prefix: &str, out: &mut Vec<String>) {
        if let Some(props) = v.get("properties").and_then(Value::as_object) {
            for (k, sub) in props {
                let path = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                out.push(path.clone());
                keys(sub, &path, out);
                if let Some(items) = sub.get("items") {
                    keys(items, &path, out);
                }
                if let Some(extra) = sub.get("additionalProperties").filter(|a| a.is_object()) {
                    keys(extra, &path, out);
                }
            }
        }
    }

    #[test]
    fn every_schema_key_is_documented() {
        let doc =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/policy.md"))
                .expect("docs/policy.md");
        let mut all = Vec::new();
        keys(&schema(), "", &mut all);
        for path in all {
            let leaf = path.rsplit('.').next().unwrap_or(&path);
            assert!(
                doc.contains(&format!("`{leaf}`")) || doc.contains(&format!("`[{leaf}")),
                "docs/policy.md does not document `{path}`"
            );
        }
    }

    #[test]
    fn shipped_policies_use_only_schema_keys() {
        let mut all = Vec::new();
        keys(&schema(), "", &mut all);
        let leaves: std::collections::BTreeSet<&str> = all
            .iter()
            .map(|p| p.rsplit('.').next().unwrap_or(p))
            .collect();
        for name in ["recommendations", "semantic-search", "api"] {
            let text = std::fs::read_to_string(format!(
                "{}/../policies/{name}.toml",
                env!("CARGO_MANIFEST_DIR")
            ))
            .unwrap();
            for line in text.lines() {
                let line = line.trim();
                if line.starts_with('#') || line.starts_with('[') || !line.contains('=') {
                    continue;
                }
                let key = line.split('=').next().unwrap_or("").trim();
                assert!(
                    leaves.contains(key),
                    "{name}.toml uses `{key}`, which the schema lacks"
                );
            }
        }
    }
}
