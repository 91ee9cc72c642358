//! The engine owns time (docs/adr/010-the-engine-owns-time.md): the drivers perform, and
//! decide no timing. In the Worker's Rust (`edge/worker/src`), the only race against a timer
//! is `shim::within`, whose outcome each caller hands to a decision in `edge/core`
//! (`events::attempt::ended` for a delivery attempt, a watch's hold for the coordinator);
//! the alarm run's budget (`events::outbox::run`) and the eviction of waiting requests
//! (`parked`) are decided there too, as is when the coordinator writes its snapshot
//! (`Snapshot::due`). A `select` with a sleep, a `Delay` or a clock comparison against a
//! constant written in the driver fails this test. (JavaScript inlined in a Rust file is
//! io.js's business: ADR 010 names the rules still written there.)

use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("edge/worker/src") {
        let p = e.expect("entry").path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Each line of the Worker's Rust that races or waits on a timer, outside `shim::within`.
fn timing_outside_the_primitive(root: &Path) -> Vec<String> {
    let mut files = Vec::new();
    rust_files(&root.join("edge/worker/src"), &mut files);
    let mut found = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).expect("source");
        let name = f.strip_prefix(root).unwrap_or(&f).display().to_string();
        let mut in_within = false;
        let mut in_js = false;
        for (i, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            // JavaScript inlined for wasm-bindgen (`inline_js = r#"…"#`): its rules are
            // io.js's, named in ADR 010.
            if code.contains("inline_js = r#\"") {
                in_js = true;
            }
            if in_js {
                in_js = !line.contains("\"#)]");
                continue;
            }
            if code.trim_start().starts_with("use ") {
                continue;
            }
            if name.ends_with("shim.rs") && code.contains("pub async fn within") {
                in_within = true;
            } else if in_within && line.starts_with('}') {
                in_within = false;
                continue;
            }
            if in_within {
                continue;
            }
            let races = ["Delay", "sleep(", "setTimeout", "Promise.race"];
            // `future::select(…)`, not a function of ours named `select` (`outbox::select`).
            let selects = code
                .match_indices("select(")
                .any(|(at, _)| !code[..at].ends_with("::") || code[..at].ends_with("future::"));
            // A budget or overdue rule written in the driver: `now.since(…) > CONST`.
            let compares =
                code.contains(".since(") && (code.contains(" > ") || code.contains(" >= "));
            if races.iter().any(|r| code.contains(r)) || selects || compares {
                found.push(format!("{name}:{}: {}", i + 1, line.trim()));
            }
        }
    }
    found
}

#[test]
fn the_workers_rust_races_a_timer_only_through_its_one_primitive() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let found = timing_outside_the_primitive(&root);
    assert!(
        found.is_empty(),
        "timing decided in the Worker's driver (decide it in edge/core, race through shim::within):\n  {}",
        found.join("\n  ")
    );
}

#[test]
fn the_check_sees_a_race_written_in_the_driver() {
    let dir = std::env::temp_dir().join(format!("understudy-timing-{}", std::process::id()));
    let src = dir.join("edge/worker/src");
    std::fs::create_dir_all(&src).expect("dir");
    std::fs::write(
        src.join("shim.rs"),
        "pub async fn within<F>(f: F, ms: u64) -> Option<F> {\n    select(f, Delay::from(ms));\n}\n",
    )
    .expect("write");
    std::fs::write(
        src.join("alarm.rs"),
        "fn run() {\n    if now.since(started) > 5_000 { return; }\n    select(fetch, sleep(5));\n}\n",
    )
    .expect("write");
    let found = timing_outside_the_primitive(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(found.iter().all(|l| l.contains("alarm.rs")), "{found:?}");
}
