//! `understudy simulate` replays the edge's own core over scenarios. Seed 002's incident
//! must come out with seed 002's numbers exactly.

use std::path::Path;
use std::process::Command;

use understudy_compiler::load::load_policy;
use understudy_compiler::simulate::{self, report, scenario};
use understudy_core::Millis;

const NOW: Millis = Millis(1_796_040_000_000);

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_understudy"))
}

#[test]
fn seed_002_incident_prints_seed_002_numbers() {
    let out = bin()
        .args([
            "simulate",
            "../policies/semantic-search.toml",
            "--scenario",
            "../scenarios/seed-002-incident.toml",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("WITHOUT the shell (model only) : 19/30 = 63.3%"),
        "{text}"
    );
    assert!(
        text.contains("WITH the shell                 : 30/30 = 100.0%"),
        "{text}"
    );
    assert!(text.contains("the breaker opened at request 14"), "{text}");
    for (label, n) in [
        ("origin (live)", 18),
        ("cache (degraded)", 6),
        ("keyword (degraded)", 6),
        ("total degraded", 12),
    ] {
        let line = text
            .lines()
            .find(|l| l.trim_start().starts_with(label))
            .unwrap_or_else(|| panic!("no `{label}` line in\n{text}"));
        let count: u64 = line
            .split_whitespace()
            .rev()
            .nth(1)
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(count, n, "{line}");
    }
}

#[test]
fn json_output_has_the_same_figures() {
    let out = bin()
        .args([
            "simulate",
            "../policies/semantic-search.toml",
            "--scenario",
            "../scenarios/seed-002-incident.toml",
            "--format",
            "json",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let s = &v["summary"];
    assert_eq!(s["without_shell"], 19);
    assert_eq!(s["with_shell"], 30);
    assert_eq!(s["tiers"]["origin"], 18);
    assert_eq!(s["tiers"]["cache"], 6);
    assert_eq!(s["tiers"]["keyword"], 6);
    assert_eq!(s["breaker_opened_at"][0], 14);
    assert_eq!(
        s["model_calls"], 24,
        "6 requests kept from the model while open"
    );
}

#[test]
fn every_degraded_answer_in_a_simulation_is_a_fallback_tier_and_within_budget() {
    let loaded = load_policy(Path::new("../policies/semantic-search.toml"), NOW);
    let policy = loaded.policy.as_ref().unwrap();
    let sc = scenario::load(Path::new("../scenarios/seed-002-incident.toml"), policy).unwrap();
    let run = simulate::run(policy, loaded.catalog.as_ref(), &sc);
    assert_eq!(run.results.len(), 30);
    for r in &run.results {
        assert!(
            r.latency_ms <= policy.budget.total_ms,
            "request {} took {} ms",
            r.index,
            r.latency_ms
        );
        if r.source != simulate::Source::Origin {
            assert!(
                r.reason.is_some(),
                "request {} degraded without a reason",
                r.index
            );
        }
    }
    let s = report::summarize(policy, &sc, &run);
    assert!(report::check_expectations(&sc, &s).is_empty());
}

fn scenario_error(body: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("scenario.toml");
    std::fs::write(&path, body).unwrap();
    let out = bin()
        .args(["simulate", "../policies/semantic-search.toml", "--scenario"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "bad scenario must exit 2: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

const HEAD: &str = "name = \"x\"\nstart = \"2026-11-30T12:00:00Z\"\nrequests = 10\ninterval = \"1s\"\n[params]\nq = [\"a\"]\n";

#[test]
fn bad_scenarios_are_refused_with_their_place() {
    let e = scenario_error("name = \"x\"\nstart = ");
    assert!(e.contains("line 2"), "{e}");
    let e = scenario_error(&format!("{HEAD}[model]\nlatency = \"5ms\"\ncolour = 1\n"));
    assert!(e.contains("unknown field `colour`"), "{e}");
    let e = scenario_error(&format!("{HEAD}[model]\nlatency = \"5ms\"\n[[kv]]\ntier = \"nope\"\nparams = {{ q = \"a\" }}\nitems = []\nage = \"1h\"\n"));
    assert!(e.contains("kv[0].tier = \"nope\" is not a tier"), "{e}");
    let e = scenario_error(&format!(
        "{HEAD}[model]\nlatency = \"5ms\"\n[[model.phase]]\nrequests = [5, 2]\nfault = \"down\"\n"
    ));
    assert!(
        e.contains("model.phase[0].requests = [5, 2] is inverted"),
        "{e}"
    );
    let e = scenario_error(&format!(
        "{HEAD}[model]\nlatency = \"5ms\"\n[[model.phase]]\nrequests = [5, 50]\nfault = \"down\"\n"
    ));
    assert!(e.contains("reaches past the last request"), "{e}");
    let e = scenario_error(&format!("{HEAD}[model]\nlatency = \"5ms\"\n[[model.phase]]\nrequests = [1, 2]\nfault = \"explode\"\n"));
    assert!(e.contains("is not a fault"), "{e}");
    let e = scenario_error("name = \"x\"\nstart = \"2026-11-30T12:00:00Z\"\nrequests = 99999999999\ninterval = \"1s\"\n[params]\nq = [\"a\"]\n[model]\nlatency = \"5ms\"\n");
    assert!(e.contains("must be between 1 and"), "{e}");
    let e = scenario_error("name = \"x\"\nstart = \"2026-11-30T12:00:00Z\"\nrequests = 5\ninterval = \"1s\"\n[params]\nquery = [\"a\"]\n[model]\nlatency = \"5ms\"\n");
    assert!(
        e.contains("`query` is not a parameter of the policy"),
        "{e}"
    );
    let e = scenario_error("name = \"x\"\nstart = \"2026-11-30T12:00:00Z\"\nrequests = 5\n[params]\nq = [\"a\"]\n[model]\nlatency = \"5ms\"\n");
    assert!(e.contains("missing `interval`"), "{e}");
    // Times past any run overflowed the run's microsecond clock (a panic): a run over a
    // year is refused, and a phase that would begin after the run never comes.
    let e = scenario_error("name = \"x\"\nstart = \"2026-11-30T12:00:00Z\"\nrequests = 5\ninterval = \"1000000000d\"\n[params]\nq = [\"a\"]\n[model]\nlatency = \"5ms\"\n");
    assert!(
        e.contains("5 requests") && e.contains("apart last over a year"),
        "{e}"
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("scenario.toml");
    std::fs::write(
        &path,
        format!("{HEAD}[model]\nlatency = \"5ms\"\n[[model.phase]]\nfrom = \"1000000000d\"\nto = \"1000000001d\"\nfault = \"down\"\n"),
    )
    .unwrap();
    let out = bin()
        .args(["simulate", "../policies/semantic-search.toml", "--scenario"])
        .arg(&path)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(out.status.code(), Some(0), "{err}");
}

/// Issue 9: every outcome class through `simulate` — the engine's classification, not the
/// driver's: a caller's 404 never counts against the breaker, the third consecutive
/// dependency failure (the hang at 13) opens it.
#[test]
fn mixed_outcomes_classify_every_class_once() {
    let policy_path = Path::new("../policies/semantic-search.toml");
    let text = std::fs::read_to_string("../scenarios/mixed-outcomes.toml").unwrap();
    let raw: scenario::RawScenario = toml::from_str(&text).unwrap();
    let loaded = load_policy(policy_path, NOW);
    let policy = loaded.policy.as_ref().expect("valid policy");
    let sc = scenario::build(raw, policy).unwrap();
    let run = simulate::run(policy, loaded.catalog.as_ref(), &sc);
    let reason = |i: usize| run.results[i].reason.clone().unwrap_or_default();
    assert_eq!(reason(1), "ML_4XX");
    assert_eq!(reason(2), "ML_CONNECT");
    assert_eq!(reason(6), "ML_AUTH");
    assert_eq!(reason(12), "ML_AUTH");
    assert_eq!(reason(13), "ML_TIMEOUT");
    assert_eq!(reason(14), "BREAKER_OPEN");
    assert_eq!(run.breaker[0].request, 13, "{:?}", run.breaker);
    assert!(run.results.iter().all(|r| r.status == 200));
}

#[test]
fn a_silent_model_makes_later_requests_start_their_tier_reads_with_the_call() {
    // KV answers in 7 ms; the category tier's read timeout is 5 ms. The first request meets
    // the hang: read at its deadline, the category entry comes too late and the baked stubs
    // answer. The model has then let a call time out and answered no one: the second
    // request's reads start with its origin call and are done by its deadline.
    let loaded = load_policy(Path::new("../policies/recommendations.toml"), NOW);
    let policy = loaded.policy.as_ref().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("silent.toml");
    std::fs::write(
        &path,
        r#"name = "silent-model"
start = "2026-11-30T12:00:00Z"
requests = 2
interval = "1s"
kv_latency = "7ms"
[params]
user_id = ["u-1", "u-2"]
category_id = ["audio"]
[model]
latency = "25ms"
[[model.phase]]
from = "0s"
to = "10s"
fault = "hang"
[[kv]]
tier = "category"
params = { category_id = "audio" }
items = ["SKU-1001", "SKU-1004", "SKU-1007"]
age = "1h"
"#,
    )
    .unwrap();
    let sc = scenario::load(&path, policy).unwrap();
    let run = simulate::run(policy, loaded.catalog.as_ref(), &sc);
    let tiers: Vec<_> = run.results.iter().map(|r| r.source.clone()).collect();
    assert_eq!(
        tiers,
        [
            simulate::Source::Tier("curated".into()),
            simulate::Source::Tier("category".into())
        ]
    );
    for r in &run.results {
        assert_eq!(r.reason.as_deref(), Some("ML_TIMEOUT"));
        assert!(r.latency_ms <= policy.budget.total_ms, "{r:?}");
    }
}

/// Issue 23: the scenario CI plays with `--compare-simulate` against the real edge
/// (tests/drill.test.mjs), as the engine alone decides it: each request's answer and how
/// many attempts it made.
#[test]
fn hedges_retries_the_bulkhead_and_a_breaker_opening_mid_retry_come_out_as_designed() {
    let loaded = load_policy(Path::new("../policies/search-hedged.toml"), NOW);
    let policy = loaded.policy.as_ref().expect("search-hedged.toml checks");
    let sc = scenario::load(Path::new("../scenarios/hedge-retry-bulkhead.toml"), policy).unwrap();
    let run = simulate::run(policy, loaded.catalog.as_ref(), &sc);
    let got: Vec<(u64, Option<&str>, u32)> = run
        .results
        .iter()
        .map(|r| (r.index, r.reason.as_deref(), r.model_attempts))
        .collect();
    let want: Vec<(u64, Option<&str>, u32)> = vec![
        (0, None, 1),
        (1, None, 1),
        (2, None, 1),
        // The first call is slow (4 s): the hedge at 300 ms answers in 100 ms.
        (3, None, 1),
        // Both calls slow: the race's 2.5 s end…
        (4, Some("ML_TIMEOUT"), 1),
        // …while it held the bulkhead's one slot.
        (5, Some("BULKHEAD_FULL"), 0),
        (6, None, 1),
        (7, None, 1),
        // 429, Retry-After 1 honoured: the retry meets the healthy model.
        (8, None, 2),
        (9, None, 1),
        // 429, Retry-After 9: more than the race has left, no retry.
        (10, Some("ML_429"), 1),
        (11, None, 1),
        (12, Some("ML_TIMEOUT"), 1),
        (13, Some("BULKHEAD_FULL"), 0),
        (14, None, 1),
        (15, None, 1),
        // Two 429s, then its retry's wait ends into the breaker 17's failure opened.
        (16, Some("ML_429"), 2),
        // The third failure in a row: the breaker opens, and no retry follows.
        (17, Some("ML_429"), 1),
        (18, Some("BREAKER_OPEN"), 0),
        (19, Some("BREAKER_OPEN"), 0),
        (20, None, 1),
        (21, None, 1),
        (22, None, 1),
        (23, None, 1),
        (24, None, 1),
        (25, None, 1),
    ];
    assert_eq!(got, want);
    let latency = |i: usize| run.results[i].latency_ms;
    assert_eq!(latency(3), 400, "the hedge's answer: 300 ms + 100 ms");
    assert_eq!(
        latency(8),
        1_105,
        "a 5 ms 429, the 1 s Retry-After, a 100 ms answer"
    );
    assert_eq!(
        run.model_calls,
        22 + 3 + 2,
        "22 first calls, the hedges of 3, 4 and 12, the retries of 8 and 16: no more"
    );
    let transitions: Vec<(u64, &str, &str)> = run
        .breaker
        .iter()
        .map(|e| (e.request, e.from, e.to))
        .collect();
    assert_eq!(
        transitions,
        [
            (17, "CLOSED", "OPEN"),
            (20, "OPEN", "HALF_OPEN"),
            (20, "HALF_OPEN", "CLOSED")
        ]
    );
}

/// [F-SCOPE] `--isolates`: seed 000's policy over 40 thin isolates, both scopes side by
/// side; a fleet that cannot meet the scenario's bound exits 1 and says so.
#[test]
fn simulate_over_a_fleet_prints_both_scopes_and_checks_the_fleets_bounds() {
    let dir = tempfile::tempdir().unwrap();
    let sc = dir.path().join("fleet.toml");
    // 241 users x 3 categories: no request repeats 3 times in 10 s (the retry-storm limit).
    let users: Vec<String> = (0..241).map(|u| format!("\"u-{u}\"")).collect();
    let users = users.join(", ");
    let write = |extra: &str| {
        std::fs::write(
            &sc,
            format!(
                "name = \"fleet\"\nstart = \"2026-11-30T12:00:00Z\"\nrate = 200\nrequests = 3000\n\
                 [params]\nuser_id = [{users}]\n\
                 category_id = [\"audio\", \"bags\", \"all\"]\n\
                 [model]\nlatency = \"25ms\"\n[[model.phase]]\nfrom = \"2s\"\nto = \"15s\"\nfault = \"slow\"\nlatency = \"500ms\"\n\
                 [fleet]\nisolates = 10\n{extra}\n"
            ),
        )
        .unwrap();
    };
    write("degrade_within = \"3s\"");
    let out = bin()
        .args(["simulate", "../policies/recommendations.toml", "--scenario"])
        .arg(&sc)
        .args(["--isolates", "40", "--format", "json"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(doc["isolates"], 40, "--isolates overrides the table");
    let scopes = doc["scopes"].as_array().unwrap();
    assert_eq!(
        (scopes[0]["scope"].as_str(), scopes[1]["scope"].as_str()),
        (Some("isolate"), Some("fleet"))
    );
    // 5 req/s an isolate: its own 20 calls take 4 s; the fleet's evidence is there in one.
    let (iso, fleet) = (
        scopes[0]["degrade_s"].as_f64().unwrap(),
        scopes[1]["degrade_s"].as_f64().unwrap(),
    );
    assert!(
        fleet <= 3.0 && iso > fleet,
        "isolate {iso} s, fleet {fleet} s"
    );
    assert!(scopes[1]["reports"].as_u64().unwrap() > 0);
    // A bound the fleet cannot meet: exit 1, and the human report says which.
    write("degrade_within = \"100ms\"");
    let out = bin()
        .args(["simulate", "../policies/recommendations.toml", "--scenario"])
        .arg(&sc)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("scope = fleet") && text.contains("time to degrade (traffic)"),
        "{text}"
    );
    assert!(
        text.contains("EXPECTATION NOT MET: fleet scope: time to degrade"),
        "{text}"
    );
}
