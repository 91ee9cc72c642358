//! The `[events]` section (issue 11) in the typed raw policy (issue 10): its problems are
//! reported with the rest of the policy's, its rules run through the one validation entry
//! point on the parts that read, and its values have the ranges the section always had.

use std::path::{Path, PathBuf};

use understudy_compiler::codes::Code;
use understudy_compiler::load::{load_policy, Loaded};
use understudy_core::Millis;

/// 2026-11-30T12:00:00Z: fixtures' inventory snapshots are from 01:00 that day.
const NOW: Millis = Millis(1_796_040_000_000);

/// The valid policy with `[events]` (its one finding is a warning), edited by `edit`, with
/// its catalog files beside it.
fn events_policy(edit: impl FnOnce(String) -> String) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    for f in ["catalog.json", "good-inventory.json"] {
        std::fs::copy(
            Path::new("tests/fixtures/invalid").join(f),
            dir.path().join(f),
        )
        .unwrap();
    }
    let text = std::fs::read_to_string("tests/fixtures/invalid/WARN_EVENTS_ORDER_RELAXED.toml")
        .unwrap()
        .replace("dead_letter = \"continue\"\n", "");
    let path = dir.path().join("policy.toml");
    std::fs::write(&path, edit(text)).unwrap();
    (dir, path)
}

fn load(edit: impl FnOnce(String) -> String) -> Loaded {
    let (_d, path) = events_policy(edit);
    load_policy(&path, NOW)
}

fn codes(l: &Loaded) -> Vec<Code> {
    l.diagnostics.iter().map(|d| d.code).collect()
}

#[test]
fn the_events_base_is_valid_and_bakes_its_section() {
    let l = load(|t| t);
    assert_eq!(codes(&l), Vec::<Code>::new());
    let events = l.policy.unwrap().events.unwrap();
    assert_eq!(events.route, "/v1/events");
    // Defaults: seed 004's schedule and thresholds.
    assert_eq!(
        (events.shards, events.max_body_bytes, events.retention_ms),
        (16, 65_536, 7 * 86_400_000)
    );
    assert_eq!(events.retry.window_ms, 900_000);
    assert_eq!(events.alerts.oldest_pending_ms, 60_000);
    assert_eq!(events.delivery.concurrency, 4);
}

#[test]
fn a_bad_events_value_does_not_hide_rules_about_other_parts() {
    let l = load(|t| {
        t.replace(
            "route = \"/v1/events\"",
            "route = \"/v1/events\"\nshards = 300",
        )
        // Semantic, elsewhere: the deadline is longer than the budget.
        .replace("deadline = \"800ms\"", "deadline = \"2s\"")
    });
    let got = codes(&l);
    assert!(got.contains(&Code::OutOfRange), "{got:?}");
    assert!(got.contains(&Code::BudgetExceeded), "{got:?}");
    assert_eq!(l.unread, ["[events]"]);
}

#[test]
fn the_events_rules_run_when_another_part_did_not_read() {
    // [origin] fails to read; the schema-version rule about [events] still runs.
    let l = load(|t| {
        t.replace("attempt_timeout = \"800ms\"", "attempt_timeout = \"0ms\"")
            .replace("version = 2\n", "version = 3\n")
    });
    let got = codes(&l);
    assert!(got.contains(&Code::OutOfRange), "{got:?}");
    assert!(got.contains(&Code::EventsSchemaVersions), "{got:?}");
}

#[test]
fn a_version_declared_twice_points_at_both() {
    let l = load(|t| t.replace("version = 1\n", "version = 2\n"));
    let d = l
        .diagnostics
        .iter()
        .find(|d| d.message.contains("declared twice"))
        .unwrap();
    assert_eq!(d.code, Code::EventsSchemaVersions);
    assert_eq!(d.secondary.len(), 1);
    assert_ne!(d.span, Some(d.secondary[0].span));
}

#[test]
fn a_table_that_did_not_read_is_not_reported_missing() {
    // [identity] is there but wrong: its own error, not ERR_EVENTS_UNAUTHENTICATED.
    let l = load(|t| t.replace("audience = \"svc\"", "audience = 3"));
    let got = codes(&l);
    assert!(got.contains(&Code::WrongType), "{got:?}");
    assert!(!got.contains(&Code::EventsUnauthenticated), "{got:?}");
}

