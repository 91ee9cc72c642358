//! Rendering diagnostics: rustc-like text with the span underlined (in colour on a
//! terminal), or JSON for machines. Rendering lives apart from the rules that produce
//! diagnostics.
//!
//! Output stays bounded whatever the input: a span on a long line (minified JSON, a
//! catalog on one line) is shown as a short excerpt around it, never as the whole line.

use std::path::{Path, PathBuf};

use codespan_reporting::diagnostic::{
    Diagnostic as CsDiagnostic, Label as CsLabel, Severity as CsSeverity,
};
use codespan_reporting::files::{Files as _, SimpleFiles};
use codespan_reporting::term::{self, termcolor, Styles, StylesWriter};
use serde::Serialize;

use crate::codes::Code;
use crate::diag::{Diagnostic, Severity};

/// Lines longer than this are not quoted whole: an excerpt around the span is shown.
pub const MAX_QUOTED_LINE: usize = 200;
/// Characters shown on each side of a span on a long line.
const EXCERPT_SIDE: usize = 40;

/// The files diagnostics point into.
#[derive(Default)]
pub struct Sources {
    files: SimpleFiles<String, String>,
    ids: Vec<(PathBuf, usize)>,
}

impl Sources {
    /// The files `diags` point into (a catalog of tens of MiB is indexed only when a
    /// diagnostic needs it).
    pub fn for_diagnostics(
        files: &[(std::path::PathBuf, String)],
        diags: &[Diagnostic],
    ) -> Sources {
        let mut s = Sources::default();
        for (p, text) in files {
            if diags.iter().any(|d| d.file == *p) {
                s.add(p, text);
            }
        }
        s
    }

    pub fn add(&mut self, path: &Path, text: &str) {
        if self.id(path).is_none() {
            let id = self.files.add(path.display().to_string(), text.to_string());
            self.ids.push((path.to_path_buf(), id));
        }
    }

    fn id(&self, path: &Path) -> Option<usize> {
        self.ids.iter().find(|(p, _)| p == path).map(|(_, id)| *id)
    }

    fn text(&self, path: &Path) -> Option<&str> {
        let id = self.id(path)?;
        self.files.get(id).ok().map(|f| f.source().as_str())
    }

    /// The byte range of the line holding `offset`.
    fn line_range(&self, id: usize, offset: usize) -> Option<(usize, std::ops::Range<usize>)> {
        let line = self.files.line_index(id, offset).ok()?;
        Some((line, self.files.line_range(id, line).ok()?))
    }

    /// 1-based line and column (in characters) of a byte offset.
    pub fn line_col(&self, path: &Path, offset: usize) -> Option<(usize, usize)> {
        let text = self.text(path)?;
        let id = self.id(path)?;
        let offset = clamp(text, offset);
        let (line, range) = self.line_range(id, offset)?;
        let col = text.get(range.start..offset)?.chars().count() + 1;
        Some((line + 1, col))
    }

    /// `span` lies on a line too long to quote: a short excerpt of it, with a caret line.
    fn excerpt(&self, path: &Path, span: (usize, usize)) -> Option<String> {
        let text = self.text(path)?;
        let id = self.id(path)?;
        let (_, range) = self.line_range(id, clamp(text, span.0))?;
        if range.len() <= MAX_QUOTED_LINE {
            return None;
        }
        let start = clamp(text, span.0.saturating_sub(EXCERPT_SIDE).max(range.start));
        let mark_end = clamp(text, span.1.max(span.0 + 1).min(span.0 + EXCERPT_SIDE));
        let end = clamp(text, (mark_end + EXCERPT_SIDE).min(range.end));
        let before = text.get(start..clamp(text, span.0))?;
        let marked = text.get(clamp(text, span.0)..mark_end)?;
        let after = text.get(mark_end..end)?;
        let lead = if start > range.start { "…" } else { "" };
        let tail = if end < range.end { "…" } else { "" };
        let shown = |s: &str| s.replace(['\t', '\r'], " ");
        let pad = lead.chars().count() + before.chars().count();
        Some(format!(
            "excerpt of a {}-byte line:\n    {lead}{}{}{}{tail}\n    {}{}",
            range.len(),
            shown(before),
            shown(marked),
            shown(after),
            " ".repeat(pad),
            "^".repeat(marked.chars().count().max(1))
        ))
    }
}

fn clamp(text: &str, mut offset: usize) -> usize {
    offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    offset
}

/// Whether to colour human output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Color {
    Always,
    Never,
}

