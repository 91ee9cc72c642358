//! Claims the docs make about the project itself, kept true: every ADR states its status, a
//! status cited elsewhere is the ADR's own, architecture.md lists every ADR; the lists the
//! reference pages give of what the code defines (breaker modes, the event log lines' fields,
//! alert names, what `simulate` answers an HTTP tier) are the code's; the commands beside
//! their figures name real flags and files; and no doc or code comment speaks of the work's
//! past sessions ("stop 31", "issue 13's fourth stop") — the docs say what is; the history is
//! in docs/history/ and the git log.

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

/// The names a `breaker_mode` can take — each breaker's vocabulary, and `UNKNOWN` where no
/// breaker answered — are the ones docs/observability.md's log line table gives.
#[test]
fn the_log_lines_breaker_modes_are_the_codes() {
    use understudy_core::breaker::{rate_name, Breaker, Mode};
    let doc = read("docs/observability.md");
    let row = doc
        .lines()
        .find(|l| l.starts_with("| `breaker_mode` |"))
        .expect("docs/observability.md's log line table has a `breaker_mode` row");
    let mut names = vec![understudy_core::engine::MODE_UNKNOWN];
    for mode in [Mode::Healthy, Mode::Open, Mode::Probing] {
        names.push(Breaker::Off.name(mode));
        names.push(rate_name(mode));
    }
    for name in names {
        assert!(
            row.contains(&format!("`{name}`")),
            "the `breaker_mode` row does not name `{name}`: {row}"
        );
    }
    let documented: Vec<&str> = row
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|w| w.chars().all(|c| c.is_ascii_uppercase() || c == '_'))
        .collect();
    for name in documented {
        assert!(
            name == understudy_core::engine::MODE_UNKNOWN || Mode::from_name(name).is_some(),
            "the `breaker_mode` row names `{name}`, which no breaker writes"
        );
    }
}

/// The keys of the first `json!({ … })` object after `fn NAME` in `source`, in order.
fn json_keys(source: &str, function: &str) -> Vec<String> {
    let at = source
        .find(&format!("fn {function}("))
        .unwrap_or_else(|| panic!("no `fn {function}`"));
    let body = &source[at..];
    let body = &body[body.find("json!({").expect("a json! object") + 7..];
    let body = &body[..body.find("})").expect("the object's end")];
    body.lines()
        .filter_map(|l| {
            let l = l.trim_start();
            let l = l
                .strip_prefix("serde_json::json!({")
                .unwrap_or(l)
                .trim_start();
            let rest = l.strip_prefix('"')?;
            let key = &rest[..rest.find('"')?];
            rest[key.len() + 1..]
                .trim_start()
                .starts_with(':')
                .then(|| key.to_string())
        })
        .collect()
}

