//! Diagnostics: what is wrong, where, and how to fix it.

use std::path::PathBuf;

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
}

/// A secondary location shown with the diagnostic.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Label {
    pub span: (usize, usize),
    pub message: String,
}

/// One problem. `span` is a byte range into `file`'s text; `None` for file-level problems.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    pub code: &'static str,
    pub severity: Severity,
    pub message: String,
    pub file: PathBuf,
    pub span: Option<(usize, usize)>,
    /// Text under the primary span's underline.
    pub label: String,
    pub secondary: Vec<Label>,
    /// Extra lines (arithmetic, lists of offending items).
    pub notes: Vec<String>,
    /// How to fix it.
    pub help: String,
}

impl Diagnostic {
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}
