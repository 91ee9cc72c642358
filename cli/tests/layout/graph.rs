//! A crate's modules, the modules each names, and the cycles among them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::read::{lex, references, tokens, without_tests, Module, Tok};

/// A crate's non-test modules, each with its code (comments, literals and test items gone).
pub type Modules = BTreeMap<Module, String>;

pub type Edges = BTreeMap<String, BTreeSet<String>>;

/// Reads the crate at `src` from its root file down its non-test `mod` declarations.
pub fn load(src: &Path) -> Modules {
    walk(src)
        .into_iter()
        .map(|(module, _, code)| (module, code))
        .collect()
}

/// The crate's non-test module files: a file that only a `#[cfg(test)] mod` names is test
/// code, as is all that lies below it.
pub fn files(src: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = walk(src).into_iter().map(|(_, file, _)| file).collect();
    files.sort();
    files
}

/// Each non-test module of the crate at `src`, with its file and its code.
fn walk(src: &Path) -> Vec<(Module, PathBuf, String)> {
    let root_file = ["lib.rs", "main.rs"]
        .into_iter()
        .map(|f| src.join(f))
        .find(|f| f.exists())
        .unwrap_or_else(|| panic!("{}: no lib.rs or main.rs", src.display()));
    let mut modules = Vec::new();
    let mut todo = vec![(Module::new(), root_file)];
    while let Some((module, file)) = todo.pop() {
        let text =
            std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let code = without_tests(&lex(&text));
        // A `mod.rs`, `lib.rs` or `main.rs` holds its children beside it; `a.rs`, in `a/`.
        let dir = match file.file_stem().and_then(|s| s.to_str()) {
            Some("mod" | "lib" | "main") => file.parent().expect("a parent").to_path_buf(),
            _ => file.with_extension(""),
        };
        let t = tokens(&code);
        for w in t.windows(3) {
            if let [Tok::Ident(m), Tok::Ident(name), Tok::Punct(';')] = w {
                if m == "mod" {
                    let child: Module = module.iter().chain([name]).cloned().collect();
                    let file = [
                        dir.join(format!("{name}.rs")),
                        dir.join(name).join("mod.rs"),
                    ]
                    .into_iter()
                    .find(|f| f.exists())
                    .unwrap_or_else(|| panic!("{}: no file for `mod {name};`", dir.display()));
                    todo.push((child, file));
                }
            }
        }
        modules.push((module, file, code));
    }
    modules
}

/// Each module with the modules it names (itself and unresolved paths left out).
pub fn dependencies(modules: &Modules) -> BTreeMap<Module, BTreeSet<Module>> {
    let known: BTreeSet<Module> = modules.keys().cloned().collect();
    modules
        .iter()
        .map(|(m, code)| {
            let mut refs = references(m, code, &known);
            refs.remove(m);
            (m.clone(), refs)
        })
        .collect()
}

pub fn name(m: &[String]) -> String {
    if m.is_empty() {
        "crate".into()
    } else {
        m.join("::")
    }
}

/// Edges between top-level modules (the crate root is no module of its own here).
pub fn top_level_edges(deps: &BTreeMap<Module, BTreeSet<Module>>) -> Edges {
    let mut edges = Edges::new();
    for (m, refs) in deps {
        for r in refs {
            if let (Some(a), Some(b)) = (m.first(), r.first()) {
                if a != b {
                    edges.entry(a.clone()).or_default().insert(b.clone());
                }
            }
        }
    }
    edges
}

/// Edges between module files, except between a module and its ancestors or descendants.
pub fn file_edges(deps: &BTreeMap<Module, BTreeSet<Module>>) -> Edges {
    let mut edges = Edges::new();
    for (m, refs) in deps {
        for r in refs {
            if !m.starts_with(r) && !r.starts_with(m) {
                edges.entry(name(m)).or_default().insert(name(r));
            }
        }
    }
    edges
}

/// Every cycle in `edges`, each once, as the path that closes it.
pub fn cycles(edges: &Edges) -> Vec<Vec<String>> {
    struct Search<'a> {
        edges: &'a Edges,
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
