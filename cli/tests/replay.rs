//! `understudy replay` from the command line: logs written by `simulate --logs` (the
//! engine's own lines, as the Worker prints them) replayed through the policy that wrote
//! them, a changed one, a release of a registry; and the input it must refuse or skip,
//! each named with its file (and line). The proofs against the real Worker are
//! tests/replay.test.mjs.

mod common;

use std::path::{Path, PathBuf};

use common::{Env, DAY1_NOON};
use serde_json::Value;

const SEARCH: &str = "../policies/semantic-search.toml";
const RECS: &str = "../policies/recommendations.toml";

fn root(rel: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(rel)
        .to_string_lossy()
        .into_owned()
}

/// `simulate --logs` of `scenario` through `policy`, into `env`'s `name`.
fn logs(env: &Env, policy: &str, scenario: &str, name: &str) -> PathBuf {
    let out = env.p(name);
    env.ok(&[
        "simulate",
        &root(policy),
        "--scenario",
        &root(scenario),
        "--logs",
        out.to_str().unwrap(),
    ]);
    out
}

fn json(stdout: &str) -> Value {
    serde_json::from_str(stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

#[test]
fn the_logged_policy_replayed_gives_seed_002s_figures_back_and_a_changed_breaker_its_own() {
    let env = Env::new("replay-self");
    let log = logs(
        &env,
        SEARCH,
        "../scenarios/seed-002-incident.toml",
        "s002.ndjson",
    );
    let log = log.to_str().unwrap();
    let r = env.ok(&[
        "replay",
        &root(SEARCH),
        "--logs",
        log,
        "--logged-policy",
        &root(SEARCH),
        "--now",
        DAY1_NOON,
        "--format",
        "json",
    ]);
    let v = json(&r.stdout);
    let (logged, replayed) = (&v["replay"]["as_logged"], &v["replay"]["logged_policy"]);
    assert_eq!(logged, &replayed["best"], "{}", r.stdout);
    assert_eq!(replayed["best"], replayed["worst"]);
    // Seed 002: 18 live, 12 degraded, the breaker open at request 14 (2 s after the origin
    // went down at request 12).
    assert_eq!(
        (logged["answers"].as_u64(), logged["live"].as_u64()),
        (Some(30), Some(18))
    );
    assert_eq!(v["replay"]["incidents"][0]["onset_ms"], 12_000);
    // Seen at the answer of request 14, the first to show the open breaker (its tier read: 2 ms).
    assert_eq!(logged["incidents"][0]["degraded_at_ms"], 14_002);
    assert_eq!(v["input"]["files"][0]["format"], "ndjson");
    // Per time window too: every answer falls in one of them.
    let windows = logged["windows"].as_array().expect("windows");
    assert!(windows.len() > 1, "{windows:?}");
    let in_windows: u64 = windows.iter().map(|w| w["answers"].as_u64().unwrap()).sum();
    assert_eq!(in_windows, 30);

    // A breaker that opens on 6 failures instead of 3: known from the logs, no range.
    let cand = env.write(
        "cand/semantic-search.toml",
        &std::fs::read_to_string(root(SEARCH))
            .unwrap()
            .replace("failures = 3", "failures = 6"),
    );
    for f in [
        "semantic-search.catalog.json",
        "semantic-search.inventory.json",
    ] {
        std::fs::copy(
            root(&format!("../policies/{f}")),
            env.p(&format!("cand/{f}")),
        )
        .unwrap();
    }
    let r = env.ok(&[
        "replay",
        cand.to_str().unwrap(),
        "--logs",
        log,
        "--logged-policy",
        &root(SEARCH),
        "--now",
        DAY1_NOON,
        "--format",
        "json",
    ]);
    let c = &json(&r.stdout)["replay"]["candidate"];
    assert_eq!(c["best"], c["worst"]);
    assert_eq!(
        c["best"]["incidents"][0]["degraded_at_ms"], 17_000,
        "6 failures: 12 to 17"
    );
    assert!(c["best"]["model_calls"].as_u64() > logged["model_calls"].as_u64());
}

#[test]
fn a_longer_deadline_is_a_range_named_as_such_and_the_plot_is_written() {
    let env = Env::new("replay-range");
    let log = logs(
        &env,
        SEARCH,
        "../scenarios/seed-002-incident.toml",
        "s002.ndjson",
    );
    let text = std::fs::read_to_string(root(SEARCH))
        .unwrap()
        .replace("total = \"1s\"", "total = \"3s\"")
        .replace("deadline = \"800ms\"", "deadline = \"2s\"")
        .replace("attempt_timeout = \"800ms\"", "attempt_timeout = \"2s\"");
    let cand = env.write("cand/semantic-search.toml", &text);
    for f in [
        "semantic-search.catalog.json",
        "semantic-search.inventory.json",
    ] {
        std::fs::copy(
            root(&format!("../policies/{f}")),
            env.p(&format!("cand/{f}")),
        )
        .unwrap();
    }
    let plot = env.p("replay.svg");
    let r = env.ok(&[
        "replay",
        cand.to_str().unwrap(),
        "--logs",
        log.to_str().unwrap(),
        "--logged-policy",
        &root(SEARCH),
        "--now",
        DAY1_NOON,
        "--plot",
        plot.to_str().unwrap(),
    ]);
    let live = r
        .stdout
        .lines()
        .find(|l| l.trim_start().starts_with("live"))
        .unwrap();
    assert!(live.trim_end().ends_with("60.0–66.7%"), "{live}");
    assert!(
        r.stdout.contains("What the logs cannot tell"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("2 calls waited longer than the logs saw"),
        "{}",
        r.stdout
    );
    let svg = std::fs::read_to_string(&plot).unwrap();
    assert!(
        svg.starts_with("<svg") && svg.contains("candidate, worst case"),
        "{}",
        &svg[..200]
    );
}

#[test]
fn the_logged_release_comes_from_the_registry() {
    let env = Env::new("replay-registry");
    env.ok(&[
        "releases",
        "add",
        &root(SEARCH),
        "--registry",
        "reg",
        "--edge",
        "edge",
        "--now",
        DAY1_NOON,
        "--promote",
    ]);
    let id = env.active();
    let log = logs(
        &env,
        SEARCH,
        "../scenarios/seed-002-incident.toml",
        "s002.ndjson",
    );
    let text = std::fs::read_to_string(&log).unwrap().replace(
        "\"policy_version\":\"simulate\"",
        &format!("\"policy_version\":\"{id}\""),
    );
    std::fs::write(&log, text).unwrap();
    let r = env.ok(&[
        "replay",
        &root(SEARCH),
        "--logs",
        log.to_str().unwrap(),
        "--registry",
        "reg",
        "--now",
        DAY1_NOON,
    ]);
    assert!(r.stdout.contains(&format!("release {id}")), "{}", r.stdout);
    // Without a way to the logged policy: exit 2, saying which release wrote the logs.
    let r = env.run(&[
        "replay",
        &root(SEARCH),
        "--logs",
        log.to_str().unwrap(),
        "--now",
        DAY1_NOON,
    ]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains(&id) && r.stderr.contains("--logged-policy"),
        "{}",
        r.stderr
    );
}

#[test]
fn bad_input_is_an_error_or_a_counted_skip_naming_file_and_line() {
    let env = Env::new("replay-bad");
    let search = logs(
        &env,
        SEARCH,
        "../scenarios/seed-002-incident.toml",
        "s002.ndjson",
    );
    let recs = logs(
        &env,
        RECS,
        "../scenarios/seed-000-recovery.toml",
        "recs.ndjson",
    );
    let policy = root(SEARCH);
    let replay = |extra: &[&str]| {
        let mut args = vec![
            "replay",
            &policy,
            "--logged-policy",
            &policy,
            "--now",
            DAY1_NOON,
        ];
        args.extend_from_slice(extra);
        env.run(&args)
    };
    // Two services mixed: an error naming both, and the flag that picks one.
    let both = ["--logs", search.to_str().unwrap(), recs.to_str().unwrap()];
    let r = replay(&both);
    assert_eq!(r.code, 2, "{}", r.stderr);
    for s in [
        "semantic-search",
        "recommendation-service",
        "--service",
        "s002.ndjson:1",
    ] {
        assert!(r.stderr.contains(s), "{s} in {}", r.stderr);
    }
    let mut picked = both.to_vec();
    picked.extend(["--service", "semantic-search"]);
    let r = replay(&picked);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("left out: "), "{}", r.stdout);

    // Two releases of one service mixed (the lines from line 11 on written by another
    // release): the same, naming both releases, where each first appears, and --release.
    let text: String = std::fs::read_to_string(&search)
        .unwrap()
        .lines()
        .enumerate()
        .map(|(i, l)| {
            let l = if i >= 10 {
                l.replace(
                    "\"policy_version\":\"simulate\"",
                    "\"policy_version\":\"r-000000000002\"",
                )
            } else {
                l.to_string()
            };
            l + "\n"
        })
        .collect();
    let mixed = env.write("mixed.ndjson", &text);
    let r = replay(&["--logs", mixed.to_str().unwrap()]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    for s in [
        "2 releases",
        "simulate (10 lines, first at ",
        "mixed.ndjson:1",
        "r-000000000002 (20 lines, first at ",
        "mixed.ndjson:11",
        "--release",
    ] {
        assert!(r.stderr.contains(s), "{s} in {}", r.stderr);
    }
    let r = replay(&[
        "--logs",
        mixed.to_str().unwrap(),
        "--release",
        "r-000000000002",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("20 requests"), "{}", r.stdout);
    let r = replay(&["--logs", mixed.to_str().unwrap(), "--release", "r-9"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("no line of release \"r-9\""),
        "{}",
        r.stderr
    );

    // Truncated and foreign lines: counted skips, each named with its line.
    let mut text = std::fs::read_to_string(&search).unwrap();
    text.insert_str(0, "{\"level\":\"info\",\"msg\":\"a foreign line\"}\n");
    let cut = text.len() - 40;
    text.truncate(cut);
    let damaged = env.write("damaged.ndjson", &text);
    let r = replay(&["--logs", damaged.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("skipped 2 records"), "{}", r.stdout);
    assert!(
        r.stdout
            .contains("damaged.ndjson:1: not a line of the edge's"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout
            .contains("damaged.ndjson:31: a line cut off (truncated JSON)"),
        "{}",
        r.stdout
    );

    // An empty file, a file of another format, a missing one: exit 2 naming it.
    let empty = env.write("empty.ndjson", "");
    let csv = env.write("logs.csv", "at,outcome\n1,live\n");
    for (path, says) in [
        (empty.to_str().unwrap().to_string(), "empty"),
        (csv.to_str().unwrap().to_string(), "logs.csv:1"),
        (
            env.p("missing.ndjson").to_str().unwrap().to_string(),
            "missing.ndjson",
        ),
    ] {
        let r = replay(&["--logs", &path]);
        assert_eq!(r.code, 2, "{path}: {}", r.stderr);
        assert!(r.stderr.contains(says), "{says} in {}", r.stderr);
        assert!(!r.stderr.contains("panicked"), "{}", r.stderr);
    }

    // An invalid candidate: exit 1.
    let bad = env.write("bad/policy.toml", "version = 1\n");
    let r = env.run(&[
        "replay",
        bad.to_str().unwrap(),
        "--logs",
        search.to_str().unwrap(),
        "--logged-policy",
        &root(SEARCH),
        "--now",
        DAY1_NOON,
    ]);
    assert_eq!(r.code, 1, "{}", r.stderr);
}

/// The semantic-search policy without its final net (the keyword tier): during an outage,
/// every request its query cache misses gets a no-tier 503.
fn without_final_net(env: &Env) -> PathBuf {
    let text = std::fs::read_to_string(root(SEARCH)).unwrap();
    let at = text.find("[[cascade.tiers]]\nname = \"keyword\"").unwrap();
    let end = text[at..].find("\n\n").map_or(text.len(), |e| at + e + 1);
    let text = format!("{}{}", &text[..at], &text[end..]).replacen(
        "[[cascade.tiers]]",
        "[cascade]\npromise = \"best_effort\"\n\n[[cascade.tiers]]",
        1,
    );
    let p = env.write("worse/semantic-search.toml", &text);
    for f in [
        "semantic-search.catalog.json",
        "semantic-search.inventory.json",
    ] {
        std::fs::copy(
            root(&format!("../policies/{f}")),
            env.p(&format!("worse/{f}")),
        )
        .unwrap();
    }
    p
}

#[test]
fn a_rollout_that_replays_worse_is_refused_and_recorded_and_diff_judges_the_same() {
    let env = Env::new("replay-rollout");
    env.ok(&[
        "releases",
        "add",
        &root(SEARCH),
        "--registry",
        "reg",
        "--edge",
        "edge",
        "--now",
        DAY1_NOON,
        "--promote",
    ]);
    let old = env.active();
    let worse = without_final_net(&env);
    env.ok(&[
        "releases",
        "add",
        worse.to_str().unwrap(),
        "--registry",
        "reg",
        "--edge",
        "edge",
        "--now",
        DAY1_NOON,
    ]);
    let new = env.releases().into_iter().find(|r| *r != old).unwrap();
    // 1,800 requests (the rollout's 1,200 answers a side, and more), the model down for 20 s.
    let scenario = env.write(
        "outage.toml",
        "name = \"outage\"\nstart = \"2026-11-30T12:00:00Z\"\nrate = 30\nrequests = 1800\n[params]\nq = [\"headphones\", \"keyboard\", \"backpack\"]\n[model]\nlatency = \"150ms\"\n[[model.phase]]\nfrom = \"20s\"\nto = \"40s\"\nfault = \"down\"\n",
    );
    let log = env.p("edge.ndjson");
    env.ok(&[
        "simulate",
        &root(SEARCH),
        "--scenario",
        scenario.to_str().unwrap(),
        "--logs",
        log.to_str().unwrap(),
    ]);
    // Written by the active release.
    let text = std::fs::read_to_string(&log).unwrap().replace(
        "\"policy_version\":\"simulate\"",
        &format!("\"policy_version\":\"{old}\""),
    );
    std::fs::write(&log, text).unwrap();
    let log = log.to_str().unwrap();

    let r = env.run(&[
        "releases",
        "rollout",
        &new,
        "--registry",
        "reg",
        "--replay",
        log,
    ]);
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains(&format!("{new} is worse")),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("no-tier 5xx share: new"), "{}", r.stdout);
    assert!(r.stdout.contains("is refused"), "{}", r.stdout);
    let rec: Value = serde_json::from_str(
        &std::fs::read_to_string(env.p(&format!("reg/rollouts/{new}.json"))).unwrap(),
    )
    .unwrap();
    assert_eq!(rec["state"]["phase"], "refused");
    assert_eq!(rec["replay"]["verdict"], "worse");
    assert_eq!(rec["replay"]["forced"], false);
    assert_eq!(rec["replay"]["logged_release"], old.as_str());
    // Nothing moved: the old release is still the active one; status shows the refusal.
    assert_eq!(env.active(), old);
    let s = env.ok(&["releases", "status", "--registry", "reg", "--id", &new]);
    assert!(
        s.stdout.contains("refused by the replay pre-flight"),
        "{}",
        s.stdout
    );

    // --force starts it anyway and its record says so; the refusal is kept beside it. (The
    // front refuses every deployment: the rollout stops at its first, after the record is
    // written — what this checks is the record.)
    let front = refusing_front(&old, &new);
    let forced = env.run(&[
        "releases",
        "rollout",
        &new,
        "--registry",
        "reg",
        "--replay",
        log,
        "--force",
        "--front",
        &front,
    ]);
    assert_eq!(forced.code, 2, "{}\n{}", forced.stdout, forced.stderr);
    assert!(
        forced
            .stdout
            .contains("--force: the rollout starts although it replays worse"),
        "{}\n{}",
        forced.stdout,
        forced.stderr
    );
    let rec: Value = serde_json::from_str(
        &std::fs::read_to_string(env.p(&format!("reg/rollouts/{new}.json"))).unwrap(),
    )
    .unwrap();
    assert_ne!(rec["state"]["phase"], "refused");
    assert_eq!(rec["replay"]["verdict"], "worse");
    assert_eq!(rec["replay"]["forced"], true);
    let kept: Vec<String> = std::fs::read_dir(env.p("reg/rollouts"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&format!("{new}.")) && n != &format!("{new}.json"))
        .collect();
    assert_eq!(kept.len(), 1, "the refusal kept beside: {kept:?}");
    let refused: Value = serde_json::from_str(
        &std::fs::read_to_string(env.p(&format!("reg/rollouts/{}", kept[0]))).unwrap(),
    )
    .unwrap();
    assert_eq!(refused["state"]["phase"], "refused");
    assert_eq!(env.active(), old);

    // The same judgement without rolling anything out.
    let d = env.ok(&[
        "releases",
        "diff",
        &old,
        &new,
        "--registry",
        "reg",
        "--replay",
        log,
    ]);
    assert!(
        d.stdout.contains(&format!("{new} is worse")),
        "{}",
        d.stdout
    );
    // The old release against itself is not worse.
    let same = env.ok(&[
        "releases",
        "diff",
        &old,
        &old,
        "--registry",
        "reg",
        "--replay",
        log,
    ]);
    assert!(
        same.stdout.contains(&format!("{old} is not worse")),
        "{}",
        same.stdout
    );
}

/// docs/replay.md's flag table names every flag of `understudy replay`, and no other.
#[test]
fn the_documented_flags_are_the_commands() {
    let out = std::process::Command::new(common::BIN)
        .args(["replay", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    let flags = |text: &str| -> std::collections::BTreeSet<String> {
        let mut v = std::collections::BTreeSet::new();
        for (at, _) in text.match_indices("--") {
            let name: String = text[at + 2..]
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '-')
                .collect();
            if name.len() > 1 && !["help", "color"].contains(&name.as_str()) {
                v.insert(name);
            }
        }
        v
    };
    let in_help: std::collections::BTreeSet<String> = help
        .lines()
        .filter(|l| l.trim_start().starts_with("--"))
        .flat_map(|l| flags(l.split_whitespace().next().unwrap_or("")))
        .collect();
    let doc = std::fs::read_to_string(root("../docs/replay.md")).unwrap();
    let table: String = doc
        .lines()
        .skip_while(|l| !l.starts_with("| flag |"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| l.split(" | ").next().unwrap_or("").to_string())
        .collect::<Vec<_>>()
        .join(" ");
    assert_eq!(flags(&table), in_help, "docs/replay.md's flag table");
}

/// A local front (scripts/rollout-front.mjs's control routes) serving `old` and `new` that
/// answers every deployment 500; its URL.
fn refusing_front(old: &str, new: &str) -> String {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let state = serde_json::json!({"worker": "svc", "old": old, "new": new, "new_percent": 0, "deployments": []})
        .to_string();
    std::thread::spawn(move || {
        for stream in listener.incoming().take(16) {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            let _ = reader.read_line(&mut line);
            let mut h = String::new();
            while reader.read_line(&mut h).is_ok_and(|n| n > 0) && !h.trim().is_empty() {
                h.clear();
            }
            let (status, body) = if line.starts_with("GET /__rollout/state") {
                ("200 OK", state.clone())
            } else {
                (
                    "500 Internal Server Error",
                    "{\"error\":\"refused\"}".to_string(),
                )
            };
            let _ = write!(
                stream,
                "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    url
}
