//! The schema and the checker come from one definition (issue 10): validated with a JSON
//! Schema validator, every fixture and shipped policy is refused by the schema exactly when
//! `check` refuses it at the input level (one value at a time: types, units, ranges,
//! header grammar, enum words, keys). Rules about several values together — budgets,
//! privacy, failure domains, catalogs — are `check`'s alone.

use std::path::{Path, PathBuf};

use proptest::prelude::*;
use understudy_compiler::parse::{self, schema::schema};

fn validator() -> &'static jsonschema::Validator {
    static V: std::sync::OnceLock<jsonschema::Validator> = std::sync::OnceLock::new();
    V.get_or_init(|| {
        jsonschema::options()
            .should_validate_formats(true)
            .build(&schema())
            .expect("the schema is valid JSON Schema")
    })
}

/// `Some(json)` for text that is TOML.
fn as_json(text: &str) -> Option<serde_json::Value> {
    let v: toml::Value = toml::from_str(text).ok()?;
    serde_json::to_value(v).ok()
}

/// (check refuses it at input level, the schema refuses it), or `None` when not TOML.
fn verdicts(v: &jsonschema::Validator, path: &Path, text: &str) -> Option<(bool, bool)> {
    let json = as_json(text)?;
    let parsed = parse::parse(path, text);
    Some((!parsed.diagnostics.is_empty(), !v.is_valid(&json)))
}

fn all_fixtures() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir("tests/fixtures/invalid")
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    out.push("tests/fixtures/base.toml".into());
    for p in ["recommendations", "semantic-search", "api"] {
        out.push(format!("../policies/{p}.toml").into());
    }
    out.sort();
    out
}

#[test]
fn the_schema_refuses_exactly_what_check_refuses_at_input_level() {
    let v = validator();
    let mut refused = 0;
    for path in all_fixtures() {
        let text = std::fs::read_to_string(&path).unwrap();
        let Some((check, schema)) = verdicts(v, &path, &text) else {
            // Not TOML (ERR_TOML_SYNTAX): no instance for the schema to judge.
            continue;
        };
        let json = as_json(&text).unwrap();
        let errors: Vec<String> = v.iter_errors(&json).map(|e| e.to_string()).collect();
        assert_eq!(
            check,
            schema,
            "{}: check {} at input level, the schema {} ({errors:?}; check: {:?})",
            path.display(),
            if check { "refuses it" } else { "accepts it" },
            if schema { "refuses it" } else { "accepts it" },
            parse::parse(&path, &text)
                .diagnostics
                .iter()
                .map(|d| d.code.as_str())
                .collect::<Vec<_>>()
        );
        refused += usize::from(check);
    }
    // One fixture per input-level code: unknown key, missing key, wrong type, bad duration,
    // invalid value, out of range, bad header value, bad template, empty cascade.
    assert!(
        refused >= 9,
        "the fixtures cover every input-level code ({refused})"
    );
}

/// The `[events]` fixtures (issue 11) are judged like the others: a permanent 4xx listed as
/// retryable is a value problem, refused by both; the other events codes are rules about
/// several values (the retry window, schema versions N and N−1, authentication, dead-letter
/// order), `check`'s alone, so the schema accepts those policies.
#[test]
fn the_events_fixtures_get_the_same_verdict_from_both() {
    let v = validator();
    for (code, refused) in [
        ("ERR_EVENTS_PERMANENT_RETRY", true),
        ("ERR_EVENTS_RETRY_WINDOW", false),
        ("ERR_EVENTS_SCHEMA_VERSIONS", false),
        ("ERR_EVENTS_UNAUTHENTICATED", false),
        ("WARN_EVENTS_ORDER_RELAXED", false),
    ] {
        let path = PathBuf::from(format!("tests/fixtures/invalid/{code}.toml"));
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            verdicts(v, &path, &text),
            Some((refused, refused)),
            "{code}"
        );
    }
}

const KEYS: &[(&str, &str)] = &[
    ("budget", "total"),
    ("budget", "deadline"),
    ("budget", "slack"),
    ("origin", "attempt_timeout"),
    ("origin", "attempts"),
    ("origin", "url"),
    ("origin", "method"),
    ("origin", "credential_header"),
    ("origin", "max_body_bytes"),
    ("origin", "max_in_flight"),
    ("origin", "idempotent"),
    ("origin.hedge", "after"),
    ("origin.hedge", "max_share"),
    ("origin.hedge", "burst"),
    ("service", "name"),
    ("service", "route"),
    ("service", "expected_rps"),
    ("params.q", "max_len"),
    ("params.q", "source"),
    ("params.q", "from"),
    ("params.q", "pattern"),
    ("disclosure", "cache_control"),
    ("disclosure", "retry_after"),
    ("disclosure", "live_cache_control"),
    ("catalog", "max_age"),
    ("catalog", "min_stock"),
    ("catalog", "on_expired"),
    ("cascade", "promise"),
    ("storm", "window"),
    ("storm", "max_retries"),
];

