//! One invalid fixture per diagnostic code: each asserts its code and its span, and the
//! rendered human output is snapshotted. Fixtures live in tests/fixtures/invalid/, named
//! after the code they trigger.

use std::path::{Path, PathBuf};

use understudy_compiler::codes::Code;
use understudy_compiler::load::load_policy;
use understudy_compiler::render::{self, Sources};
use understudy_core::Millis;

/// 2026-11-30T12:00:00Z: fixtures' inventory snapshots are from 01:00 that day.
const NOW: Millis = Millis(1_796_040_000_000);

/// (code, line, column) of the primary span each fixture must produce.
const EXPECTED: &[(&str, usize, usize)] = &[
    ("ERR_TOML_SYNTAX", 4, 12),
    ("ERR_UNKNOWN_KEY", 15, 1),
    ("ERR_MISSING_KEY", 16, 1),
    ("ERR_WRONG_TYPE", 9, 12),
    ("ERR_BAD_DURATION", 26, 17),
    ("ERR_INVALID_VALUE", 30, 9),
    ("ERR_OUT_OF_RANGE", 27, 17),
    ("ERR_BAD_HEADER_VALUE", 22, 9),
    ("ERR_BAD_TEMPLATE", 24, 15),
    ("ERR_UNKNOWN_TEMPLATE_PARAM", 24, 15),
    ("ERR_PARAM_DEFAULT_INVALID", 12, 12),
    ("ERR_ROUTE_PARAM_MISMATCH", 6, 10),
    ("ERR_KV_KEY_TOO_LONG", 25, 8),
    ("ERR_ADMIN_PATH_OVERLAP", 40, 9),
    ("ERR_DUPLICATE_TIER", 29, 9),
    ("ERR_EMPTY_CASCADE", 20, 1),
    ("ERR_BUDGET_EXCEEDED", 13, 10),
    ("ERR_BUDGET_NO_SLACK", 14, 10),
    ("ERR_FINAL_TIER_NOT_LOCAL", 22, 9),
    ("ERR_SHARED_FAILURE_DOMAIN_DETECTED", 31, 8),
    ("ERR_UNTESTED_COMPENSATION_REJECTED", 40, 10),
    ("ERR_PUBLISHED_WRITE_THROUGH", 28, 17),
    ("WARN_STUBS_EXPIRE", 40, 15),
    ("WARN_NO_MATCH_UNANSWERED", 34, 13),
    ("ERR_SHARED_CACHE_PER_USER", 30, 18),
    ("ERR_LIVE_ANSWER_PUBLIC", 40, 23),
    ("ERR_UNVERIFIED_IDENTITY", 8, 11),
    ("WARN_UNVERIFIED_IDENTITY_OPT_OUT", 8, 11),
    ("WARN_PLAINTEXT_CREDENTIAL", 18, 8),
    ("WARN_UNENFORCEABLE_SETTING", 20, 20),
    ("ERR_UNTHROTTLED_DEGRADATION", 34, 1),
    ("ERR_UNSAFE_RETRY", 20, 12),
    ("ERR_BREAKER_NEVER_TRIGGERS", 24, 13),
    ("ERR_FLEET_REPORT_INTERVAL", 31, 20),
    ("ERR_FLEET_VERDICT_TTL", 32, 16),
    ("ERR_FLEET_COORDINATOR_BINDING", 31, 16),
    ("ERR_FLEET_COORDINATOR_SECRET", 31, 16),
    ("WARN_FLEET_SETTINGS_UNUSED", 31, 20),
    ("WARN_ISOLATE_SCOPE", 30, 10),
    ("ERR_ROLLOUT_STEPS", 55, 9),
    ("WARN_ROLLOUT_MIN_ANSWERS", 56, 15),
    ("ERR_CATALOG_UNREADABLE", 40, 10),
    ("ERR_PATH_OUTSIDE_POLICY_DIR", 41, 10),
    ("ERR_CATALOG_MALFORMED", 4, 31),
    ("ERR_EVENTS_PERMANENT_RETRY", 73, 57),
    ("ERR_EVENTS_RETRY_WINDOW", 72, 11),
    ("ERR_EVENTS_SCHEMA_VERSIONS", 57, 11),
    ("ERR_EVENTS_UNAUTHENTICATED", 44, 10),
    ("WARN_EVENTS_ORDER_RELAXED", 54, 16),
];

