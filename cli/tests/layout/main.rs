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
//! The parsing is deliberately small (a token scanner, not a Rust parser, in `read.rs`;
//! the graphs in `graph.rs`): the tests at the bottom show it reads what the tree writes,
//! and that each check can fail.

mod graph;
mod read;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use graph::{cycles, dependencies, file_edges, load, name, top_level_edges, Edges, Modules};
use read::{lex, without_tests, Module};

const CRATES: [&str; 5] = [
    "edge/core/src",
    "edge/worker/src",
    "compiler/src",
    "lab/src",
    "cli/src",
];

/// Lines of code (before a file's `#[cfg(test)]`) above which a file is split.
const CODE_LINES_CEILING: usize = 550;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            if p.file_name().is_some_and(|n| n != "tests") {
                rust_files(&p, out);
            }
        } else if p.extension().is_some_and(|e| e == "rs")
            && p.file_name().is_some_and(|n| n != "tests.rs")
        {
            out.push(p);
        }
    }
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
        let mut files = Vec::new();
        rust_files(&root().join(krate), &mut files);
        for f in files {
            let text = std::fs::read_to_string(&f).expect("source");
            let n = text
                .split("#[cfg(test)]")
                .next()
                .unwrap_or("")
                .lines()
                .count();
            if n > CODE_LINES_CEILING {
                over.push(format!(
                    "{}: {n} lines of code",
                    f.strip_prefix(root()).unwrap_or(&f).display()
                ));
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
