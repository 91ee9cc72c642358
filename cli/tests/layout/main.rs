//! The layout shows the architecture (issue 9, issue 23): no import cycles between a crate's
//! top-level modules, none between its module files, and no source file whose code (tests
//! aside) runs past a ceiling that only a file holding more than one concept reaches.
//!
//! A module depends on another when its code (outside `#[cfg(test)]` items and test-only
//! modules) names it: `crate::b::Item`, `super::b::Item`, `self::b`, a grouped or nested
//! import (`use crate::{a, b::{X, Y}}`) or a module it imported (`use crate::b; b::c::f()`).
//! A path resolves to the deepest module along it that is a file of its own, so a
//! re-export (`crate::engine::Flight`) counts as a use of the module that re-exports it.
//!
//! Two graphs must have no cycle:
//! - the top-level modules of a crate: the decision core (`edge/core`) reads like layers —
//!   time and policy below, classification and the cascade above them, the engine on top —
//!   and the CLI's argument types never depend on the commands that run them;
//! - the module files of a crate, leaving out the edges between a module and its own
//!   ancestors or descendants (a `mod.rs` uses its children, and children use their
//!   parent's items through `super::`): two siblings or cousins that use each other are two
//!   concepts tangled, and the shared part belongs in a module of its own below both.
//!
//! A file's code is every line of it (blank and comment lines included) outside its
//! `#[cfg(test)]` items — a test module, a test helper `fn`, a `use` only tests need —
//! wherever they sit in the file; a file that only a `#[cfg(test)] mod` names (`tests.rs`,
//! `tests/…`, a `testing` module) is test code throughout and is not counted.
//!
//! The parsing is deliberately small (a token scanner, not a Rust parser, in `read.rs`;
//! the graphs in `graph.rs`, the line count in `size.rs`): the tests at the bottom show it
//! reads what the tree writes, and that each check can fail.

mod graph;
mod read;
mod size;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use graph::{cycles, dependencies, file_edges, files, load, name, top_level_edges, Edges, Modules};
use read::{lex, without_tests, Module};
use size::code_lines;

const CRATES: [&str; 5] = [
    "edge/core/src",
    "edge/worker/src",
    "compiler/src",
    "lab/src",
    "cli/src",
];

/// Lines of code (every line outside `#[cfg(test)]` items, see `size.rs`) above which a
/// file is split.
const CODE_LINES_CEILING: usize = 500;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn cycles_in_every_crate(
    edges_of: fn(&BTreeMap<Module, BTreeSet<Module>>) -> Edges,
) -> Vec<String> {
    let mut problems = Vec::new();
    for krate in CRATES {
        let modules = load(&root().join(krate));
        assert!(modules.len() > 1, "{krate}: no modules found");
        for c in cycles(&edges_of(&dependencies(&modules))) {
            problems.push(format!("{krate}: {}", c.join(" -> ")));
        }
    }
    problems
}

#[test]
fn no_crate_has_an_import_cycle_between_its_modules() {
    let problems = cycles_in_every_crate(top_level_edges);
    assert!(
        problems.is_empty(),
        "import cycles between modules:\n  {}",
        problems.join("\n  ")
    );
}

#[test]
fn no_crate_has_an_import_cycle_between_its_module_files() {
    let problems = cycles_in_every_crate(file_edges);
    assert!(
        problems.is_empty(),
        "import cycles between module files (pull the shared part down into a module of \
         its own):\n  {}",
        problems.join("\n  ")
    );
}

#[test]
fn no_source_file_runs_past_the_ceiling() {
    let mut over = Vec::new();
    for krate in CRATES {
        for f in files(&root().join(krate)) {
            let text = std::fs::read_to_string(&f).expect("source");
            let n = code_lines(&text);
            if n > CODE_LINES_CEILING {
                let path = f.strip_prefix(root()).unwrap_or(&f).display().to_string();
                over.push(format!("{path}: {n} lines of code"));
            }
        }
    }
    assert!(
        over.is_empty(),
        "files over {CODE_LINES_CEILING} lines of code (split them by concept):\n  {}",
        over.join("\n  ")
    );
}

// ---- The checks can fail ------------------------------------------------------------------

/// A crate from `(module, source)` pairs, read as `load` reads files.
fn fake(sources: &[(&str, &str)]) -> Modules {
    sources
        .iter()
        .map(|(m, text)| {
            let module = m
                .split("::")
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect();
            (module, without_tests(&lex(text)))
        })
        .collect()
}

fn refs_of(sources: &[(&str, &str)], module: &str) -> Vec<String> {
    let deps = dependencies(&fake(sources));
    let key: Module = module
        .split("::")
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect();
    deps[&key].iter().map(|m| name(m)).collect()
}

#[test]
fn grouped_and_nested_imports_are_read() {
    let sources = [
        ("", "mod a; mod b; mod c; mod d; mod e;"),
        ("a", "use crate::{b, c::{X, Y}, d::Z as W};"),
        ("b", ""),
        ("c", ""),
        ("d", ""),
        ("e", ""),
    ];
    assert_eq!(refs_of(&sources, "a"), ["b", "c", "d"]);
}

#[test]
fn a_grouped_import_cycle_is_found() {
    // edge/worker's `kv.rs ↔ shim.rs` passed the first version of this check.
    let sources = [
        ("", "mod kv; mod shim;"),
        ("kv", "use crate::{shim::Shim, isolate};\nfn f() {}"),
        ("shim", "use crate::{kv::{self, Kv}};"),
    ];
    let deps = dependencies(&fake(&sources));
    let cycle = vec!["kv".to_string(), "shim".into(), "kv".into()];
    assert_eq!(cycles(&top_level_edges(&deps)), vec![cycle.clone()]);
    assert_eq!(cycles(&file_edges(&deps)), vec![cycle]);
}

