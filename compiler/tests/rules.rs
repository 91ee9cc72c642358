//! Behaviours of the whole-policy rules beyond one fixture each: every problem in one run,
//! the shipped policies, the budget and slack arithmetic, dated warnings.

use std::path::{Path, PathBuf};

use understudy_compiler::codes::Code;
use understudy_compiler::load::load_policy;
use understudy_core::Millis;

/// 2026-11-30T12:00:00Z: fixtures' inventory snapshots are from 01:00 that day.
const NOW: Millis = Millis(1_796_040_000_000);

fn codes(path: &Path, now: Millis) -> Vec<&'static str> {
    load_policy(path, now)
        .diagnostics
        .iter()
        .map(|d| d.code.as_str())
        .collect()
}

/// A copy of tests/fixtures/base.toml edited by `edit`, with its catalog files beside it.
fn policy(edit: impl FnOnce(String) -> String) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    for f in ["catalog.json", "good-inventory.json"] {
        std::fs::copy(
            Path::new("tests/fixtures/invalid").join(f),
            dir.path().join(f),
        )
        .unwrap();
    }
    let text = edit(std::fs::read_to_string("tests/fixtures/base.toml").unwrap());
    let path = dir.path().join("policy.toml");
    std::fs::write(&path, text).unwrap();
    (dir, path)
}

#[test]
fn the_base_fixture_is_valid() {
    let (_d, path) = policy(|t| t);
    assert_eq!(codes(&path, NOW), Vec::<&str>::new());
}

/// Issue 10: one unknown key hid every semantic error in the same file.
#[test]
fn input_errors_do_not_hide_semantic_errors_in_other_parts() {
    let (_d, path) = policy(|t| {
        t.replace("deadline = \"800ms\"", "deadline = \"800\"\nextra = 1")
            .replace("max_len = 100", "max_len = -4")
            .replace("kind = \"kv\"", "kind = \"kv\"\ncolour = \"blue\"")
            .replace("retry_after = \"5s\"", "retry_after = \"5s\"\nlive = true")
            // Semantic: the KV tier reuses the origin's credential secret as its binding.
            .replace(
                "attempt_timeout = \"800ms\"",
                "attempt_timeout = \"800ms\"\ncredential_secret = \"CACHE\"",
            )
    });
    let got = codes(&path, NOW);
    for code in [
        "ERR_BAD_DURATION",
        "ERR_UNKNOWN_KEY",
        "ERR_OUT_OF_RANGE",
        "ERR_SHARED_FAILURE_DOMAIN_DETECTED",
    ] {
        assert!(got.contains(&code), "missing {code} in {got:?}");
    }
    assert_eq!(
        got.iter().filter(|c| **c == "ERR_UNKNOWN_KEY").count(),
        3,
        "{got:?}"
    );
}

#[test]
fn an_unknown_key_leaves_its_table_checked() {
    // The unknown key sits in [budget]; the budget rule still runs on that table.
    let (_d, path) = policy(|t| {
        t.replace("total = \"1s\"", "total = \"1s\"\ntotl = \"2s\"")
            .replace("read_timeout = \"50ms\"", "read_timeout = \"350ms\"")
    });
    let got = codes(&path, NOW);
    assert!(got.contains(&"ERR_UNKNOWN_KEY"), "{got:?}");
    assert!(got.contains(&"ERR_BUDGET_EXCEEDED"), "{got:?}");
}

#[test]
fn shipped_policies_have_no_errors_and_only_their_known_warnings() {
    for (name, warnings) in [
        ("recommendations", vec!["WARN_STUBS_EXPIRE"]),
        ("semantic-search", vec!["WARN_STUBS_EXPIRE"]),
        ("api", vec!["WARN_UNENFORCEABLE_SETTING"]),
    ] {
        let path = PathBuf::from(format!("../policies/{name}.toml"));
        let loaded = load_policy(&path, NOW);
        let got: Vec<&str> = loaded.diagnostics.iter().map(|d| d.code.as_str()).collect();
        assert_eq!(got, warnings, "{name}: {:#?}", loaded.diagnostics);
        assert!(loaded.policy.is_some(), "{name}");
    }
}