/// Keys of `[events]`, edited in a policy that has a valid `[events]` section.
const EVENT_KEYS: &[(&str, &str)] = &[
    ("events", "route"),
    ("events", "tenant_claim"),
    ("events", "max_body_bytes"),
    ("events", "shards"),
    ("events", "encryption_key_secret"),
    ("events", "redact"),
    ("events", "dead_letter"),
    ("events", "replay"),
    ("events", "retention"),
    ("events.delivery", "url"),
    ("events.delivery", "credential_header"),
    ("events.delivery", "attempt_timeout"),
    ("events.delivery", "concurrency"),
    ("events.retry", "attempts"),
    ("events.retry", "window"),
    ("events.retry", "retry_on"),
    ("events.retry", "honor_retry_after"),
    ("events.retry.backoff", "base"),
    ("events.retry.backoff", "max"),
    ("events.alerts", "oldest_pending"),
    ("events.alerts", "dead_letters"),
    ("events.alerts", "gap"),
];

fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "\"0ms\"",
            "\"1ms\"",
            "\"45ms\"",
            "\"1s\"",
            "\"10s\"",
            "\"60s\"",
            "\"2m\"",
            "\"1h\"",
            "\"25h\"",
            "\"31d\"",
            "\"1m30s\"",
            "\"8 ms\"",
            "\"045ms\"",
            "\"9999999999ms\"",
            "\"ms\"",
            "\"\"",
            "\"public, max-age=30\"",
            "\"private, no-store\"",
            "\"public,\"",
            "\"a\\r\\nb\"",
            "\"X-Header\"",
            "\"X Header\"",
            "\"query\"",
            "\"header\"",
            "\"path\"",
            "\"GET\"",
            "\"FETCH\"",
            "\"https://model.example/x\"",
            "\"ftp://x\"",
            "\"/v1/search\"",
            "\"v1\"",
            "\"svc\"",
            "\"bad name\"",
            "\"refuse\"",
            "\"disclose\"",
            "\"best_effort\"",
            "\"p95\"",
            "0.5",
            "0.6",
            "\"^[a-z]+$\"",
            "\"(\"",
            "0",
            "1",
            "3",
            "-1",
            "11",
            "100",
            "8193",
            "1.5",
            "5.0",
            "0.0",
            "true",
            "[]",
            "[\"GET\"]",
            "{}",
            "\"/v1/events\"",
            "\"/v1/{id}\"",
            "\"hold\"",
            "\"continue\"",
            "\"later\"",
            "\"EVENTS_KEY\"",
            "\"events-key\"",
            "[\"timeout\", \"5xx\"]",
            "[\"timeout\", \"400\"]",
            "[\"4xx\"]",
            "[\"teapot\"]",
            "[\"customer.email\"]",
            "[\"customer..email\"]",
            "6",
            "7",
            "50",
            "51",
            "256",
            "257",
            "1048576",
            "1048577",
            "4294967296",
            "\"999999999d\"",
        ])
        .prop_map(String::from),
        (0i64..100_000).prop_map(|n| n.to_string()),
        (
            (0u64..100_000),
            prop::sample::select(vec!["ms", "s", "m", "h", "d"])
        )
            .prop_map(|(n, u)| format!("\"{n}{u}\"")),
    ]
}

/// Applies `edits` to the policy at `base` and asks both for their verdict.
fn edited_verdicts(base: &str, edits: &[((&str, &str), String)]) -> Result<(), TestCaseError> {
    let base = std::fs::read_to_string(base).unwrap();
    let mut doc: toml::Table = toml::from_str(&base).unwrap();
    for ((table, key), v) in edits {
        let v: toml::Value = match toml::from_str::<toml::Table>(&format!("x = {v}")) {
            Ok(mut t) => t.remove("x").unwrap(),
            Err(_) => continue,
        };
        let mut t = &mut doc;
        for part in table.split('.') {
            let entry = t
                .entry(part.to_string())
                .or_insert_with(|| toml::Value::Table(toml::Table::new()));
            let Some(inner) = entry.as_table_mut() else {
                return Ok(());
            };
            t = inner;
        }
        if *table == "storm" && !t.contains_key("binding") {
            t.insert(
                "binding".into(),
                toml::Value::String("STORM_LIMITER".into()),
            );
        }
        t.insert(key.to_string(), v);
    }
    let text = toml::to_string(&doc).unwrap();
    let v = validator();
    if let Some((check, schema)) = verdicts(v, Path::new("edited.toml"), &text) {
        prop_assert_eq!(check, schema, "{}", text);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Random values at random keys of a valid policy: the two verdicts agree.
    #[test]
    fn edited_policies_get_the_same_verdict_from_both(edits in prop::collection::vec((prop::sample::select(KEYS), value()), 1..4)) {
        edited_verdicts("tests/fixtures/base.toml", &edits)?;
    }

    /// The same for the keys of `[events]`, in a valid policy that has the section.
    #[test]
    fn edited_event_sections_get_the_same_verdict_from_both(edits in prop::collection::vec((prop::sample::select(EVENT_KEYS), value()), 1..4)) {
        edited_verdicts("tests/fixtures/invalid/WARN_EVENTS_ORDER_RELAXED.toml", &edits)?;
    }
}
