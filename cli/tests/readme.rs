//! The README's walkthrough works on any day: its `understudy check` lines run as written.

use std::process::Command;

#[test]
fn the_readme_check_commands_pass_as_written() {
    let readme = std::fs::read_to_string("../README.md").unwrap();
    let lines: Vec<&str> = readme
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("understudy check policies/"))
        .collect();
    assert!(!lines.is_empty(), "the README shows a check command");
    for line in lines {
        let args: Vec<&str> = line.split_whitespace().skip(1).collect();
        let out = Command::new(env!("CARGO_BIN_EXE_understudy"))
            .args(&args)
            .current_dir("..")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "`{line}` failed:\n{}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
}