#[test]
fn stale_snapshot_is_refused_unless_checked_as_of_its_day() {
    let path = PathBuf::from("../policies/recommendations.toml");
    let later = Millis(NOW.0 + 86_400_000 + 17 * 60_000);
    let loaded = load_policy(&path, later);
    let d = loaded
        .diagnostics
        .iter()
        .find(|d| d.code == Code::UntestedCompensation)
        .expect("stale snapshot reported");
    // Issue 10: "87447s old" is now said the way people read ages.
    assert!(d.message.contains("is 35h 17m old"), "{}", d.message);
    assert!(!load_policy(&path, NOW).has_errors());
}

/// Issue 10: api.toml had a 9.5 s deadline and a 500 ms read in a 10 s budget; at runtime
/// the committed tier never ran after a timeout.
#[test]
fn zero_slack_is_refused_with_the_arithmetic() {
    let (_d, path) = policy(|t| {
        t.replace("deadline = \"800ms\"", "deadline = \"950ms\"")
            .replace("attempt_timeout = \"800ms\"", "attempt_timeout = \"950ms\"")
    });
    let loaded = load_policy(&path, NOW);
    let d = loaded
        .diagnostics
        .iter()
        .find(|d| d.code == Code::NoSlack)
        .expect("no slack reported");
    let notes = d.notes.join("\n");
    assert!(
        notes.contains("origin race ends by 950ms + 1ms slack = 951ms"),
        "{notes}"
    );
    assert!(
        notes.contains("tier `cache` needs 50ms from 951ms: until 1001ms"),
        "{notes}"
    );
    assert!(notes.contains("budget.total is 1s: 1ms short"), "{notes}");
    // An explicit, larger slack is honoured too.
    let (_d, path) = policy(|t| {
        t.replace(
            "deadline = \"800ms\"",
            "deadline = \"800ms\"\nslack = \"200ms\"",
        )
    });
    assert!(codes(&path, NOW).contains(&"ERR_BUDGET_NO_SLACK"));
}

#[test]
fn the_expiry_warning_names_the_instant_and_the_fix() {
    let loaded = load_policy(Path::new("../policies/recommendations.toml"), NOW);
    let d = &loaded.diagnostics[0];
    assert_eq!(d.code, Code::StubsExpire);
    assert!(d.message.contains("2026-12-01T01:00:00Z"), "{}", d.message);
    assert!(d.help.contains("understudy bake"), "{}", d.help);
}

#[test]
fn backoff_base_above_its_maximum_is_refused() {
    let (_d, path) = policy(|t| {
        t.replace(
            "attempt_timeout = \"800ms\"",
            "attempt_timeout = \"200ms\"\nmethod = \"GET\"\nattempts = 2\nbackoff = { base = \"100ms\", max = \"50ms\" }",
        )
    });
    assert!(codes(&path, NOW).contains(&"ERR_OUT_OF_RANGE"));
}

#[test]
fn kv_keys_that_are_hashed_fit_whatever_the_parameters() {
    let long = |t: String| t.replace("max_len = 100", "max_len = 2000");
    let (_d, path) = policy(long);
    assert!(codes(&path, NOW).contains(&"ERR_KV_KEY_TOO_LONG"));
    let (_d, path) = policy(|t| {
        long(t).replace(
            "key = \"search:{q}\"",
            "key = \"search:{q}\"\nhash_key = true",
        )
    });
    assert_eq!(codes(&path, NOW), Vec::<&str>::new());
}

#[test]
fn header_parameters_need_token_names() {
    let (_d, path) = policy(|t| {
        t.replace(
            "source = \"query\"",
            "source = \"header\"\nfrom = \"X Query\"",
        )
    });
    assert!(codes(&path, NOW).contains(&"ERR_BAD_HEADER_VALUE"));
}

#[test]
fn path_parameters_must_name_a_route_segment() {
    let (_d, path) = policy(|t| t.replace("source = \"query\"", "source = \"path\""));
    let loaded = load_policy(&path, NOW);
    let d = loaded
        .diagnostics
        .iter()
        .find(|d| d.code == Code::RouteParamMismatch)
        .expect("mismatch reported");
    assert!(d.message.contains("does not have"), "{}", d.message);
}