fn fixture(code: &str) -> PathBuf {
    Path::new("tests/fixtures/invalid").join(format!("{code}.toml"))
}

fn render_all(path: &Path) -> (understudy_compiler::load::Loaded, String) {
    let loaded = load_policy(path, NOW);
    let mut sources = Sources::default();
    for (p, t) in &loaded.sources {
        sources.add(p, t);
    }
    let text: String = loaded
        .diagnostics
        .iter()
        .map(|d| render::human(&sources, d))
        .collect();
    (loaded, text)
}

#[test]
fn each_fixture_reports_its_code_at_its_span() {
    for (code, line, col) in EXPECTED {
        let path = fixture(code);
        let loaded = load_policy(&path, NOW);
        let mut sources = Sources::default();
        for (p, t) in &loaded.sources {
            sources.add(p, t);
        }
        let d = loaded
            .diagnostics
            .iter()
            .find(|d| d.code.as_str() == *code)
            .unwrap_or_else(|| {
                panic!(
                    "{} did not report {code}; got {:?}",
                    path.display(),
                    loaded
                        .diagnostics
                        .iter()
                        .map(|d| d.code.as_str())
                        .collect::<Vec<_>>()
                )
            });
        let j = render::json(&sources, d);
        assert_eq!(
            (j.line, j.column),
            (Some(*line), Some(*col)),
            "{code}: span of `{}`",
            d.message
        );
        assert!(!d.help.is_empty(), "{code} names no fix");
        if code.starts_with("ERR_") {
            assert!(
                loaded.has_errors() && loaded.policy.is_none(),
                "{code} must make the policy invalid"
            );
        } else {
            assert!(
                !loaded.has_errors() && loaded.policy.is_some(),
                "{code} is a warning: the policy stays valid"
            );
        }
    }
}

#[test]
fn rendered_diagnostics_match_snapshots() {
    for (code, _, _) in EXPECTED {
        let (_, text) = render_all(&fixture(code));
        insta::assert_snapshot!(*code, text);
    }
}

#[test]
fn every_code_has_a_fixture_or_a_test() {
    for d in Code::ALL {
        // The two without a policy fixture have tests of their own: unreadable policies
        // below, oversized modules in tests/releases.rs.
        let covered = EXPECTED.iter().any(|(c, _, _)| *c == d.as_str())
            || *d == Code::PolicyUnreadable
            || *d == Code::ModuleTooLarge;
        assert!(covered, "{} has no invalid fixture", d.as_str());
    }
}

#[test]
fn unreadable_policies_are_reported_not_panicked() {
    let missing = load_policy(Path::new("tests/fixtures/no-such-policy.toml"), NOW);
    assert_eq!(missing.diagnostics[0].code, Code::PolicyUnreadable);
    assert!(missing.diagnostics[0]
        .message
        .contains("no-such-policy.toml"));

    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let latin1 = dir.join("latin1.toml");
    std::fs::write(&latin1, b"version = \"caf\xe9\"\n").unwrap();
    let l = load_policy(&latin1, NOW);
    assert_eq!(l.diagnostics[0].code, Code::PolicyUnreadable);
    assert!(l.diagnostics[0].message.contains("not UTF-8"));

    let huge = dir.join("huge.toml");
    std::fs::write(&huge, vec![b'#'; 2 << 20]).unwrap();
    let h = load_policy(&huge, NOW);
    assert_eq!(h.diagnostics[0].code, Code::PolicyUnreadable);
    assert!(h.diagnostics[0].message.contains("limit"));
    let d = &load_policy(dir, NOW).diagnostics[0];
    assert_eq!(d.code, Code::PolicyUnreadable);
    assert!(d.message.contains("a directory"), "{}", d.message);
}