fn build(sources: &Sources, d: &Diagnostic) -> CsDiagnostic<usize> {
    let severity = match d.severity {
        Severity::Error => CsSeverity::Error,
        Severity::Warning => CsSeverity::Warning,
    };
    let mut cs = CsDiagnostic::new(severity)
        .with_code(d.code.as_str())
        .with_message(&d.message);
    let mut notes = Vec::new();
    let mut trailing = d.notes.clone();
    match (sources.id(&d.file), d.span) {
        (Some(id), Some((start, end))) => {
            let text = sources.text(&d.file).unwrap_or("");
            let (s, e) = (clamp(text, start), clamp(text, end.max(start)));
            match sources.excerpt(&d.file, (s, e)) {
                None => {
                    let mut labels = vec![CsLabel::primary(id, s..e).with_message(&d.label)];
                    for l in &d.secondary {
                        if sources.excerpt(&d.file, l.span).is_none() {
                            labels.push(
                                CsLabel::secondary(
                                    id,
                                    clamp(text, l.span.0)..clamp(text, l.span.1),
                                )
                                .with_message(&l.message),
                            );
                        }
                    }
                    cs = cs.with_labels(labels);
                }
                Some(excerpt) => {
                    let (line, col) = sources.line_col(&d.file, s).unwrap_or((1, 1));
                    notes.push(format!(
                        "at {}:{line}:{col}: {}\n{excerpt}",
                        d.file.display(),
                        d.label
                    ));
                }
            }
        }
        _ => notes.push(format!("in {}", d.file.display())),
    }
    notes.append(&mut trailing);
    if !d.help.is_empty() {
        notes.push(format!("help: {}", d.help));
    }
    cs.with_notes(notes)
}

/// Renders one diagnostic as rustc-like text, without colour.
pub fn human(sources: &Sources, d: &Diagnostic) -> String {
    human_with(sources, d, Color::Never)
}

/// Renders one diagnostic as rustc-like text, in colour when asked.
pub fn human_with(sources: &Sources, d: &Diagnostic, color: Color) -> String {
    let cs = build(sources, d);
    let config = term::Config::default();
    let fallback =
        |e: &dyn std::fmt::Display| format!("{}[{}]: {} ({e})\n", "error", d.code, d.message);
    match color {
        Color::Never => {
            term::emit_into_string(&config, &sources.files, &cs).unwrap_or_else(|e| fallback(&e))
        }
        Color::Always => {
            let mut buf = termcolor::Buffer::ansi();
            let styles = Styles::default();
            let mut w = StylesWriter::new(&mut buf, &styles);
            match term::emit_to_write_style(&mut w, &config, &sources.files, &cs) {
                Ok(()) => String::from_utf8_lossy(buf.as_slice()).into_owned(),
                Err(e) => fallback(&e),
            }
        }
    }
}

#[derive(Serialize)]
pub struct JsonDiagnostic<'a> {
    pub code: Code,
    pub severity: Severity,
    pub message: &'a str,
    pub file: String,
    pub line: Option<usize>,
    pub column: Option<usize>,
    pub end_line: Option<usize>,
    pub end_column: Option<usize>,
    pub help: &'a str,
    pub notes: &'a [String],
}

pub fn json<'a>(sources: &Sources, d: &'a Diagnostic) -> JsonDiagnostic<'a> {
    let start = d.span.and_then(|s| sources.line_col(&d.file, s.0));
    let end = d.span.and_then(|s| sources.line_col(&d.file, s.1));
    JsonDiagnostic {
        code: d.code,
        severity: d.severity,
        message: &d.message,
        file: d.file.display().to_string(),
        line: start.map(|p| p.0),
        column: start.map(|p| p.1),
        end_line: end.map(|p| p.0),
        end_column: end.map(|p| p.1),
        help: &d.help,
        notes: &d.notes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_span_on_a_long_line_is_shown_as_an_excerpt() {
        let text = format!("{{\"items\": [{}]}}", "{\"sku\": \"A\"},".repeat(5000));
        let mut sources = Sources::default();
        sources.add(Path::new("c.json"), &text);
        let d = Diagnostic::new(Code::CatalogMalformed, "c.json", "dup")
            .at((30_000, 30_001), "here")
            .help("fix");
        let out = human(&sources, &d);
        assert!(out.len() < 1_000, "{} bytes:\n{out}", out.len());
        assert!(out.contains("excerpt of a"), "{out}");
        assert!(out.contains("c.json:1:30001"), "{out}");
    }
}
