//! A spanned TOML tree and a table reader that records every problem it meets.
//!
//! Phase one of the cargo-deny approach: the TOML is parsed into spans first, then read
//! key by key. The reader never stops at the first problem: each wrong type, bad duration
//! or unknown key becomes a diagnostic and reading goes on, so one run reports them all.

use std::collections::BTreeMap;

use toml_span::value::ValueInner;

use crate::codes;
use crate::diag::{Diagnostic, Severity};

pub type Span = (usize, usize);

/// An owned TOML value with the byte span it came from.
#[derive(Debug, Clone)]
pub struct Node {
    pub span: Span,
    pub kind: NodeKind,
}

#[derive(Debug, Clone)]
pub enum NodeKind {
    Str(String),
    Int(i64),
    Float(f64),
    Bool(bool),
    Array(Vec<Node>),
    /// Keys in source order, each with its own span.
    Table(Vec<(String, Span, Node)>),
}

impl NodeKind {
    pub fn type_name(&self) -> &'static str {
        match self {
            NodeKind::Str(_) => "a string",
            NodeKind::Int(_) => "an integer",
            NodeKind::Float(_) => "a float",
            NodeKind::Bool(_) => "a boolean",
            NodeKind::Array(_) => "an array",
            NodeKind::Table(_) => "a table",
        }
    }
}

impl Node {
    pub fn from_toml(mut v: toml_span::Value<'_>) -> Node {
        let span = (v.span.start, v.span.end);
        let kind = match v.take() {
            ValueInner::String(s) => NodeKind::Str(s.into_owned()),
            ValueInner::Integer(i) => NodeKind::Int(i),
            ValueInner::Float(f) => NodeKind::Float(f),
            ValueInner::Boolean(b) => NodeKind::Bool(b),
            ValueInner::Array(a) => NodeKind::Array(a.into_iter().map(Node::from_toml).collect()),
            ValueInner::Table(t) => {
                let mut entries: Vec<(String, Span, Node)> = t
                    .into_iter()
                    .map(|(k, v)| {
                        (
                            k.name.into_owned(),
                            (k.span.start, k.span.end),
                            Node::from_toml(v),
                        )
                    })
                    .collect();
                entries.sort_by_key(|(_, s, _)| s.0);
                NodeKind::Table(entries)
            }
        };
        Node { span, kind }
    }
}

/// Collects diagnostics and the span of every key path read, for the validator.
pub struct Ctx {
    pub file: std::path::PathBuf,
    /// The policy's text, to find positions inside string values.
    pub text: String,
    pub diags: Vec<Diagnostic>,
    /// `budget.total`, `cascade.tiers[1].read_timeout`, … → span of the value.
    pub spans: BTreeMap<String, Span>,
}

impl Ctx {
    pub fn new(file: std::path::PathBuf) -> Ctx {
        Ctx {
            file,
            text: String::new(),
            diags: Vec::new(),
            spans: BTreeMap::new(),
        }
    }

    pub fn error(
        &mut self,
        code: &'static str,
        span: Span,
        message: impl Into<String>,
        label: impl Into<String>,
        help: impl Into<String>,
    ) {
        self.diags.push(Diagnostic {
            code,
            severity: Severity::Error,
            message: message.into(),
            file: self.file.clone(),
            span: Some(span),
            label: label.into(),
            secondary: Vec::new(),
            notes: Vec::new(),
            help: help.into(),
        });
    }

    /// The span of `needle` inside the text covered by `within`.
    pub fn file_text_offset(&self, within: Span, needle: &str) -> Option<Span> {
        let slice = self.text.get(within.0..within.1)?;
        let at = slice.find(needle)?;
        Some((within.0 + at, within.0 + at + needle.len()))
    }

    pub fn span_of(&self, path: &str) -> Option<Span> {
        self.spans.get(path).copied()
    }
}

/// Reads one TOML table, remembering which keys were asked for so that the rest can be
/// reported as unknown, with the list of keys that are expected.
pub struct Table {
    pub path: String,
    pub span: Span,
    entries: Vec<(String, Span, Option<Node>)>,
    expected: Vec<&'static str>,
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

impl Table {
    /// Wraps `node` if it is a table; reports a wrong type otherwise.
    pub fn new(ctx: &mut Ctx, path: &str, node: Node) -> Option<Table> {
        match node.kind {
            NodeKind::Table(entries) => Some(Table {
                path: path.to_string(),
                span: node.span,
                entries: entries
                    .into_iter()
                    .map(|(k, s, n)| (k, s, Some(n)))
                    .collect(),
                expected: Vec::new(),
            }),
            other => {
                ctx.error(
                    codes::WRONG_TYPE,
                    node.span,
                    format!("`{path}` must be a table, found {}", other.type_name()),
                    "expected a table",
                    format!("write `[{path}]` followed by its keys"),
                );
                None
            }
        }
    }

    /// Whether the key is present (without consuming it).
    pub fn has(&self, key: &str) -> bool {
        self.entries.iter().any(|(k, _, n)| k == key && n.is_some())
    }

