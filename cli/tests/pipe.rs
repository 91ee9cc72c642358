//! A reader that stops reading (`understudy releases status | head`) ends the command
//! quietly: no panic, no error, exit 0 — whether the command prints with `println!` or
//! writes with `?`.

use std::process::{Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_understudy");

/// Runs `args` with standard output a pipe whose reader is already closed: every write
/// to it fails with EPIPE, deterministically.
fn closed_stdout(dir: &std::path::Path, args: &[&str]) -> (Option<i32>, String) {
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    let out = Command::new(BIN)
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::from(writer))
        .stderr(Stdio::piped())
        .output()
        .expect("run understudy");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

/// `releases status` wrote with `?` and exited 2 with `error: Broken pipe (os error 32)`;
/// `explain --all` prints with `println!`, whose panic would exit 101.
#[test]
fn a_closed_stdout_ends_every_command_quietly() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("reg/releases")).unwrap();
    for args in [
        &["releases", "status", "--registry", "reg"][..],
        &[
            "releases",
            "status",
            "--registry",
            "reg",
            "--format",
            "json",
        ],
        &["releases", "list", "--registry", "reg"],
        &["explain", "--all"],
        &["schema"],
    ] {
        let (code, stderr) = closed_stdout(dir.path(), args);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert!(!stderr.contains("Broken pipe"), "{args:?}: {stderr}");
        assert_eq!(code, Some(0), "{args:?}: {stderr}");
    }
    // A real error is still reported when stdout is closed.
    let (code, stderr) = closed_stdout(dir.path(), &["releases", "status", "--registry", "none"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("not a release registry"), "{stderr}");
}