#[test]
fn budget_arithmetic_is_shown() {
    let loaded = load_policy(&fixture("ERR_BUDGET_EXCEEDED"), NOW);
    let d = loaded
        .diagnostics
        .iter()
        .find(|d| d.code == Code::BudgetExceeded)
        .unwrap();
    assert!(d.message.contains("1150ms"), "{}", d.message);
    let notes = d.notes.join("\n");
    assert!(
        notes.contains("min(deadline 800ms, 1 attempt × 800ms) = 800ms"),
        "{notes}"
    );
    assert!(
        notes.contains("tier `cache` (KV read timeout): 350ms"),
        "{notes}"
    );
    assert!(
        notes.contains("worst case: 1150ms against budget.total 1s"),
        "{notes}"
    );
}

#[test]
fn the_retry_window_arithmetic_is_shown() {
    let loaded = load_policy(&fixture("ERR_EVENTS_RETRY_WINDOW"), NOW);
    let d = loaded
        .diagnostics
        .iter()
        .find(|d| d.code == Code::EventsRetryWindow)
        .unwrap();
    let notes = d.notes.join("\n");
    assert!(
        notes.contains("7s + 14s + 28s + 56s + 112s + 224s + 5m = 741s"),
        "{notes}"
    );
    assert!(
        notes.contains("8 attempts × the attempt timeout 10s = 80s"),
        "{notes}"
    );
    assert!(
        notes.contains("worst case: 821s against the window 10m"),
        "{notes}"
    );
}

#[test]
fn event_sections_report_every_shape_problem_in_one_run() {
    let text = std::fs::read_to_string(fixture("WARN_EVENTS_ORDER_RELAXED"))
        .unwrap()
        .replace(
            "dead_letter = \"continue\"",
            "dead_letter = \"later\"\nshards = 0",
        )
        .replace("attempts = 8", "attempts = 0")
        .replace("window = \"15m\"", "window = \"0s\"\nretry_on_typo = 1")
        .replace("\"5xx\"]", "\"5xx\", \"403\", \"6xx\"]")
        .replace("attempt_timeout = \"10s\"", "attempt_timeout = 10");
    let dir = tempfile::tempdir().unwrap();
    for f in ["catalog.json", "good-inventory.json"] {
        std::fs::copy(
            Path::new("tests/fixtures/invalid").join(f),
            dir.path().join(f),
        )
        .unwrap();
    }
    let path = dir.path().join("events.toml");
    std::fs::write(&path, text).unwrap();
    let loaded = load_policy(&path, NOW);
    let got: Vec<(Code, &str)> = loaded
        .diagnostics
        .iter()
        .map(|d| (d.code, d.message.as_str()))
        .collect();
    for (code, needle) in [
        (Code::InvalidValue, "`events.dead_letter` is \"later\""),
        (
            Code::OutOfRange,
            "`events.shards` is 0: no shard would hold an event",
        ),
        (Code::OutOfRange, "`events.retry.attempts` is 0"),
        (Code::OutOfRange, "`events.retry.window` is 0s"),
        (Code::UnknownKey, "unknown key `retry_on_typo`"),
        (Code::EventsPermanentRetry, "`403` is a permanent failure"),
        (Code::InvalidValue, "`events.retry.retry_on[6]` is \"6xx\""),
        (
            Code::BadDuration,
            "`events.delivery.attempt_timeout` is the bare number 10",
        ),
    ] {
        assert!(
            got.iter().any(|(c, m)| *c == code && m.contains(needle)),
            "missing {code} {needle:?} in {got:#?}"
        );
    }
    assert!(loaded.policy.is_none());
}

#[test]
fn unknown_keys_list_the_expected_ones() {
    let loaded = load_policy(&fixture("ERR_UNKNOWN_KEY"), NOW);
    let d = &loaded.diagnostics[0];
    assert!(d.help.contains("did you mean `deadline`"), "{}", d.help);
    assert!(d.help.contains("`total`"), "{}", d.help);
}
