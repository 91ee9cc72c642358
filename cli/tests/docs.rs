//! Claims the docs make about the project itself, kept true: every ADR states its status, a
//! status cited elsewhere is the ADR's own, architecture.md lists every ADR, and no doc or
//! code comment speaks of the work's past sessions ("stop 31", "issue 13's fourth stop") —
//! the docs say what is; the history is in docs/history/ and the git log.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(rel: &str) -> String {
    let p = root().join(rel);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The ADRs: (number, file name, status word in lower case).
fn adrs() -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(root().join("docs/adr")).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().to_string();
        if !name.ends_with(".md") {
            continue;
        }
        let text = read(&format!("docs/adr/{name}"));
        let status = text
            .split("\n## Status\n")
            .nth(1)
            .and_then(|t| t.split_whitespace().next())
            .unwrap_or_else(|| panic!("docs/adr/{name} has no `## Status` section"))
            .trim_matches(|c: char| !c.is_alphabetic())
            .to_lowercase();
        assert!(
            [
                "accepted",
                "proposed",
                "superseded",
                "rejected",
                "deprecated"
            ]
            .contains(&status.as_str()),
            "docs/adr/{name}: its status starts with `{status}`"
        );
        out.push((name[..3].to_string(), name, status));
    }
    out.sort();
    assert!(out.len() >= 14, "the ADRs were read: {out:?}");
    out
}

#[test]
fn every_adr_states_its_status_and_architecture_lists_it() {
    let arch = read("docs/architecture.md");
    for (n, name, _) in adrs() {
        assert!(
            arch.contains(&format!("](adr/{name})")),
            "docs/architecture.md does not list ADR {n} ({name})"
        );
    }
}

/// Where a doc gives an ADR's status beside its name — architecture.md's "(accepted, …)",
/// or "ADR 012 (proposed)" anywhere — it is the status the ADR states.
#[test]
fn an_adr_status_cited_elsewhere_is_the_adrs_own() {
    const WORDS: [&str; 5] = [
        "accepted",
        "proposed",
        "superseded",
        "rejected",
        "deprecated",
    ];
    let adrs = adrs();
    let status_of = |n: &str| adrs.iter().find(|a| a.0 == n).map(|a| a.2.clone());
    let mut checked = 0;
    for (rel, text) in docs() {
        if rel.starts_with("docs/adr/") || rel.starts_with("docs/history/") {
            continue; // an ADR may tell its own past; history is as it was
        }
        for (at, _) in text.match_indices("ADR ") {
            let rest = &text[at + 4..];
            let n: String = rest.chars().take_while(char::is_ascii_digit).collect();
            if n.len() != 3 {
                continue;
            }
            // The ADR's name as cited: up to the end of its link text, or the line.
            let cited = rest.split(['\n', ']']).next().unwrap_or("").to_lowercase();
            let Some(paren) = cited.rfind('(') else {
                continue;
            };
            let word: String = cited[paren + 1..]
                .chars()
                .take_while(|c| c.is_alphabetic())
                .collect();
            if !WORDS.contains(&word.as_str()) {
                continue;
            }
            let own = status_of(&n)
                .unwrap_or_else(|| panic!("{rel} cites ADR {n}, which does not exist"));
            assert_eq!(
                word, own,
                "{rel} cites ADR {n} as {word}; the ADR says {own}"
            );
            checked += 1;
        }
    }
    assert!(checked >= 3, "the cited statuses were found ({checked})");
}

/// Every Markdown file of the docs and the repository's root, with its path.
fn docs() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for dir in ["", "docs", "docs/adr", "docs/history"] {
        let Ok(entries) = std::fs::read_dir(root().join(dir)) else {
            continue;
        };
        for e in entries {
            let name = e.unwrap().file_name().to_string_lossy().to_string();
            if name.ends_with(".md") {
                let rel = if dir.is_empty() {
                    name
                } else {
                    format!("{dir}/{name}")
                };
                let text = read(&rel);
                out.push((rel, text));
            }
        }
    }
    out
}

/// Every source and doc file the repository keeps (not dependencies, not build output).
fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let path = e.path();
        let name = e.file_name().to_string_lossy().to_string();
        if e.file_type().unwrap().is_dir() {
            if !name.starts_with('.')
                && !["node_modules", "target", "build", "dist"].contains(&name.as_str())
            {
                files(&path, out);
            }
        } else if [".md", ".rs", ".mjs", ".js", ".sh", ".toml"]
            .iter()
            .any(|ext| name.ends_with(ext))
        {
            out.push(path);
        }
    }
}