#[test]
fn catalogs_outside_the_policy_directory_are_refused_unless_allowed() {
    let outside = Path::new("tests/fixtures/invalid/ERR_PATH_OUTSIDE_POLICY_DIR.toml");
    assert!(codes(outside, NOW).contains(&"ERR_PATH_OUTSIDE_POLICY_DIR"));
    let allowed = understudy_compiler::load::load_policy_with(
        outside,
        NOW,
        understudy_compiler::load::Options {
            allow_outside_paths: true,
        },
    );
    let got: Vec<&str> = allowed
        .diagnostics
        .iter()
        .map(|d| d.code.as_str())
        .collect();
    // Allowed, the file is read: Cargo.toml is no catalog.
    assert!(!got.contains(&"ERR_PATH_OUTSIDE_POLICY_DIR"), "{got:?}");
    assert!(got.contains(&"ERR_CATALOG_MALFORMED"), "{got:?}");
}

#[test]
fn parts_that_did_not_read_are_named() {
    let (_d, path) =
        policy(|t| t.replace("attempt_timeout = \"800ms\"", "attempt_timeout = \"0ms\""));
    let loaded = load_policy(&path, NOW);
    assert_eq!(loaded.unread, ["[origin]"]);
    let (_d, path) = policy(|t| t);
    assert!(load_policy(&path, NOW).unread.is_empty());
}

/// Issue 10: a 1 MB minified catalog with 1,000 duplicate SKUs printed the whole line per
/// diagnostic (238 MB). Now the duplicates are one diagnostic with a bounded excerpt.
#[test]
fn a_minified_catalog_with_a_thousand_duplicates_gives_a_small_report() {
    let (dir, path) = policy(|t| t);
    let pad = "x".repeat(260);
    let item = |n: usize| {
        format!(
            "{{\"sku\":\"SKU-{n:05}\",\"title\":\"item {n} headphones\",\"category\":\"audio\",\"description\":\"{pad}\"}}"
        )
    };
    let items: Vec<String> = (0..2000)
        .map(item)
        .chain((0..1000).map(|n| item(2 * n)))
        .collect();
    let catalog = format!("{{\"items\":[{}]}}", items.join(","));
    assert!(catalog.len() > 1_000_000 && !catalog.contains('\n'));
    std::fs::write(dir.path().join("catalog.json"), catalog).unwrap();
    // Every SKU is in stock: the duplicates are the only problem.
    let rows: Vec<String> = (0..2000)
        .map(|n| format!("{{\"sku\":\"SKU-{n:05}\",\"status\":\"active\",\"stock\":100}}"))
        .collect();
    std::fs::write(
        dir.path().join("good-inventory.json"),
        format!(
            "{{\"taken_at\":\"2026-11-30T01:00:00Z\",\"skus\":[{}]}}",
            rows.join(",")
        ),
    )
    .unwrap();
    let loaded = load_policy(&path, NOW);
    let dups: Vec<_> = loaded
        .diagnostics
        .iter()
        .filter(|d| d.code == Code::CatalogMalformed)
        .collect();
    assert_eq!(dups.len(), 1, "one diagnostic for all the duplicates");
    assert!(
        dups[0].message.contains("1000 duplicate SKU(s)"),
        "{}",
        dups[0].message
    );
    let mut sources = understudy_compiler::render::Sources::default();
    for (p, t) in &loaded.sources {
        sources.add(p, t);
    }
    let out: String = loaded
        .diagnostics
        .iter()
        .map(|d| understudy_compiler::render::human(&sources, d))
        .collect();
    assert!(out.len() < 4_096, "{} bytes:\n{out}", out.len());
    assert!(out.contains("… and 980 more"), "{out}");
}

/// A nightly re-bake of a built policy warns with the new expiry instant too.
#[test]
fn a_rebake_warns_when_its_stubs_will_expire() {
    use understudy_compiler::validate::{explicit::check_policy_catalog, CatalogFiles};
    let path = Path::new("../policies/recommendations.toml");
    let policy = load_policy(path, NOW).policy.expect("valid");
    let files = CatalogFiles {
        stubs: Path::new("../policies/recommendations.catalog.json"),
        inventory: Path::new("../policies/recommendations.inventory.json"),
    };
    let loaded = check_policy_catalog(&policy, path, "hash", NOW, files);
    let d = loaded
        .diagnostics
        .iter()
        .find(|d| d.code == Code::StubsExpire)
        .expect("the re-bake warns");
    assert!(d.message.contains("2026-12-01T01:00:00Z"), "{}", d.message);
    assert!(
        loaded.policy.is_some(),
        "a warning does not refuse the re-bake"
    );
}

