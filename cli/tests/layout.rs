//! The layout shows the architecture (issue 9): no import cycles between a crate's
//! top-level modules, and no source file whose code (tests aside) runs past a ceiling that
//! only a file holding more than one concept reaches.
//!
//! A module `a` depends on `b` when code in `a` (outside `#[cfg(test)]` and `tests.rs`)
//! names `crate::b`. Within one crate those edges must form no cycle: the decision core
//! (`edge/core`) reads like layers — time and policy below, classification and the cascade
//! above them, the engine on top — and the CLI's argument types never depend on the
//! commands that run them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

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

/// A file's code: what comes before its first `#[cfg(test)]`, comment lines dropped.
fn code_of(text: &str) -> String {
    text.split("#[cfg(test)]")
        .next()
        .unwrap_or("")
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The top-level module a file belongs to (`None` for the crate root).
fn top_module(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).ok()?;
    let first = rel.components().next()?.as_os_str().to_string_lossy();
    let name = first.trim_end_matches(".rs");
    (!matches!(name, "lib" | "main")).then(|| name.to_string())
}

fn crate_refs(code: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        let before = rest[..i].chars().last();
        rest = &rest[i + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue; // e.g. `understudy_crate::`
        }
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if !name.is_empty() {
            out.insert(name);
        }
    }
    out
}

/// Every cycle in `edges`, each once, as the path that closes it.
fn cycles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct Search<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        seen: BTreeSet<Vec<String>>,
        found: Vec<Vec<String>>,
    }
    impl Search<'_> {
        fn walk(&mut self, start: &str, path: &mut Vec<String>) {
            let Some(next) = self.edges.get(path.last().expect("non-empty path")) else {
                return;
            };
            for n in next {
                if n == start {
                    let mut key = path.clone();
                    key.sort();
                    if self.seen.insert(key) {
                        let mut c = path.clone();
                        c.push(start.to_string());
                        self.found.push(c);
                    }
                } else if !path.contains(n) && path.len() < 8 {
                    path.push(n.clone());
                    self.walk(start, path);
                    path.pop();
                }
            }
        }
    }
    let mut s = Search {
        edges,
        seen: BTreeSet::new(),
        found: Vec::new(),
    };
    for start in edges.keys() {
        s.walk(start, &mut vec![start.clone()]);
    }
    s.found
}

#[test]
fn no_crate_has_an_import_cycle_between_its_modules() {
    let mut problems = Vec::new();
    for krate in CRATES {
        let src = root().join(krate);
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        assert!(!files.is_empty(), "{krate}: no sources found");
        let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for f in &files {
            let Some(top) = top_module(&src, f) else {
                continue;
            };
            let text = std::fs::read_to_string(f).expect("source");
            for r in crate_refs(&code_of(&text)) {
                if r != top {
                    edges.entry(top.clone()).or_default().insert(r);
                }
            }
        }
        for c in cycles(&edges) {
            problems.push(format!("{krate}: {}", c.join(" -> ")));
        }
    }
    assert!(
        problems.is_empty(),
        "import cycles between modules:\n  {}",
        problems.join("\n  ")
    );
}

#[test]
fn the_cycle_finder_finds_a_cycle() {
    // The check above must be able to fail.
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    edges.entry("a".into()).or_default().insert("b".into());
    edges.entry("b".into()).or_default().insert("c".into());
    edges.entry("c".into()).or_default().insert("a".into());
    edges.entry("c".into()).or_default().insert("d".into());
    assert_eq!(cycles(&edges), vec![vec!["a", "b", "c", "a"]]);
    assert_eq!(
        crate_refs("use crate::policy::X; understudy_crate::no; crate::time"),
        ["policy".to_string(), "time".to_string()].into()
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