    /// Takes the raw node for `key`.
    pub fn take(&mut self, ctx: &mut Ctx, key: &'static str) -> Option<Node> {
        self.expected.push(key);
        let entry = self.entries.iter_mut().find(|(k, _, _)| k == key)?;
        let node = entry.2.take()?;
        ctx.spans.insert(join(&self.path, key), node.span);
        Some(node)
    }

    fn missing(&self, ctx: &mut Ctx, key: &str, what: &str) {
        let shown = if self.path.is_empty() {
            "the top level".to_string()
        } else {
            format!("`[{}]`", self.path)
        };
        ctx.error(
            codes::MISSING_KEY,
            self.span,
            format!("{shown} is missing the required key `{key}`"),
            format!("`{key}` is required here"),
            format!("add `{key} = {what}`"),
        );
    }

    pub fn req(&mut self, ctx: &mut Ctx, key: &'static str, what: &str) -> Option<Node> {
        let n = self.take(ctx, key);
        if n.is_none() {
            self.missing(ctx, key, what);
        }
        n
    }

    pub fn opt_str(&mut self, ctx: &mut Ctx, key: &'static str) -> Option<String> {
        let node = self.take(ctx, key)?;
        as_str(ctx, &join(&self.path, key), node)
    }

    pub fn req_str(&mut self, ctx: &mut Ctx, key: &'static str, example: &str) -> Option<String> {
        let node = self.req(ctx, key, example)?;
        as_str(ctx, &join(&self.path, key), node)
    }

    pub fn opt_bool(&mut self, ctx: &mut Ctx, key: &'static str) -> Option<bool> {
        let node = self.take(ctx, key)?;
        match node.kind {
            NodeKind::Bool(b) => Some(b),
            other => {
                wrong_type(
                    ctx,
                    &join(&self.path, key),
                    node.span,
                    "a boolean (`true` or `false`)",
                    &other,
                );
                None
            }
        }
    }

    /// A non-negative integer no larger than `max`.
    pub fn opt_uint(&mut self, ctx: &mut Ctx, key: &'static str, max: u64) -> Option<u64> {
        let node = self.take(ctx, key)?;
        let path = join(&self.path, key);
        as_uint(ctx, &path, node, max)
    }

    pub fn req_uint(
        &mut self,
        ctx: &mut Ctx,
        key: &'static str,
        max: u64,
        example: &str,
    ) -> Option<u64> {
        let node = self.req(ctx, key, example)?;
        let path = join(&self.path, key);
        as_uint(ctx, &path, node, max)
    }

    /// A ratio in `[0, 1]`.
    pub fn opt_ratio(&mut self, ctx: &mut Ctx, key: &'static str) -> Option<f64> {
        let node = self.take(ctx, key)?;
        let path = join(&self.path, key);
        let v = match node.kind {
            NodeKind::Float(f) => f,
            NodeKind::Int(i) => i as f64,
            ref other => {
                wrong_type(
                    ctx,
                    &path,
                    node.span,
                    "a number between 0 and 1 (e.g. `0.15`)",
                    other,
                );
                return None;
            }
        };
        if !(0.0..=1.0).contains(&v) || v.is_nan() {
            ctx.error(
                codes::INVALID_VALUE,
                node.span,
                format!("`{path}` is {v}, outside 0..=1"),
                "must be between 0 and 1",
                "write a ratio such as `0.15` for 15%",
            );
            return None;
        }
        Some(v)
    }

    /// A human duration (`45ms`, `4h`) in milliseconds.
    pub fn opt_duration(&mut self, ctx: &mut Ctx, key: &'static str) -> Option<u64> {
        let node = self.take(ctx, key)?;
        as_duration(ctx, &join(&self.path, key), node)
    }

    pub fn req_duration(&mut self, ctx: &mut Ctx, key: &'static str, example: &str) -> Option<u64> {
        let node = self.req(ctx, key, example)?;
        as_duration(ctx, &join(&self.path, key), node)
    }

    /// One of `choices` (string).
    pub fn opt_choice<T: Copy>(
        &mut self,
        ctx: &mut Ctx,
        key: &'static str,
        choices: &[(&str, T)],
    ) -> Option<T> {
        let node = self.take(ctx, key)?;
        as_choice(ctx, &join(&self.path, key), node, choices)
    }

    pub fn opt_str_array(
        &mut self,
        ctx: &mut Ctx,
        key: &'static str,
    ) -> Option<Vec<(String, Span)>> {
        let node = self.take(ctx, key)?;
        let path = join(&self.path, key);
        match node.kind {
            NodeKind::Array(items) => {
                let mut out = Vec::new();
                for (i, item) in items.into_iter().enumerate() {
                    let span = item.span;
                    if let Some(s) = as_str(ctx, &format!("{path}[{i}]"), item) {
                        out.push((s, span));
                    }
                }
                Some(out)
            }
            other => {
                wrong_type(ctx, &path, node.span, "an array of strings", &other);
                None
            }
        }
    }

