//! One invalid fixture per diagnostic code: each asserts its code and its span, and the
//! rendered human output is snapshotted. Fixtures live in tests/fixtures/invalid/, named
//! after the code they trigger.

use std::path::{Path, PathBuf};

use understudy_compiler::codes;
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
    ("ERR_BAD_TEMPLATE", 24, 16),
    ("ERR_UNKNOWN_TEMPLATE_PARAM", 24, 15),
    ("ERR_DUPLICATE_TIER", 29, 9),
    ("ERR_EMPTY_CASCADE", 20, 1),
    ("ERR_BUDGET_EXCEEDED", 13, 10),
    ("ERR_FINAL_TIER_NOT_LOCAL", 22, 9),
    ("ERR_SHARED_FAILURE_DOMAIN_DETECTED", 31, 8),
    ("ERR_UNTESTED_COMPENSATION_REJECTED", 39, 10),
    ("ERR_SHARED_CACHE_PER_USER", 30, 18),
    ("ERR_UNVERIFIED_IDENTITY", 8, 11),
    ("WARN_UNVERIFIED_IDENTITY_OPT_OUT", 8, 11),
    ("ERR_UNTHROTTLED_DEGRADATION", 34, 1),
    ("ERR_UNSAFE_RETRY", 20, 12),
    ("ERR_BREAKER_NEVER_TRIGGERS", 24, 13),
    ("ERR_CATALOG_UNREADABLE", 39, 10),
    ("ERR_CATALOG_MALFORMED", 4, 31),
    ("ERR_EVENTS_PERMANENT_RETRY", 72, 57),
    ("ERR_EVENTS_RETRY_WINDOW", 71, 11),
    ("ERR_EVENTS_SCHEMA_VERSIONS", 56, 11),
    ("ERR_EVENTS_UNAUTHENTICATED", 43, 10),
    ("WARN_EVENTS_ORDER_RELAXED", 53, 16),
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
            .find(|d| d.code == *code)
            .unwrap_or_else(|| {
                panic!(
                    "{} did not report {code}; got {:?}",
                    path.display(),
                    loaded
                        .diagnostics
                        .iter()
                        .map(|d| d.code)
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
    for d in codes::ALL {
        // The two without a policy fixture have tests of their own: unreadable policies
        // below, oversized modules in tests/releases.rs.
        let covered = EXPECTED.iter().any(|(c, _, _)| *c == d.code)
            || d.code == codes::POLICY_UNREADABLE
            || d.code == codes::MODULE_TOO_LARGE;
        assert!(covered, "{} has no invalid fixture", d.code);
    }
}

#[test]
fn unreadable_policies_are_reported_not_panicked() {
    let missing = load_policy(Path::new("tests/fixtures/no-such-policy.toml"), NOW);
    assert_eq!(missing.diagnostics[0].code, codes::POLICY_UNREADABLE);
    assert!(missing.diagnostics[0]
        .message
        .contains("no-such-policy.toml"));

    let dir = std::env::temp_dir().join(format!("understudy-diag-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let latin1 = dir.join("latin1.toml");
    std::fs::write(&latin1, b"version = \"caf\xe9\"\n").unwrap();
    let l = load_policy(&latin1, NOW);
    assert_eq!(l.diagnostics[0].code, codes::POLICY_UNREADABLE);
    assert!(l.diagnostics[0].message.contains("not UTF-8"));

    let huge = dir.join("huge.toml");
    std::fs::write(&huge, vec![b'#'; 2 << 20]).unwrap();
    let h = load_policy(&huge, NOW);
    assert_eq!(h.diagnostics[0].code, codes::POLICY_UNREADABLE);
    assert!(h.diagnostics[0].message.contains("limit"));
    assert_eq!(
        load_policy(&dir, NOW).diagnostics[0].code,
        codes::POLICY_UNREADABLE
    );
}

#[test]
fn every_problem_is_reported_in_one_run() {
    let base = std::fs::read_to_string("tests/fixtures/base.toml").unwrap();
    let broken = base
        .replace("deadline = \"800ms\"", "deadline = \"800\"\nextra = 1")
        .replace("max_len = 100", "max_len = -4")
        .replace("read_timeout = \"50ms\"", "read_timeout = 50")
        .replace("kind = \"kv\"", "kind = \"kv\"\ncolour = \"blue\"");
    let dir = std::env::temp_dir().join(format!("understudy-multi-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("multi.toml");
    std::fs::write(&path, broken).unwrap();
    let loaded = load_policy(&path, NOW);
    let got: Vec<&str> = loaded.diagnostics.iter().map(|d| d.code).collect();
    for code in ["ERR_BAD_DURATION", "ERR_UNKNOWN_KEY", "ERR_INVALID_VALUE"] {
        assert!(got.contains(&code), "missing {code} in {got:?}");
    }
    assert!(
        got.iter().filter(|c| **c == "ERR_UNKNOWN_KEY").count() >= 2,
        "{got:?}"
    );
    assert!(
        got.iter().filter(|c| **c == "ERR_BAD_DURATION").count() >= 2,
        "{got:?}"
    );
}

#[test]
fn shipped_policies_are_clean() {
    for name in ["recommendations", "semantic-search", "api"] {
        let path = PathBuf::from(format!("../policies/{name}.toml"));
        let loaded = load_policy(&path, NOW);
        assert!(
            loaded.diagnostics.is_empty(),
            "{name}: {:?}",
            loaded.diagnostics
        );
        assert!(loaded.policy.is_some());
    }
}

#[test]
fn stale_snapshot_is_refused_unless_checked_as_of_its_day() {
    let path = PathBuf::from("../policies/recommendations.toml");
    let two_days_later = Millis(NOW.0 + 2 * 86_400_000);
    let loaded = load_policy(&path, two_days_later);
    let d = loaded
        .diagnostics
        .iter()
        .find(|d| d.code == codes::UNTESTED_COMPENSATION)
        .expect("stale snapshot reported");
    assert!(d.message.contains("old"), "{}", d.message);
    assert!(load_policy(&path, NOW).diagnostics.is_empty());
}

#[test]
fn budget_arithmetic_is_shown() {
    let loaded = load_policy(&fixture("ERR_BUDGET_EXCEEDED"), NOW);
    let d = loaded
        .diagnostics
        .iter()
        .find(|d| d.code == codes::BUDGET_EXCEEDED)
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
        .find(|d| d.code == codes::EVENTS_RETRY_WINDOW)
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
        .replace("attempt_timeout = \"10s\"", "attempt_timeout = 10");
    let dir = std::env::temp_dir().join(format!("understudy-events-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("events.toml");
    std::fs::write(&path, text).unwrap();
    let loaded = load_policy(&path, NOW);
    let got: Vec<(&str, &str)> = loaded
        .diagnostics
        .iter()
        .map(|d| (d.code, d.message.as_str()))
        .collect();
    for needle in [
        "`events.dead_letter` is `later`",
        "`events.shards` is 0",
        "`events.retry.attempts` is 0",
        "`events.retry.window` is empty or zero",
        "unknown key `retry_on_typo`",
        "`events.delivery.attempt_timeout` is the bare number 10",
    ] {
        assert!(
            got.iter().any(|(_, m)| m.contains(needle)),
            "missing {needle:?} in {got:#?}"
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