#[test]
fn hedges_are_for_repeatable_calls_and_must_start_before_the_attempt_times_out() {
    let hedged = |extra: &str| {
        policy(|t| {
            t.replace(
                "attempt_timeout = \"800ms\"",
                &format!("attempt_timeout = \"800ms\"\n{extra}"),
            )
        })
    };
    // POST (the default) without an idempotency key: refused.
    let (_d, path) = hedged("\n[origin.hedge]\nafter = \"p95\"\n");
    assert!(codes(&path, NOW).contains(&"ERR_UNSAFE_RETRY"));
    // Declared idempotent, after the p95: fine.
    let (_d, path) =
        hedged("idempotent = true\n\n[origin.hedge]\nafter = \"p95\"\nmax_share = 0.1\n");
    assert_eq!(codes(&path, NOW), Vec::<&str>::new());
    // A fixed delay at or past the attempt's timeout never runs; a share over half is refused.
    let (_d, path) =
        hedged("idempotent = true\n\n[origin.hedge]\nafter = \"800ms\"\nmax_share = 0.6\n");
    let got = codes(&path, NOW);
    assert_eq!(
        got.iter().filter(|c| **c == "ERR_OUT_OF_RANGE").count(),
        1,
        "{got:?}"
    );
    let (_d, path) = hedged("idempotent = true\n\n[origin.hedge]\nafter = \"800ms\"\n");
    assert_eq!(codes(&path, NOW), ["ERR_OUT_OF_RANGE"]);
}

/// [R-GUARD] One validation for every rollout setting: the policy's `[rollout]` key and the
/// command line (`Slo::problems`, which `releases rollout`, its `--dry-run` and `drill
/// --rollout` run) refuse the same values with the same codes. `--dwell 0s` was once accepted
/// on the command line while `rollout.dwell = "0s"` was ERR_OUT_OF_RANGE.
#[test]
fn the_rollout_table_and_the_flags_refuse_the_same_settings_with_the_same_codes() {
    use understudy_compiler::slo::Slo;
    let cases: Vec<(&str, Slo)> = vec![
        (
            "dwell = \"0s\"",
            Slo {
                dwell_ms: 0,
                ..Slo::default()
            },
        ),
        (
            "dwell = \"999ms\"",
            Slo {
                dwell_ms: 999,
                ..Slo::default()
            },
        ),
        (
            "dwell = \"1s\"",
            Slo {
                dwell_ms: 1_000,
                ..Slo::default()
            },
        ),
        (
            "dwell = \"1d\"",
            Slo {
                dwell_ms: 86_400_000,
                ..Slo::default()
            },
        ),
        (
            "dwell = \"2d\"",
            Slo {
                dwell_ms: 172_800_000,
                ..Slo::default()
            },
        ),
        (
            "steps = [50, 10, 100]",
            Slo {
                steps: vec![50, 10, 100],
                ..Slo::default()
            },
        ),
        (
            "steps = [10, 10, 100]",
            Slo {
                steps: vec![10, 10, 100],
                ..Slo::default()
            },
        ),
        (
            "steps = [10, 50]",
            Slo {
                steps: vec![10, 50],
                ..Slo::default()
            },
        ),
        (
            "steps = [0, 100]",
            Slo {
                steps: vec![0, 100],
                ..Slo::default()
            },
        ),
        (
            "steps = [10, 50, 101]",
            Slo {
                steps: vec![10, 50, 101],
                ..Slo::default()
            },
        ),
        (
            "min_answers = 0",
            Slo {
                min_answers: 0,
                ..Slo::default()
            },
        ),
        (
            "max_holds = 1001",
            Slo {
                max_holds: 1001,
                ..Slo::default()
            },
        ),
        (
            "max_holds = 0",
            Slo {
                max_holds: 0,
                ..Slo::default()
            },
        ),
        (
            "degraded_margin = 1.5",
            Slo {
                degraded_margin: 1.5,
                ..Slo::default()
            },
        ),
        (
            "p95_margin = -0.1",
            Slo {
                p95_margin: -0.1,
                ..Slo::default()
            },
        ),
    ];
    for (table, slo) in cases {
        let (_d, path) = policy(|t| format!("{t}\n[rollout]\n{table}\n"));
        let mut from_policy: Vec<&str> = codes(&path, NOW)
            .into_iter()
            .filter(|c| c.starts_with("ERR_"))
            .collect();
        from_policy.dedup();
        let from_flags: Vec<&str> = slo.problems().iter().map(|p| p.code.as_str()).collect();
        assert_eq!(from_policy, from_flags, "{table}");
    }
}