/// The event log lines' fields in docs/events.md are the ones the code writes, in its order,
/// and the outcomes listed for a delivery are the verdicts' names.
#[test]
fn the_event_log_lines_are_the_documented_ones() {
    let doc = read("docs/events.md");
    let block = doc
        .split("<!-- event-lines -->")
        .nth(1)
        .and_then(|t| t.split("<!-- /event-lines -->").next())
        .expect("docs/events.md has an <!-- event-lines --> list");
    // One item per line kind: "- `NAME`, when: `field`, `field` (`value`, …), …".
    let items: Vec<String> = block
        .split("\n- ")
        .map(|i| i.replace('\n', " "))
        .filter(|i| i.contains('`'))
        .collect();
    let documented = |kind: &str| -> (Vec<String>, Vec<String>) {
        let item = items
            .iter()
            .find(|i| i.trim_start_matches("- ").starts_with(&format!("`{kind}`")))
            .unwrap_or_else(|| panic!("docs/events.md does not list the `{kind}` line"));
        let fields = &item[item.find(':').unwrap() + 1..];
        // Top-level fields: the first code span of each comma-separated part outside
        // parentheses; the spans inside parentheses are the field's values.
        let (mut names, mut values, mut depth, mut part_named) = (vec![], vec![], 0, false);
        let mut spans = fields.split('`');
        let mut outside = spans.next().unwrap_or("").to_string();
        while let Some(span) = spans.next() {
            for c in outside.chars() {
                match c {
                    '(' => depth += 1,
                    ')' => depth -= 1,
                    ',' | ';' if depth == 0 => part_named = false,
                    _ => {}
                }
            }
            if depth > 0 {
                values.push(span.to_string());
            } else if !part_named {
                names.push(span.to_string());
                part_named = true;
            }
            outside = spans.next().unwrap_or("").to_string();
        }
        (names, values)
    };
    let request = json_keys(&read("edge/core/src/events/flow/mod.rs"), "log_line");
    let delivery = json_keys(&read("edge/core/src/events/delivery.rs"), "log_line");
    for (kind, code) in [("events_request", request), ("event_delivery", delivery)] {
        assert_eq!(
            code.first().map(String::as_str),
            Some("event"),
            "{kind}: {code:?}"
        );
        let (names, values) = documented(kind);
        assert_eq!(names, code[1..], "docs/events.md's `{kind}` line");
        if kind == "event_delivery" {
            let src = read("edge/core/src/events/outbox/mod.rs");
            let name_fn = &src[src.find("impl Verdict").expect("impl Verdict")..];
            let name_fn = &name_fn[..name_fn.find("\n}\n").unwrap()];
            let verdicts: Vec<String> = name_fn
                .split("=> \"")
                .skip(1)
                .map(|s| s[..s.find('"').unwrap()].to_string())
                .collect();
            assert!(verdicts.len() >= 4, "the verdicts were read: {verdicts:?}");
            for v in &verdicts {
                assert!(
                    values.contains(v),
                    "docs/events.md's delivery outcomes lack `{v}`"
                );
            }
        }
    }
}

