//! Rendering diagnostics: rustc-like text with the TOML span underlined, or JSON for
//! machines. Rendering lives apart from the rules that produce diagnostics.

use std::path::{Path, PathBuf};

use codespan_reporting::diagnostic::{
    Diagnostic as CsDiagnostic, Label as CsLabel, Severity as CsSeverity,
};
use codespan_reporting::files::SimpleFiles;
use codespan_reporting::term;
use serde::Serialize;

use crate::diag::{Diagnostic, Severity};

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

    /// 1-based line and column (in characters) of a byte offset.
    pub fn line_col(&self, path: &Path, offset: usize) -> Option<(usize, usize)> {
        let text = self.text(path)?;
        let offset = clamp(text, offset);
        let before = &text[..offset];
        let line = before.matches('\n').count() + 1;
        let col = before
            .rsplit('\n')
            .next()
            .map(|l| l.chars().count())
            .unwrap_or(0)
            + 1;
        Some((line, col))
    }
}

fn clamp(text: &str, mut offset: usize) -> usize {
    offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    offset
}

/// Renders one diagnostic as rustc-like text.
pub fn human(sources: &Sources, d: &Diagnostic) -> String {
    let severity = match d.severity {
        Severity::Error => CsSeverity::Error,
        Severity::Warning => CsSeverity::Warning,
    };
    let mut cs = CsDiagnostic::new(severity)
        .with_code(d.code)
        .with_message(&d.message);
    let mut notes = d.notes.clone();
    match (sources.id(&d.file), d.span) {
        (Some(id), Some((start, end))) => {
            let text = sources.text(&d.file).unwrap_or("");
            let (s, e) = (clamp(text, start), clamp(text, end.max(start)));
            let mut labels = vec![CsLabel::primary(id, s..e).with_message(&d.label)];
            for l in &d.secondary {
                labels.push(
                    CsLabel::secondary(id, clamp(text, l.span.0)..clamp(text, l.span.1))
                        .with_message(&l.message),
                );
            }
            cs = cs.with_labels(labels);
        }
        _ => notes.insert(0, format!("in {}", d.file.display())),
    }
    if !d.help.is_empty() {
        notes.push(format!("help: {}", d.help));
    }
    cs = cs.with_notes(notes);
    let config = term::Config::default();
    term::emit_into_string(&config, &sources.files, &cs)
        .unwrap_or_else(|e| format!("{}[{}]: {} ({e})\n", "error", d.code, d.message))
}

#[derive(Serialize)]
pub struct JsonDiagnostic<'a> {
    pub code: &'a str,
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
