//! Property tests: whatever bytes or TOML arrive, `check` answers with diagnostics and
//! never panics; and an invalid policy never comes back as a policy.

use std::path::Path;

use proptest::prelude::*;
use understudy_compiler::validate::load_text;
use understudy_core::Millis;

const NOW: Millis = Millis(1_796_040_000_000);

fn check(text: String) {
    let loaded = load_text(Path::new("tests/fixtures/fuzz.toml"), text, NOW);
    if loaded.has_errors() {
        assert!(loaded.policy.is_none());
    }
    for d in &loaded.diagnostics {
        assert!(!d.code.as_str().is_empty() && !d.message.is_empty());
    }
}

const KEYS: &[&str] = &[
    "version",
    "service",
    "name",
    "route",
    "methods",
    "expected_rps",
    "params",
    "source",
    "from",
    "type",
    "pattern",
    "max_len",
    "required",
    "default",
    "identity",
    "budget",
    "total",
    "deadline",
    "origin",
    "url",
    "method",
    "attempt_timeout",
    "attempts",
    "backoff",
    "base",
    "max",
    "retry_on",
    "breaker",
    "mode",
    "failures",
    "cooldown",
    "window",
    "failure_ratio",
    "min_calls",
    "cascade",
    "promise",
    "tiers",
    "kind",
    "binding",
    "key",
    "max_staleness",
    "read_timeout",
    "refresh",
    "write_through",
    "published",
    "query",
    "by",
    "limit",
    "disclosure",
    "cache_control",
    "retry_after",
    "storm",
    "max_retries",
    "catalog",
    "stubs",
    "inventory",
    "on_expired",
    "admin",
    "secret",
    "slack",
    "hash_key",
    "no_match",
    "client_errors",
    "connect_timeout",
    "live_cache_control",
];

fn value() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        any::<i64>().prop_map(|i| i.to_string()),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| format!("{f:?}")),
        any::<bool>().prop_map(|b| b.to_string()),
        "[a-z0-9{}:_ .-]{0,12}".prop_map(|s| format!("{s:?}")),
        prop::sample::select(vec![
            "\"45ms\"",
            "\"4h\"",
            "\"0ms\"",
            "\"kv\"",
            "\"embedded\"",
            "\"rate\"",
            "\"query\"",
            "\"u:{q}\"",
            "\"99999999999999999999d\""
        ])
        .prop_map(String::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(|v| format!("[{}]", v.join(", "))),
            prop::collection::btree_map(prop::sample::select(KEYS), inner, 0..4).prop_map(
                |kv| format!(
                    "{{ {} }}",
                    kv.into_iter()
                        .map(|(k, v)| format!("{k} = {v}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            ),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..2048)) {
        check(String::from_utf8_lossy(&bytes).into_owned());
    }

    #[test]
    fn arbitrary_toml_tables_never_panic(tables in prop::collection::vec((prop::sample::select(KEYS), prop::collection::vec((prop::sample::select(KEYS), value()), 0..8)), 0..8)) {
        let mut text = String::new();
        for (name, entries) in tables {
            text.push_str(&format!("[{name}]\n"));
            let mut seen = std::collections::BTreeSet::new();
            for (k, v) in entries {
                if seen.insert(k) {
                    text.push_str(&format!("{k} = {v}\n"));
                }
            }
        }
        check(text);
    }

    #[test]
    fn mutated_real_policies_never_panic(drop_line in 0usize..140, replace_line in 0usize..140, v in value(), cut in 0usize..4000) {
        let src = std::fs::read_to_string("../policies/recommendations.toml").unwrap();
        let lines: Vec<&str> = src.lines().collect();
        let mut out = Vec::new();
        for (i, l) in lines.iter().enumerate() {
            if i == drop_line { continue; }
            if i == replace_line {
                if let Some((k, _)) = l.split_once('=') { out.push(format!("{k}= {v}")); continue; }
            }
            out.push(l.to_string());
        }
        let text = out.join("\n");
        let cut = cut.min(text.len());
        let cut = (0..=cut).rev().find(|c| text.is_char_boundary(*c)).unwrap_or(0);
        check(text.clone());
        check(text[..cut].to_string());
    }
}
