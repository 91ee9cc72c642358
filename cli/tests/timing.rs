//! The engine owns time (docs/adr/010-the-engine-owns-time.md): the drivers perform, and
//! decide no timing. The Worker's Rust (`edge/worker/src`) races no timer at all: the
//! request's driver and the Durable Objects' (`io.js`, docs/adr/015) race through `io.js`'s
//! primitives, each outcome handed to a decision in `edge/core` (`events::attempt::ended` for
//! a delivery attempt, a watch's hold for the coordinator); the alarm run's budget
//! (`events::outbox::run`) and the eviction of waiting requests (`parked`) are decided there
//! too, as is when the coordinator writes its snapshot (`Snapshot::due`). A `select` with a
//! sleep, a `Delay` or a clock comparison against a constant written in the Worker's Rust
//! fails this test. (JavaScript inlined in a Rust file is
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

/// Each line of the Worker's Rust that races or waits on a timer.
fn timing_outside_the_primitive(root: &Path) -> Vec<String> {
    let mut files = Vec::new();
    rust_files(&root.join("edge/worker/src"), &mut files);
    let mut found = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).expect("source");
        let name = f.strip_prefix(root).unwrap_or(&f).display().to_string();
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

/// The driver's JavaScript functions allowed to set or race a timer: its primitives, and the
/// lag probe (a zero-delay timer whose lateness it measures).
const JS_PRIMITIVES: &[&str] = &["at", "soon", "within", "probe"];

/// Each line of `io.js` that sets a timer, races one or counts time down from the clock,
/// outside [`JS_PRIMITIVES`].
fn js_timing_outside_the_primitives(io_js: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut current: Option<&str> = None;
    for (i, line) in io_js.lines().enumerate() {
        let code = line.split("//").next().unwrap_or("");
        let decl = code
            .trim_start_matches("export ")
            .trim_start_matches("async ");
        if let Some(rest) = decl.strip_prefix("function ") {
            current = rest.split('(').next().map(str::trim);
        }
        let allowed = current.is_some_and(|f| JS_PRIMITIVES.contains(&f));
        let timing = [
            "setTimeout(",
            "Promise.race(",
            "- Date.now()",
            "Date.now() -",
        ];
        if !allowed && timing.iter().any(|t| code.contains(t)) {
            found.push(format!("io.js:{}: {}", i + 1, line.trim()));
        }
        let one_line = decl.starts_with("function ") && line.trim_end().ends_with('}');
        if line.starts_with('}') || one_line {
            current = None;
        }
    }
    found
}

#[test]
fn the_drivers_javascript_sets_and_races_timers_only_through_its_primitives() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let io = std::fs::read_to_string(root.join("edge/worker/src/io.js")).expect("io.js");
    assert!(
        io.contains("function within("),
        "io.js has no `within` primitive"
    );
    let found = js_timing_outside_the_primitives(&io);
    assert!(
        found.is_empty(),
        "timing decided in io.js (take the instant from the engine, go through at/soon/within):\n  {}",
        found.join("\n  ")
    );
    let written = js_timing_outside_the_primitives(
        "function at(t, fn) { return setTimeout(fn, Math.max(0, t - Date.now())); }\n\
         function put(f) {\n  setTimeout(() => f(), 0);\n  return Promise.race([a, b]);\n}\n",
    );
    assert_eq!(written.len(), 2, "{written:?}");
}

#[test]
fn the_workers_rust_races_a_timer_only_through_its_one_primitive() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let found = timing_outside_the_primitive(&root);
    assert!(
        found.is_empty(),
        "timing decided in the Worker's Rust (decide it in edge/core, race through io.js's primitives):\n  {}",
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
    // No primitive of the Worker's Rust is exempt: a `within` written there is a race too.
    assert_eq!(found.len(), 3, "{found:?}");
    assert_eq!(
        found.iter().filter(|l| l.contains("alarm.rs")).count(),
        2,
        "{found:?}"
    );
    assert!(found.iter().any(|l| l.contains("shim.rs:2")), "{found:?}");
}
