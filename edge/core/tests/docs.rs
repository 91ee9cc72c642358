//! Where the docs list what the code defines, they must agree: the outcome table
//! (docs/outcomes.md), the log line's outcomes and the status endpoint's counters
//! (docs/observability.md) and the README's reason list. The code's lists are generated
//! from the enums (`classes!`, `reasons!`, `outcomes!`), so a new class, reason or outcome
//! without its documentation fails here.

use std::path::Path;

use understudy_core::classify::{Class, FailureReason};
use understudy_core::metrics::Outcome;

fn doc(rel: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(rel);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Rows of the first Markdown table whose header starts with `| first |`: cells trimmed,
/// backticks removed.
fn table(text: &str, first: &str) -> Vec<Vec<String>> {
    let head = format!("| {first} |");
    let mut rows = Vec::new();
    let mut lines = text.lines().skip_while(|l| !l.starts_with(&head));
    lines.next(); // header
    lines.next(); // |---|
    for l in lines.take_while(|l| l.starts_with('|')) {
        rows.push(
            l.trim_matches('|')
                .split(" | ")
                .map(|c| unquote(c.trim()).to_string())
                .collect(),
        );
    }
    rows
}

/// A cell that is one code span loses its backticks; other cells stay as written.
fn unquote(cell: &str) -> &str {
    match cell.strip_prefix('`').and_then(|c| c.strip_suffix('`')) {
        Some(inner) if !inner.contains('`') => inner,
        _ => cell,
    }
}

#[test]
fn the_outcome_table_is_the_classification() {
    let text = doc("docs/outcomes.md");
    let rows = table(&text, "reason");
    let documented: Vec<(String, String, String)> = rows
        .iter()
        .map(|r| (r[0].clone(), r[1].clone(), r[2].clone()))
        .collect();
    let code: Vec<(String, String, String)> = FailureReason::ALL
        .iter()
        .map(|r| {
            (
                r.code().to_string(),
                r.class().as_str().to_string(),
                r.source().to_string(),
            )
        })
        .collect();
    assert_eq!(documented, code, "docs/outcomes.md ## Reasons");
    let classes: Vec<String> = table(&text, "class").iter().map(|r| r[0].clone()).collect();
    let code: Vec<&str> = Class::ALL.iter().map(|c| c.as_str()).collect();
    assert_eq!(classes, code, "docs/outcomes.md ## Classes");
}

#[test]
fn the_log_outcomes_are_the_metrics_outcomes() {
    let text = doc("docs/observability.md");
    let block = text
        .split("<!-- outcomes -->")
        .nth(1)
        .and_then(|t| t.split("<!-- /outcomes -->").next())
        .expect("docs/observability.md has an <!-- outcomes --> block");
    let documented: Vec<String> = table(block, "outcome")
        .iter()
        .map(|r| r[0].clone())
        .collect();
    assert_eq!(documented, Outcome::NAMES);
}

#[test]
fn the_readme_lists_every_reason() {
    let text = doc("README.md");
    let block = text
        .split("<!-- reasons -->")
        .nth(1)
        .and_then(|t| t.split("<!-- /reasons -->").next())
        .expect("README.md has a <!-- reasons --> list");
    let listed: Vec<&str> = block
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
        .collect();
    let code: Vec<&str> = FailureReason::ALL.iter().map(|r| r.code()).collect();
    assert_eq!(listed, code);
}

#[test]
fn the_documented_counters_are_the_status_endpoints() {
    let text = doc("docs/observability.md");
    let section = text
        .split("## Counters and the admin status endpoint")
        .nth(1)
        .and_then(|t| t.trim_start().split("\n\n").next())
        .expect("docs/observability.md has its counters paragraph");
    let counters = serde_json::to_value(understudy_core::metrics::Counters::default()).unwrap();
    let code: Vec<String> = counters.as_object().unwrap().keys().cloned().collect();
    for name in &code {
        assert!(
            section.contains(&format!("`{name}`")),
            "docs/observability.md does not list the counter `{name}`"
        );
    }
}

/// The variants of `pub enum NAME` in `source` (one per line, as rustfmt writes them).
fn variants(source: &str, name: &str) -> Vec<String> {
    let start = source
        .find(&format!("pub enum {name}"))
        .unwrap_or_else(|| panic!("no `pub enum {name}`"));
    let body = &source[start..];
    let body = &body[body.find('{').expect("enum body") + 1..];
    let mut depth = 0usize;
    let mut out = Vec::new();
    for line in body.lines() {
        let t = line.trim();
        if depth == 0 {
            if t.starts_with('}') {
                break;
            }
            if t.chars().next().is_some_and(|c| c.is_ascii_uppercase()) {
                let name: String = t
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                out.push(name);
            }
        }
        depth += t.matches(['{', '(']).count();
        depth = depth.saturating_sub(t.matches(['}', ')']).count());
    }
    out
}

/// ADR 010's command table names every command and every I/O kind the code declares: a
/// new one without its row (what the driver does, what it reports) fails here.
#[test]
fn the_adr_command_table_names_every_command_and_io_kind() {
    let adr = doc("docs/adr/010-the-engine-owns-time.md");
    let table: String = adr
        .lines()
        .skip_while(|l| !l.starts_with("| Command |"))
        .take_while(|l| l.starts_with('|'))
        .map(|l| l.split(" | ").next().unwrap_or("").to_string())
        .collect::<Vec<_>>()
        .join("\n");
    assert!(!table.is_empty(), "ADR 010 has its command table");
    let src = |p: &str| doc(p);
    let mut names: Vec<String> = Vec::new();
    for c in variants(&src("edge/core/src/engine/command.rs"), "Command") {
        names.push(format!("`{c}"));
    }
    for op in variants(&src("edge/core/src/io.rs"), "Op") {
        names.push(format!("Op::{op}"));
    }
    for io in variants(&src("edge/core/src/events/flow/mod.rs"), "Io") {
        names.push(format!("Io::{io}"));
    }
    assert!(names.len() >= 9, "the enums were read: {names:?}");
    for n in &names {
        assert!(
            table.contains(n.as_str()),
            "ADR 010's command table does not name {n}"
        );
    }
    // And names nothing the code no longer has: every row is a command of the enum (or the
    // `wake_at` every output carries), every `Op::`/`Io::` it names is declared.
    for row in table.lines().skip(2) {
        let cell = row.trim_start_matches('|').trim();
        if cell.starts_with("(every output)") {
            continue;
        }
        let command: String = cell
            .trim_start_matches('`')
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect();
        assert!(
            names.contains(&format!("`{command}")),
            "ADR 010's command table has a row for `{command}`, which `Command` does not declare"
        );
        for kind in ["Op::", "Io::"] {
            for (at, _) in cell.match_indices(kind) {
                let name: String = cell[at..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == ':')
                    .collect();
                assert!(
                    names.contains(&name),
                    "ADR 010's command table names {name}, which the code does not declare"
                );
            }
        }
    }
}

/// docs/observability.md's field table names every key of the log line, in the order the
/// line writes them, and each `calls` and `tiers` entry's keys in its row.
#[test]
fn the_log_line_fields_are_the_documented_ones() {
    use understudy_core::correlation::Provenance;
    use understudy_core::engine::calls::{Call, End};
    use understudy_core::engine::report::Line;
    use understudy_core::engine::IoId;
    use understudy_core::tier::{Consult, Read};
    use understudy_core::Millis;

    let tiers = [Consult {
        tier: "user".into(),
        started: Millis(45),
        ended: Millis(47),
        read: Read::Hit,
        age_ms: Some(1),
    }];
    let calls = [Call {
        io: IoId(1),
        started: Millis(0),
        due: Millis(45),
        hedge: false,
        probe: false,
        end: Some((Millis(45), End::Cut { busy: false })),
    }];
    let line = Line {
        correlation_id: "c",
        provenance: Provenance::Minted,
        trace_id: "t",
        at: Millis(0),
        outcome: "fallback",
        status: 200,
        tier: Some("user"),
        reason: None,
        class: None,
        notes: &[],
        tiers: &tiers,
        attempts: 1,
        calls: &calls,
        latency_ms: 47,
        origin_override: false,
        policy_version: "r",
        breaker_mode: "CLOSED",
        service: "s",
        isolate: "i",
    };
    let json = line.to_json();
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let text = doc("docs/observability.md");
    let rows = table(&text, "field");
    let documented: Vec<&str> = rows.iter().map(|r| r[0].as_str()).collect();
    assert_eq!(
        documented,
        keys_in_order(&json),
        "docs/observability.md's log line table"
    );
    for field in ["calls", "tiers"] {
        let entry = v[field][0].to_string();
        let row = rows.iter().find(|r| r[0] == field).unwrap();
        let written: Vec<&str> = v[field][0]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        let listed = format!(
            "`{{{}}}`",
            keys_in_order(&entry_in_line(&json, field)).join(", ")
        );
        assert!(
            row[2].contains(&listed),
            "the `{field}` row lacks {listed}: {}",
            row[2]
        );
        assert_eq!(written.len(), keys_in_order(&entry).len());
    }
}

/// The top-level keys of a compact JSON object, in the order written.
fn keys_in_order(json: &str) -> Vec<&str> {
    let b = json.as_bytes();
    let (mut depth, mut in_str, mut esc, mut start) = (0usize, false, false, None);
    let mut keys = Vec::new();
    let mut expect_key = false;
    for (i, &c) in b.iter().enumerate() {
        if in_str {
            if esc {
                esc = false;
            } else if c == b'\\' {
                esc = true;
            } else if c == b'"' {
                in_str = false;
                if let Some(s) = start.take() {
                    keys.push(&json[s..i]);
                }
            }
            continue;
        }
        match c {
            b'"' => {
                in_str = true;
                if depth == 1 && expect_key {
                    start = Some(i + 1);
                    expect_key = false;
                }
            }
            b'{' | b'[' => {
                depth += 1;
                expect_key = depth == 1;
            }
            b'}' | b']' => depth -= 1,
            b',' if depth == 1 => expect_key = true,
            _ => {}
        }
    }
    keys
}

/// The first entry of array `field` in the line, as written.
fn entry_in_line(json: &str, field: &str) -> String {
    let at = json.find(&format!("\"{field}\":[{{")).unwrap() + field.len() + 4;
    let end = json[at..].find('}').unwrap();
    json[at..=at + end].to_string()
}