#[test]
fn the_encryption_key_is_a_secret_of_its_own() {
    let l = load(|t| {
        t.replace(
            "encryption_key_secret = \"EVENTS_KEY\"",
            "encryption_key_secret = \"ADMIN_TOKEN\"",
        )
    });
    let d = l
        .diagnostics
        .iter()
        .find(|d| d.code == Code::EventsUnauthenticated)
        .unwrap();
    assert!(d.message.contains("also [admin].secret"), "{}", d.message);
}

#[test]
fn the_ingest_route_is_its_own_path() {
    for (route, what) in [
        ("/v1/search", "the service route"),
        ("/__understudy/status", "the admin path"),
        ("/__understudy/events/x", "the operators' events endpoints"),
    ] {
        let l = load(|t| t.replace("route = \"/v1/events\"", &format!("route = \"{route}\"")));
        let d = l
            .diagnostics
            .iter()
            .find(|d| d.code == Code::InvalidValue)
            .unwrap_or_else(|| panic!("{route}: {:?}", codes(&l)));
        assert!(d.message.contains(what), "{}", d.message);
    }
    // A route with a parameter is refused as a value.
    let l = load(|t| t.replace("route = \"/v1/events\"", "route = \"/v1/{tenant}\""));
    assert_eq!(codes(&l), [Code::InvalidValue]);
}

#[test]
fn the_events_backoff_base_above_its_maximum_is_refused() {
    let l = load(|t| t.replace("max = \"5m\"", "max = \"5s\""));
    let d = l
        .diagnostics
        .iter()
        .find(|d| d.code == Code::OutOfRange)
        .unwrap_or_else(|| panic!("{:?}", codes(&l)));
    assert!(
        d.message.contains("`events.retry.backoff.base` (7s)"),
        "{}",
        d.message
    );
}

#[test]
fn the_section_keeps_its_ranges() {
    for (from, to, code) in [
        ("attempts = 8", "attempts = 50", None),
        ("attempts = 8", "attempts = 51", Some(Code::OutOfRange)),
        ("window = \"15m\"", "window = \"999999999d\"", None),
        (
            "window = \"15m\"",
            "window = \"0ms\"",
            Some(Code::OutOfRange),
        ),
        (
            "attempt_timeout = \"10s\"",
            "attempt_timeout = \"10s\"\nconcurrency = 7",
            Some(Code::OutOfRange),
        ),
        (
            "attempt_timeout = \"10s\"",
            "attempt_timeout = \"10s\"\nconcurrency = 6",
            None,
        ),
        ("version = 1\n", "version = 0\n", Some(Code::OutOfRange)),
        (
            "encryption_key_secret = \"EVENTS_KEY\"",
            "encryption_key_secret = \"EVENTS_KEY\"\nmax_body_bytes = 1048577",
            Some(Code::OutOfRange),
        ),
        (
            "encryption_key_secret = \"EVENTS_KEY\"",
            "encryption_key_secret = \"EVENTS_KEY\"\nredact = [\"customer..email\"]",
            Some(Code::InvalidValue),
        ),
        (
            "required = [\"orderId\"]",
            "required = [\"\"]",
            Some(Code::InvalidValue),
        ),
        (
            "name = \"order.placed\"\nversion = 1",
            "name = \"order placed\"\nversion = 1",
            Some(Code::InvalidValue),
        ),
    ] {
        let l = load(|t| {
            assert!(t.contains(from), "{from}");
            // A window wide enough for 50 attempts, unless the case is about the window.
            t.replacen(from, to, 1)
                .replace("window = \"15m\"", "window = \"30d\"")
        });
        let got = codes(&l);
        match code {
            None => assert!(l.policy.is_some(), "{to}: {got:?}"),
            Some(c) => assert!(got.contains(&c) && l.policy.is_none(), "{to}: {got:?}"),
        }
    }
}

#[test]
fn a_section_without_types_or_delivery_names_what_to_add() {
    let l = load(|t| {
        let start = t.find("[[events.types]]").unwrap();
        let end = t.find("[events.retry]").unwrap();
        format!("{}{}", &t[..start], &t[end..])
    });
    let messages: Vec<&str> = l.diagnostics.iter().map(|d| d.message.as_str()).collect();
    assert!(
        messages.contains(&"`[events]` accepts no event type"),
        "{messages:?}"
    );
    let d = l
        .diagnostics
        .iter()
        .find(|d| d.message.contains("`delivery`"))
        .unwrap();
    assert_eq!(d.code, Code::MissingKey);
    assert!(d.help.contains("[events.delivery]"), "{}", d.help);
}
