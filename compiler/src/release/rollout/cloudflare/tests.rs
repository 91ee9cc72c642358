//! The Cloudflare driver's command lines and queries, and how it reads the SQL API.

use super::*;

#[test]
fn deploy_lines_split_two_versions_and_name_one_at_the_ends() {
    let (a, b) = (
        "aaaaaaaa-0000-4000-8000-000000000001",
        "bbbbbbbb-0000-4000-8000-000000000002",
    );
    assert_eq!(
        deploy_args(a, b, 10, "m")[2..4],
        [format!("{a}@90%"), format!("{b}@10%")]
    );
    assert_eq!(deploy_args(a, b, 100, "m")[2], format!("{b}@100%"));
    assert_eq!(deploy_args(a, b, 0, "m")[2], format!("{a}@100%"));
    assert!(deploy_args(a, b, 0, "m").contains(&"--yes".to_string()));
}

#[test]
fn the_version_id_is_read_from_the_upload_output() {
    let out = "Uploaded recommendation-service (0.15 sec)\nWorker Version ID: 33333333-3333-4333-8333-333333333333\n\nTo deploy…";
    assert_eq!(
        parse_version_id(out).as_deref(),
        Some("33333333-3333-4333-8333-333333333333")
    );
    assert_eq!(parse_version_id("Worker Version ID: nope"), None);
    let up = upload_args("r-0123456789ab", "2026-12-03.1", Some("abcdef0123456789"));
    assert_eq!(up[..4], ["versions", "upload", "--tag", "r-0123456789ab"]);
    assert!(up[5].contains("catalog abcdef012345"), "{up:?}");
}

#[test]
fn the_queries_name_the_dataset_the_releases_and_whole_seconds() {
    let q = counts_sql(
        "recommendation-service",
        "r-000000000001",
        "r-000000000002",
        1_796_000_000_500,
        1_796_000_300_001,
    );
    assert!(q.contains("FROM understudy_recommendation_service"), "{q}");
    assert!(
        q.contains("blob1 IN ('r-000000000001', 'r-000000000002')"),
        "{q}"
    );
    assert!(
        q.contains("toDateTime(1796000000) AND timestamp < toDateTime(1796000301)"),
        "{q}"
    );
    let l = latency_sql("recommendation-service", "r-1", "r-2';DROP", 0, 1);
    assert!(l.contains("'r-2DROP'"), "quotes cannot be injected: {l}");
}

/// A window holding one answer served from memory (0 ms) must not fail the whole latency
/// query: every logarithm in it is of a value of at least 1, whichever branch the SQL
/// engine evaluates.
#[test]
fn the_latency_query_takes_no_logarithm_of_zero() {
    let q = latency_sql("recommendation-service", "r-1", "r-2", 0, 1);
    let mut logs = 0;
    for (at, _) in q.match_indices("log(") {
        let arg: String = q[at + 4..].chars().take_while(|c| *c != ')').collect();
        logs += 1;
        assert!(
            arg.starts_with("greatest(double1, 1") || arg.parse::<f64>().is_ok_and(|x| x >= 1.0),
            "log({arg}…) may be of 0: {q}"
        );
    }
    assert_eq!(logs, 2, "{q}");
    assert!(
        q.contains("if(double1 < 1, 0,"),
        "0 ms answers still fall in bucket 0: {q}"
    );
}

#[test]
fn the_answers_become_figures_and_bad_answers_are_named() {
    let counts = r#"{"meta":[],"data":[{"release":"r-1","answers":"1000","degraded":20,"unavailable":1},{"release":"r-2","answers":100,"degraded":50,"unavailable":0}],"rows":2}"#;
    let latency = r#"{"data":[{"release":"r-1","bucket":35,"n":1000},{"release":"r-2","bucket":"40","n":99},{"release":"r-2","bucket":500,"n":1}]}"#;
    let (old, new) = read_figures(counts, latency, "r-1", "r-2").unwrap();
    assert_eq!((old.answers, old.degraded, old.unavailable), (1000, 20, 1));
    assert_eq!((new.answers, new.degraded), (100, 50));
    assert_eq!(new.latency.count(), 100);
    assert_eq!(
        new.latency.0.get(&TOP),
        Some(&1),
        "past the last bucket counts in it"
    );
    let e = read_figures(
        r#"{"data":[{"release":"r-1","answers":-3,"degraded":0,"unavailable":0}]}"#,
        latency,
        "r-1",
        "r-2",
    )
    .unwrap_err();
    assert!(e.contains("answers"), "{e}");
    assert!(read_figures("<html>", latency, "r-1", "r-2")
        .unwrap_err()
        .contains("not the SQL API's JSON"));
}

/// The example docs/rollout.md shows: the queries for these values, verbatim.
const DOC_EXAMPLE: (&str, &str, &str, u64, u64) = (
    "recommendation-service",
    "r-0123456789ab",
    "r-ba9876543210",
    1_796_040_000_000,
    1_796_040_300_000,
);

#[test]
fn the_queries_are_in_the_rollout_docs_verbatim() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/rollout.md"))
        .expect("docs/rollout.md");
    let (s, o, n, from, to) = DOC_EXAMPLE;
    for (name, q) in [
        ("counts", counts_sql(s, o, n, from, to)),
        ("latency", latency_sql(s, o, n, from, to)),
    ] {
        if std::env::var_os("PRINT_SQL").is_some() {
            println!("{q}\n");
        }
        assert!(
            doc.contains(&format!("```sql\n{q}\n```")),
            "docs/rollout.md lacks the {name} query as the driver sends it:\n{q}"
        );
    }
}