/// Every source file of the product (not tests, not docs).
fn sources() -> String {
    let mut all = Vec::new();
    for dir in ["edge", "compiler", "lab", "cli/src", "scripts"] {
        files(&root().join(dir), &mut all);
    }
    all.iter()
        .filter(|p| {
            let p = p.display().to_string();
            !p.ends_with(".md") && !p.contains("/tests")
        })
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every alert or code named `ALERT_…` or `EVENTS_…` in the docs is one the product writes,
/// and docs/events.md's alert table has a row for each alert the outbox raises.
#[test]
fn the_alerts_the_docs_name_are_the_codes() {
    let code = sources();
    let mut named = Vec::new();
    for (rel, text) in docs() {
        if rel.starts_with("docs/history/") {
            continue;
        }
        for prefix in ["ALERT_", "EVENTS_"] {
            for (at, _) in text.match_indices(prefix) {
                let b = text.as_bytes();
                if at > 0 && (b[at - 1].is_ascii_alphanumeric() || b[at - 1] == b'_') {
                    continue;
                }
                let name: String = text[at..]
                    .chars()
                    .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                    .collect();
                named.push((rel.clone(), name));
            }
        }
    }
    assert!(named.len() >= 10, "the alerts were found: {named:?}");
    for (rel, name) in &named {
        assert!(
            code.contains(&format!("\"{name}\"")) || code.contains(&format!("\"{name}:")),
            "{rel} names {name}, which no source file writes"
        );
    }
    let stats = read("edge/core/src/events/stats.rs");
    let raised: Vec<&str> = stats
        .split("name: \"")
        .skip(1)
        .map(|s| &s[..s.find('"').unwrap()])
        .collect();
    let doc = read("docs/events.md");
    let table: Vec<&str> = doc
        .lines()
        .skip_while(|l| !l.starts_with("| alert |"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .filter_map(|l| l.split('`').nth(1))
        .collect();
    assert_eq!(table, raised, "docs/events.md's alert table");
}

/// What `simulate` answers for an HTTP tier, as docs/scenarios.md and ADR 010 quote it, is
/// what the simulator writes.
#[test]
fn the_docs_quote_what_simulate_answers_an_http_tier() {
    let simulate = {
        let mut all = Vec::new();
        files(&root().join("compiler/src/simulate"), &mut all);
        all.iter()
            .filter_map(|p| std::fs::read_to_string(p).ok())
            .collect::<Vec<_>>()
            .join("\n")
    };
    let message = "simulated: HTTP tiers are not modelled";
    assert!(
        simulate.contains(&format!("\"{message}\"")),
        "compiler/src/simulate no longer answers an HTTP tier with `{message}`: \
         docs/scenarios.md and ADR 010 say it does"
    );
    for rel in ["docs/scenarios.md", "docs/adr/010-the-engine-owns-time.md"] {
        let text = read(rel).replace('\n', " ");
        assert!(
            text.contains(&format!("`{message}`")) && text.contains("connect error"),
            "{rel} does not say that simulate answers an HTTP tier with a connect error"
        );
    }
}

/// Every `understudy …` command the reference pages give beside a figure or an alert runs
/// as written: its subcommand exists, `--help` lists each of its flags, and the policies
/// and scenarios it names are in the repository.
#[test]
fn the_reference_pages_commands_name_real_flags_and_files() {
    let mut checked = 0;
    for rel in ["docs/observability.md", "docs/events.md", "docs/bench.md"] {
        for command in commands(&read(rel)) {
            let words: Vec<&str> = command.split_whitespace().skip(1).collect();
            let sub: Vec<&str> = words
                .iter()
                .take_while(|w| {
                    !w.starts_with('-') && w.chars().all(|c| c.is_ascii_lowercase() || c == '-')
                })
                .copied()
                .collect();
            let out = std::process::Command::new(env!("CARGO_BIN_EXE_understudy"))
                .args(&sub)
                .arg("--help")
                .output()
                .unwrap();
            let help = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success(),
                "{rel}: `understudy {}` is no command",
                sub.join(" ")
            );
            for w in &words[sub.len()..] {
                if w.starts_with("--") {
                    let flag = w.split('=').next().unwrap();
                    assert!(
                        help.contains(&format!("{flag} "))
                            || help.contains(&format!("{flag}\n"))
                            || help.contains(&format!("{flag}="))
                            || help.contains(&format!("{flag},")),
                        "{rel}: `{command}`: `understudy {} --help` has no {flag}",
                        sub.join(" ")
                    );
                } else if w.starts_with("policies/") || w.starts_with("scenarios/") {
                    assert!(root().join(w).is_file(), "{rel}: `{command}`: no file {w}");
                }
            }
            if std::env::var_os("PRINT_COMMANDS").is_some() {
                println!("{rel}: {command}");
            }
            checked += 1;
        }
    }
    assert!(checked >= 5, "the commands were found ({checked})");
}

/// The `understudy` command lines of a Markdown page: inline code spans (wrapped across lines
/// or not) and lines of code blocks, continuation lines joined.
fn commands(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut fenced = false;
    let mut pending = String::new();
    let mut prose = String::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        let code = fenced || line.starts_with("    ");
        if !code {
            prose.push_str(line);
            prose.push(' ');
            continue;
        }
        pending.push_str(line.trim());
        if let Some(p) = pending.strip_suffix('\\') {
            pending = format!("{} ", p.trim_end());
            continue;
        }
        out.extend(command_in(&pending));
        pending.clear();
    }
    for span in prose.split('`').skip(1).step_by(2) {
        out.extend(command_in(span));
    }
    out.sort();
    out.dedup();
    out
}

/// The `understudy …` command in a line of code (after `target/release/` or not), up to a
/// pipe, a redirection or a comment.
fn command_in(line: &str) -> Option<String> {
    let line = line.trim();
    let at = line.find("understudy ")?;
    let before = &line[..at];
    if !(before.is_empty() || before.ends_with("target/release/") || before.ends_with("&& ")) {
        return None;
    }
    let cmd = line[at..]
        .split(['|', '>', '#', ';'])
        .next()
        .unwrap_or("")
        .trim()
        .to_string();
    let second = cmd.split_whitespace().nth(1)?;
    (!second.starts_with('-') && second.chars().all(|c| c.is_ascii_lowercase() || c == '-'))
        .then_some(cmd)
}
