//! One exit-code mechanism across commands (issue 10): 0 ok (warnings allowed), 1 invalid
//! input, 2 usage or I/O — the README's table, command by command. Where a row names a
//! command, the binary is run into that row and must exit with the code the README gives
//! (issue 23: the table said 2 was usage or I/O while `releases verify` exited 2 on a
//! damaged registry).

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn understudy(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_understudy"))
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .unwrap()
}

fn code(args: &[&str]) -> i32 {
    understudy(args).status.code().unwrap_or(-1)
}

/// The code of the README's exit-code row whose `column` (1: commands, 2: meaning) contains
/// `text`; exactly one row must.
fn documented(column: usize, text: &str) -> i32 {
    let readme = std::fs::read_to_string("../README.md").unwrap();
    let section = readme.split("### Exit codes").nth(1).unwrap();
    let rows: Vec<Vec<String>> = section
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .skip(2)
        .map(|l| {
            l.split(" | ")
                .map(|c| c.trim_matches(['|', ' ']).to_string())
                .collect()
        })
        .collect();
    let found: Vec<&Vec<String>> = rows.iter().filter(|r| r[column].contains(text)).collect();
    assert_eq!(
        found.len(),
        1,
        "README exit-code rows with {text:?}: {found:?}"
    );
    found[0][0].parse().unwrap()
}

const NOW: &str = "2026-11-30T12:00:00Z";
const FIXTURES: &str = "../compiler/tests/fixtures/invalid";

#[test]
fn check_exits_0_1_2() {
    let valid = "../policies/semantic-search.toml";
    assert_eq!(
        code(&["check", valid, "--now", NOW]),
        0,
        "valid, with a warning"
    );
    assert_eq!(
        code(&["check", valid, "--now", NOW, "--deny-warnings"]),
        1,
        "warnings denied"
    );
    let invalid = format!("{FIXTURES}/ERR_BUDGET_EXCEEDED.toml");
    assert_eq!(code(&["check", &invalid, "--now", NOW]), 1);
    assert_eq!(code(&["check", "no-such-policy.toml"]), 2, "I/O");
    assert_eq!(code(&["check", "--no-such-flag", valid]), 2, "usage");
    assert_eq!(code(&["check", "/", "--now", NOW]), 2, "a directory");
}

/// Issue 10: a missing file exited 1 in `check` but 2 in `build`.
#[test]
fn build_exits_like_check() {
    assert_eq!(
        code(&["build", "no-such-policy.toml", "--out", "/nonexistent/x"]),
        2
    );
    let invalid = format!("{FIXTURES}/ERR_BUDGET_EXCEEDED.toml");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("dist");
    let out = out.to_str().unwrap();
    assert_eq!(code(&["build", &invalid, "--now", NOW, "--out", out]), 1);
    assert!(!Path::new(out).exists(), "nothing was built");
    let warned = format!("{FIXTURES}/WARN_UNENFORCEABLE_SETTING.toml");
    let o = understudy(&[
        "build",
        &warned,
        "--now",
        NOW,
        "--out",
        out,
        "--deny-warnings",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("warnings denied"));
}

#[test]
fn explain_exits_2_on_an_unknown_code() {
    assert_eq!(code(&["explain", "ERR_BUDGET_EXCEEDED"]), 0);
    assert_eq!(code(&["explain", "ERR_NO_SUCH_CODE"]), 2);
    assert_eq!(documented(2, "unknown code for `explain`"), 2);
}

/// Issue 23: `releases verify` and `repair` exit 2 on a damaged registry, as the README's
/// row for them says (it once said 2 meant a usage error or an unreadable file only).
#[test]
fn a_damaged_registry_exits_as_the_readme_says() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("releases")).unwrap();
    // ACTIVE names no release, and there is no history to tell which one was active.
    std::fs::write(dir.path().join("ACTIVE"), "0123456789ab\n").unwrap();
    let reg = dir.path().to_str().unwrap();
    let verify = understudy(&["releases", "verify", "--registry", reg]);
    assert_eq!(
        verify.status.code(),
        Some(documented(1, "`releases verify`")),
        "{}",
        String::from_utf8_lossy(&verify.stdout)
    );
    assert!(String::from_utf8_lossy(&verify.stdout).contains("ACTIVE"));
    let repair = understudy(&["releases", "repair", "--registry", reg]);
    assert_eq!(
        repair.status.code(),
        Some(documented(1, "`releases repair`")),
        "{}",
        String::from_utf8_lossy(&repair.stdout)
    );
    assert_eq!(documented(1, "`releases verify`"), 2);
}

/// Issue 10: `check` hung forever when a catalog path was a FIFO.
#[cfg(unix)]
#[test]
fn a_fifo_is_refused_at_once_not_read() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("policy.toml");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let started = Instant::now();
    let o = understudy(&["check", fifo.to_str().unwrap()]);
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stdout).contains("FIFO"));

    // As a catalog named by a policy: refused (exit 1, the policy names a bad file).
    let text = std::fs::read_to_string("../compiler/tests/fixtures/base.toml")
        .unwrap()
        .replace("stubs = \"catalog.json\"", "stubs = \"pipe.json\"");
    std::fs::write(dir.path().join("p.toml"), text).unwrap();
    std::fs::copy(
        format!("{FIXTURES}/good-inventory.json"),
        dir.path().join("good-inventory.json"),
    )
    .unwrap();
    assert!(Command::new("mkfifo")
        .arg(dir.path().join("pipe.json"))
        .status()
        .unwrap()
        .success());
    let started = Instant::now();
    let o = understudy(&[
        "check",
        dir.path().join("p.toml").to_str().unwrap(),
        "--now",
        NOW,
    ]);
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(o.status.code(), Some(1));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("ERR_CATALOG_UNREADABLE") && text.contains("FIFO"),
        "{text}"
    );
}

#[test]
fn colour_follows_the_flag_and_no_color() {
    let invalid = format!("{FIXTURES}/ERR_BUDGET_EXCEEDED.toml");
    let always = understudy(&["check", &invalid, "--now", NOW, "--color", "always"]);
    assert!(String::from_utf8_lossy(&always.stdout).contains("\u{1b}["));
    // Not a terminal: `auto` is plain.
    let auto = understudy(&["check", &invalid, "--now", NOW]);
    assert!(!String::from_utf8_lossy(&auto.stdout).contains("\u{1b}["));
    let never = understudy(&["check", &invalid, "--now", NOW, "--color", "never"]);
    assert!(!String::from_utf8_lossy(&never.stdout).contains("\u{1b}["));
}