/// "stop 31", "stops 26–28", "issue 13's fourth stop", "this stop", "last stop": the way the
/// work's sessions were once named. A stop in the product's sense ("the alarm run's 5 s
/// stop", "a 100 ms stop of the runtime", "stops answering") is not one.
fn session_stop(line: &str) -> Option<String> {
    let l = line.to_lowercase();
    let words: Vec<&str> = l
        .split(|c: char| !(c.is_alphanumeric() || c == '\''))
        .filter(|w| !w.is_empty())
        .collect();
    for (i, w) in words.iter().enumerate() {
        let possessive = w.ends_with("'s"); // "the stop's 15 ms": a stop of the runtime
        let w = w.trim_end_matches("'s");
        if w != "stop" && w != "stops" {
            continue;
        }
        let next = words
            .get(i + 1)
            .copied()
            .unwrap_or("")
            .trim_end_matches("'s");
        let after = words.get(i + 2).copied().unwrap_or("");
        let numbered = !possessive
            && next.chars().all(|c| c.is_ascii_digit())
            && !next.is_empty()
            && !["ms", "s", "seconds", "minutes", "h"].contains(&after);
        let before = if i > 0 { words[i - 1] } else { "" };
        let article = if i > 1 { words[i - 2] } else { "" };
        // "issue 13's fourth stop", "this stop" — not "a second stop", "first stops answering".
        let ordinal = w == "stop"
            && !["a", "an"].contains(&article)
            && [
                "first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth",
                "ninth", "tenth", "this", "last", "next", "previous", "earlier",
            ]
            .contains(&before);
        if numbered || ordinal {
            return Some(line.trim().to_string());
        }
    }
    None
}

#[test]
fn no_file_speaks_of_the_works_stops() {
    let mut all = Vec::new();
    files(&root(), &mut all);
    assert!(
        all.len() > 100,
        "the repository was read ({} files)",
        all.len()
    );
    let mut found = Vec::new();
    for path in all {
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let rel = path
            .strip_prefix(root())
            .unwrap_or(&path)
            .display()
            .to_string();
        if rel.ends_with("cli/tests/docs.rs") {
            continue; // this file names what it looks for
        }
        for (n, line) in text.lines().enumerate() {
            if let Some(l) = session_stop(line) {
                found.push(format!("{rel}:{}: {l}", n + 1));
            }
        }
    }
    assert!(
        found.is_empty(),
        "speaks of the work's stops:\n{}",
        found.join("\n")
    );
}

#[test]
fn a_stop_in_the_products_sense_is_not_a_session() {
    assert!(session_stop("issue 13, fourth stop").is_some());
    assert!(session_stop("measured in stop 31 (runs 16–21)").is_some());
    assert!(session_stop("Before this stop the edge").is_some());
    assert!(session_stop("issue 13's seventh stop").is_some());
    assert!(session_stop("Stop 33's CI failed").is_some());
    assert!(session_stop("the alarm run's 5 s stop").is_none());
    assert!(session_stop("a stop 150 ms long").is_none());
    assert!(session_stop("the edge stops answering from them").is_none());
    assert!(session_stop("stop the edge's runtime 4.2 s after").is_none());
    assert!(session_stop("re-opened on two misses a second stop covers").is_none());
    assert!(session_stop("The host's 50 ms with the stop's 15 (overlapping 5)").is_none());
    assert!(session_stop("when the edge first stops answering").is_none());
}

/// docs/bench.md's flag table names every flag of `understudy bench --help` but the ones
/// every command has (`--format`, `--color`, `--help`), and no other.
#[test]
fn the_bench_flag_table_is_bench_help() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_understudy"))
        .args(["bench", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    let flags = |text: &str| -> Vec<String> {
        let mut f: Vec<String> = text
            .match_indices("--")
            .map(|(at, _)| {
                text[at..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                    .collect::<String>()
            })
            .filter(|f| {
                f.chars().nth(2).is_some_and(|c| c.is_ascii_alphabetic())
                    && !["--format", "--color", "--help"].contains(&f.as_str())
            })
            .collect();
        f.sort();
        f.dedup();
        f
    };
    let mut in_help: Vec<String> = help
        .lines()
        .filter(|l| l.trim_start().starts_with("--") || l.trim_start().starts_with("-h"))
        .flat_map(|l| flags(l.split_whitespace().next().unwrap_or("")))
        .collect();
    in_help.sort();
    let doc = read("docs/bench.md");
    let table: String = doc
        .lines()
        .skip_while(|l| !l.starts_with("| flag |"))
        .take_while(|l| l.starts_with('|'))
        .map(|l| l.split(" | ").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(in_help.len() >= 8, "bench --help was read: {in_help:?}");
    assert_eq!(flags(&table), in_help, "docs/bench.md's flag table");
}