#[test]
fn relative_paths_resolve_from_the_files_module() {
    let sources = [
        ("", "mod engine; mod policy;"),
        ("policy", ""),
        ("engine", "mod flight; mod steps; mod trace;"),
        ("engine::trace", ""),
        (
            "engine::flight",
            "use super::{steps::admit, Engine};\n\
             fn f() { super::super::policy::Policy::new(); self::inner(); }",
        ),
        (
            "engine::steps",
            "use super::trace;\nfn g() -> trace::Trace { todo!() }",
        ),
    ];
    assert_eq!(
        refs_of(&sources, "engine::flight"),
        ["engine", "engine::steps", "policy"]
    );
    assert_eq!(refs_of(&sources, "engine::steps"), ["engine::trace"]);
}

#[test]
fn a_sibling_cycle_is_found_and_a_parent_child_pair_is_not() {
    let sources = [
        ("", "mod events;"),
        (
            "events",
            "mod delivery; mod outbox;\npub use outbox::Outbox;\nfn f() { delivery::send(); }",
        ),
        (
            "events::delivery",
            "use super::outbox::Row;\nuse super::Config;",
        ),
        (
            "events::outbox",
            "use crate::events::{delivery::Attempt, Config};",
        ),
    ];
    let deps = dependencies(&fake(&sources));
    assert_eq!(
        cycles(&file_edges(&deps)),
        vec![vec![
            "events::delivery",
            "events::outbox",
            "events::delivery"
        ]]
    );
    // Only the parent and its children: nothing to report.
    let sources = [
        ("", "mod events;"),
        (
            "events",
            "mod delivery;\npub struct Config;\nfn f() { delivery::send(); }",
        ),
        (
            "events::delivery",
            "use super::Config;\nuse crate::events::Config as C;",
        ),
    ];
    assert!(cycles(&file_edges(&dependencies(&fake(&sources)))).is_empty());
}

#[test]
fn test_code_comments_and_strings_name_nothing() {
    let sources = [
        ("", "mod a; mod b; mod c;"),
        (
            "a",
            "//! See crate::b.\n\
             /* crate::b */\n\
             fn f() -> &'static str { let _c = '{'; \"crate::b {\" }\n\
             fn r() -> &'static str { r#\"crate::b \" {\"# }\n\
             #[cfg(test)]\nuse crate::b::X;\n\
             #[cfg(test)]\nmod tests { use crate::b; fn g() { let _ = \"}\"; } }\n\
             fn h() { crate::c::run(); }",
        ),
        ("b", ""),
        ("c", ""),
    ];
    assert_eq!(refs_of(&sources, "a"), ["c"]);
}

#[test]
fn the_cycle_finder_finds_a_cycle() {
    let mut edges = Edges::new();
    edges.entry("a".into()).or_default().insert("b".into());
    edges.entry("b".into()).or_default().insert("c".into());
    edges.entry("c".into()).or_default().insert("a".into());
    edges.entry("c".into()).or_default().insert("d".into());
    assert_eq!(cycles(&edges), vec![vec!["a", "b", "c", "a"]]);
}

#[test]
fn test_items_anywhere_in_a_file_are_not_counted_and_all_else_is() {
    // A `cfg(test)` item near the top does not end the count (the first version stopped
    // there), a trailing test module is left out, and so is a test helper in an `impl`,
    // with its doc comment.
    let text = "\
//! A module.
use std::fmt;
#[cfg(test)]
use std::collections::BTreeSet;

/// Code.
pub struct S;

impl S {
    pub fn f(&self) -> &'static str {
        \"}\"
    }

    /// Only for tests.
    #[cfg(test)]
    pub fn g(&self) -> char {
        '}'
    }
}

#[cfg(test)]
mod tests {
    // A brace in a comment: }
    const T: &str = \"{ /* \";
    #[test]
    fn t() {}
}
";
    assert_eq!(code_lines(text), 13);
    assert_eq!(code_lines(""), 0);
}

#[test]
fn a_line_a_test_item_shares_with_code_is_code() {
    let text =
        "fn f() {}\nstruct A { #[cfg(test)] x: u8, y: u8 }\n#[cfg(test)] fn g() {} fn h() {}\n";
    assert_eq!(code_lines(text), 3);
    // Multi-line literals and block comments keep their lines.
    let text = "const S: &str = \"a\nb\nc\";\n/* one\ntwo */\nfn f() {}\n#[cfg(test)]\nmod t { const U: &str = \"x\ny\"; }\n";
    assert_eq!(code_lines(text), 6);
}

#[test]
fn a_file_only_a_test_module_names_is_test_code() {
    let dir = std::env::temp_dir().join(format!("layout-files-{}", std::process::id()));
    let src = dir.join("src");
    std::fs::create_dir_all(src.join("a")).expect("temp dir");
    for (file, text) in [
        ("lib.rs", "mod a;\n#[cfg(test)]\nmod testing;\n"),
        ("a.rs", "mod b;\n#[cfg(test)]\nmod tests;\n"),
        ("a/b.rs", ""),
        ("a/tests.rs", "mod helpers;\n"),
        ("testing.rs", ""),
    ] {
        std::fs::write(src.join(file), text).expect("temp file");
    }
    let found: Vec<_> = files(&src)
        .iter()
        .map(|f| {
            f.strip_prefix(&src)
                .expect("below src")
                .display()
                .to_string()
        })
        .collect();
    std::fs::remove_dir_all(&dir).expect("temp dir removed");
    assert_eq!(found, ["a/b.rs", "a.rs", "lib.rs"]);
}