    pub fn opt_table(&mut self, ctx: &mut Ctx, key: &'static str) -> Option<Table> {
        let node = self.take(ctx, key)?;
        Table::new(ctx, &join(&self.path, key), node)
    }

    /// Reports keys nobody asked for, listing the expected ones.
    pub fn finish(self, ctx: &mut Ctx) {
        let mut expected: Vec<&str> = self.expected.clone();
        expected.sort_unstable();
        expected.dedup();
        let list = expected
            .iter()
            .map(|k| format!("`{k}`"))
            .collect::<Vec<_>>()
            .join(", ");
        for (key, span, node) in self.entries {
            if node.is_some() {
                let where_ = if self.path.is_empty() {
                    "at the top level".to_string()
                } else {
                    format!("in `[{}]`", self.path)
                };
                let suggestion = closest(&key, &expected)
                    .map(|s| format!("did you mean `{s}`? Expected keys: {list}"))
                    .unwrap_or_else(|| format!("remove it; expected keys: {list}"));
                ctx.error(
                    codes::UNKNOWN_KEY,
                    span,
                    format!("unknown key `{key}` {where_}"),
                    "not a key of this table",
                    suggestion,
                );
            }
        }
    }

    /// The remaining entries as `(key, key_span, node)` (for map-like tables).
    pub fn drain_entries(&mut self) -> Vec<(String, Span, Node)> {
        self.entries
            .drain(..)
            .filter_map(|(k, s, n)| n.map(|n| (k, s, n)))
            .collect()
    }
}

/// The expected key closest to `key` by edit distance, when it is close.
fn closest<'a>(key: &str, expected: &[&'a str]) -> Option<&'a str> {
    expected
        .iter()
        .map(|e| (strsim_levenshtein(key, e), *e))
        .filter(|(d, e)| *d <= 2.max(e.len() / 4))
        .min()
        .map(|(_, e)| e)
}

fn strsim_levenshtein(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            cur.push((prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

pub fn wrong_type(ctx: &mut Ctx, path: &str, span: Span, expected: &str, found: &NodeKind) {
    ctx.error(
        codes::WRONG_TYPE,
        span,
        format!("`{path}` must be {expected}, found {}", found.type_name()),
        format!("expected {expected}"),
        format!("change the value of `{path}` to {expected}"),
    );
}

pub fn as_str(ctx: &mut Ctx, path: &str, node: Node) -> Option<String> {
    match node.kind {
        NodeKind::Str(s) => Some(s),
        other => {
            wrong_type(ctx, path, node.span, "a string", &other);
            None
        }
    }
}

pub fn as_uint(ctx: &mut Ctx, path: &str, node: Node, max: u64) -> Option<u64> {
    match node.kind {
        NodeKind::Int(i) if i >= 0 && (i as u64) <= max => Some(i as u64),
        NodeKind::Int(i) => {
            ctx.error(
                codes::INVALID_VALUE,
                node.span,
                format!("`{path}` is {i}, outside 0..={max}"),
                format!("must be between 0 and {max}"),
                format!("use a whole number from 0 to {max}"),
            );
            None
        }
        other => {
            wrong_type(ctx, path, node.span, "a whole number", &other);
            None
        }
    }
}

pub fn as_duration(ctx: &mut Ctx, path: &str, node: Node) -> Option<u64> {
    match node.kind {
        NodeKind::Str(s) => match understudy_core::time::parse_duration(&s) {
            Ok(ms) => Some(ms),
            Err(msg) => {
                ctx.error(
                    codes::BAD_DURATION,
                    node.span,
                    format!("`{path}`: {msg}"),
                    "not a duration",
                    "write durations as a whole number and a unit: `45ms`, `5s`, `30m`, `4h`, `1d`",
                );
                None
            }
        },
        NodeKind::Int(i) => {
            ctx.error(
                codes::BAD_DURATION,
                node.span,
                format!("`{path}` is the bare number {i}: durations need a unit"),
                "no unit",
                format!("write it as a string with a unit, e.g. `\"{i}ms\"` or `\"{i}s\"`"),
            );
            None
        }
        other => {
            wrong_type(
                ctx,
                path,
                node.span,
                "a duration string such as \"45ms\"",
                &other,
            );
            None
        }
    }
}

pub fn as_choice<T: Copy>(
    ctx: &mut Ctx,
    path: &str,
    node: Node,
    choices: &[(&str, T)],
) -> Option<T> {
    let span = node.span;
    let s = as_str(ctx, path, node)?;
    if let Some((_, v)) = choices.iter().find(|(n, _)| *n == s) {
        return Some(*v);
    }
    let list = choices
        .iter()
        .map(|(n, _)| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ");
    ctx.error(
        codes::INVALID_VALUE,
        span,
        format!("`{path}` is `{s}`, which is not one of {list}"),
        "unknown value",
        format!("use one of {list}"),
    );
    None
}
