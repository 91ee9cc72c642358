//! Reading a module's code: what it names, as paths resolved from the crate root.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;

/// A module's path below its crate root (`["engine", "flight"]`); empty for the root.
pub type Module = Vec<String>;

/// The source with comments blanked and every string or char literal emptied, so that
/// neither a path in a doc comment nor a brace in a format string is read as code. The
/// newlines stay where they were: line `n` of the result is line `n` of the source.
pub fn lex(text: &str) -> String {
    let s: Vec<char> = text.chars().collect();
    let at = |i: usize, lit: &str| {
        lit.chars()
            .enumerate()
            .all(|(k, c)| s.get(i + k) == Some(&c))
    };
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    // `r"…"`, `br#"…"#`: the prefix's length and the number of `#`, at a raw string's start
    // (and not at a raw identifier, `r#type`).
    let raw = |i: usize| {
        let r = if at(i, "br") {
            2
        } else if at(i, "r") {
            1
        } else {
            return None;
        };
        let hashes = s[i + r..].iter().take_while(|&&c| c == '#').count();
        (s.get(i + r + hashes) == Some(&'"')).then_some((r, hashes))
    };
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < s.len() {
        let starts_token = i == 0 || !ident(s[i - 1]);
        if at(i, "//") {
            while i < s.len() && s[i] != '\n' {
                i += 1;
            }
        } else if at(i, "/*") {
            let start = i;
            let mut depth = 0;
            while i < s.len() {
                if at(i, "/*") {
                    depth += 1;
                    i += 2;
                } else if at(i, "*/") {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
            newlines(&s[start..i.min(s.len())], &mut out);
        } else if let Some((r, hashes)) = raw(i).filter(|_| starts_token) {
            // A raw string ends at `"` followed by as many `#` as it opened with.
            let start = i;
            i += r + hashes + 1;
            let close: String = std::iter::once('"')
                .chain("#".repeat(hashes).chars())
                .collect();
            while i < s.len() && !at(i, &close) {
                i += 1;
            }
            i += close.len();
            out.push_str("\"\"");
            newlines(&s[start..i.min(s.len())], &mut out);
        } else if s[i] == '"' || (starts_token && at(i, "b\"")) {
            let start = i;
            i += if s[i] == 'b' { 2 } else { 1 };
            while i < s.len() && s[i] != '"' {
                i += if s[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
            newlines(&s[start..i.min(s.len())], &mut out);
        } else if s[i] == '\'' && s.get(i + 1) == Some(&'\\') {
            i += 3; // `'\n'`, `'\''`, `'\u{..}'`: the escape, then up to the closing quote
            while i < s.len() && s[i] != '\'' {
                i += 1;
            }
            i += 1;
            out.push_str("' '");
        } else if s[i] == '\'' && s.get(i + 2) == Some(&'\'') {
            i += 3;
            out.push_str("' '");
        } else {
            out.push(s[i]); // a lifetime's `'` stays: it is followed by no closing quote
            i += 1;
        }
    }
    out
}

/// The newlines of a blanked comment or emptied literal, kept so that lines stay put.
fn newlines(blanked: &[char], out: &mut String) {
    out.extend(blanked.iter().filter(|&&c| c == '\n'));
}

/// `code` without its `#[cfg(test)]` items (a `mod tests { .. }`, a `mod testing;`, a test
/// helper `fn`, a `use` only tests need).
pub fn without_tests(code: &str) -> String {
    let mut out = String::new();
    let mut from = 0;
    for item in test_items(code) {
        out.push_str(&code[from..item.start]);
        from = item.end;
    }
    out.push_str(&code[from..]);
    out
}

/// Where each `#[cfg(test)]` item of `code` (lexed) sits: from its attribute to its end.
pub fn test_items(code: &str) -> Vec<Range<usize>> {
    const ATTR: &str = "#[cfg(test)]";
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(i) = code[from..].find(ATTR) {
        let start = from + i;
        let body = start + ATTR.len();
        from = body + item_len(&code[body..]);
        out.push(start..from);
    }
    out
}

/// The length of the item `s` starts with: up to its `;` or `,` or its closing brace (and
/// the `;` after it, as in `use a::{b, c};`), or to the bracket that closes what encloses it.
fn item_len(s: &str) -> usize {
    let mut depth = 0i32;
    for (i, c) in s.char_indices() {
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => {
                depth -= 1;
                if depth < 0 {
                    return i;
                }
                if depth == 0 && c == '}' {
                    let after = s[i + 1..].trim_start();
                    return match after.strip_prefix(';') {
                        Some(rest) => s.len() - rest.len(),
                        None => i + 1,
                    };
                }
            }
            ';' | ',' if depth == 0 => return i + 1,
            _ => {}
        }
    }
    s.len()
}

#[derive(Debug, Clone, PartialEq)]
pub enum Tok {
    Ident(String),
    PathSep,
    Punct(char),
}

pub fn tokens(code: &str) -> Vec<Tok> {
    let s: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < s.len() {
        let c = s[i];
        if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < s.len() && (s[i].is_alphanumeric() || s[i] == '_') {
                i += 1;
            }
            out.push(Tok::Ident(s[start..i].iter().collect()));
            continue;
        }
        if c == ':' && s.get(i + 1) == Some(&':') {
            out.push(Tok::PathSep);
            i += 2;
            continue;
        }
        if !c.is_whitespace() {
            out.push(Tok::Punct(c));
        }
        i += 1;
    }
    out
}

/// One use-tree from `t[*i]` on, below `prefix`: every path it names, each with the name it
/// binds (`a::b as c` binds `c`; `a::{self}` binds `a`; a glob binds nothing).
fn use_tree(t: &[Tok], i: &mut usize, prefix: &[String], out: &mut Vec<(Module, Option<String>)>) {
    let mut path = prefix.to_vec();
    if t.get(*i) == Some(&Tok::PathSep) {
        *i += 1; // `::std::..`: an extern crate, never this one
        path.push("::".into());
    }
    loop {
        match t.get(*i) {
            Some(Tok::Ident(s)) if s != "as" => {
                path.push(s.clone());
                *i += 1;
            }
            Some(Tok::Punct('{')) => {
                *i += 1;
                while !matches!(t.get(*i), None | Some(Tok::Punct('}'))) {
                    use_tree(t, i, &path, out);
                    if t.get(*i) == Some(&Tok::Punct(',')) {
                        *i += 1;
                    } else {
                        break;
                    }
                }
                *i += 1; // `}`
                return;
            }
            Some(Tok::Punct('*')) => {
                *i += 1;
                out.push((path, None));
                return;
            }
            _ => break,
        }
        if t.get(*i) != Some(&Tok::PathSep) {
            break;
        }
        *i += 1;
    }
    if path.last().is_some_and(|s| s == "self") {
        path.pop();
    }
    let mut name = path.last().cloned();
    if t.get(*i) == Some(&Tok::Ident("as".into())) {
        name = match t.get(*i + 1) {
            Some(Tok::Ident(n)) if n != "_" => Some(n.clone()),
            _ => None,
        };
        *i += 2;
    }
    out.push((path, name));
}

/// The full path `path` (as written in `module`) names from the crate root, or `None` for a
/// path that leaves the crate (another crate, `std`, a local item that is no module).
fn absolute(
    module: &[String],
    path: &[String],
    aliases: &BTreeMap<String, Module>,
    known: &BTreeSet<Module>,
) -> Option<Module> {
    let first = path.first()?;
    let (mut full, rest): (Module, &[String]) = match first.as_str() {
        "crate" => (Vec::new(), &path[1..]),
        "self" => (module.to_vec(), &path[1..]),
        "super" => {
            let ups = path.iter().take_while(|s| *s == "super").count();
            (
                module.get(..module.len().checked_sub(ups)?)?.to_vec(),
                &path[ups..],
            )
        }
        _ => match aliases.get(first) {
            Some(target) => (target.clone(), &path[1..]),
            // A child module is named bare (`flight::Flight` in `engine/mod.rs`).
            None if known.contains(&[module, &path[..1]].concat()) => (module.to_vec(), path),
            None => return None,
        },
    };
    full.extend(rest.iter().cloned());
    Some(full)
}

/// The deepest module along `full` that is a file of its own.
fn deepest(full: &[String], known: &BTreeSet<Module>) -> Module {
    (0..=full.len())
        .rev()
        .map(|n| full[..n].to_vec())
        .find(|m| known.contains(m))
        .unwrap_or_default()
}

/// Every module that `module`'s `code` names.
pub fn references(module: &[String], code: &str, known: &BTreeSet<Module>) -> BTreeSet<Module> {
    let t = tokens(code);
    let mut out = BTreeSet::new();
    let mut aliases: BTreeMap<String, Module> = BTreeMap::new();
    let mut inline = Vec::new();
    let mut i = 0;
    while i < t.len() {
        let start = i;
        let mut paths = Vec::new();
        if t[i] == Tok::Ident("use".into()) {
            i += 1;
            use_tree(&t, &mut i, &[], &mut paths);
            for (path, name) in paths {
                let Some(full) = absolute(module, &path, &aliases, known) else {
                    continue;
                };
                let m = deepest(&full, known);
                // `use crate::events::flow;` makes `flow::ops::f()` a path into `flow`.
                if let Some(name) = name.filter(|_| m == full) {
                    aliases.insert(name, m.clone());
                }
                out.insert(m);
            }
        } else if matches!(t[i], Tok::Ident(_))
            && (i == 0 || t[i - 1] != Tok::PathSep)
            && t.get(i + 1) == Some(&Tok::PathSep)
        {
            use_tree(&t, &mut i, &[], &mut paths);
            inline.extend(paths.into_iter().map(|(p, _)| p));
        }
        i = i.max(start + 1);
    }
    // Inline paths are resolved last: an alias may be imported below its first use.
    for path in inline {
        if let Some(full) = absolute(module, &path, &aliases, known) {
            out.insert(deepest(&full, known));
        }
    }
    out
}
