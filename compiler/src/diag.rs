//! Diagnostics: what is wrong, where, and how to fix it.

use std::path::PathBuf;

use serde::Serialize;

pub use crate::codes::Code;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
}

/// A byte range into a file's text.
pub type Span = (usize, usize);

/// A secondary location shown with the diagnostic.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Label {
    pub span: Span,
    pub message: String,
}

/// One problem. `span` is a byte range into `file`'s text; `None` for file-level problems.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    pub code: Code,
    pub severity: Severity,
    pub message: String,
    pub file: PathBuf,
    pub span: Option<Span>,
    /// Text under the primary span's underline.
    pub label: String,
    pub secondary: Vec<Label>,
    /// Extra lines (arithmetic, lists of offending items).
    pub notes: Vec<String>,
    /// How to fix it.
    pub help: String,
}

impl Diagnostic {
    /// A problem with `code` in `file`; its severity follows the code (`WARN_…` codes
    /// are warnings). Fill in the rest with the builder methods.
    pub fn new(code: Code, file: impl Into<PathBuf>, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            code,
            severity: if code.is_warning() {
                Severity::Warning
            } else {
                Severity::Error
            },
            message: message.into(),
            file: file.into(),
            span: None,
            label: String::new(),
            secondary: Vec::new(),
            notes: Vec::new(),
            help: String::new(),
        }
    }

    pub fn at(mut self, span: Span, label: impl Into<String>) -> Diagnostic {
        self.span = Some(span);
        self.label = label.into();
        self
    }

    pub fn also(mut self, span: Span, message: impl Into<String>) -> Diagnostic {
        self.secondary.push(Label {
            span,
            message: message.into(),
        });
        self
    }

    pub fn note(mut self, note: impl Into<String>) -> Diagnostic {
        self.notes.push(note.into());
        self
    }

    pub fn notes(mut self, notes: impl IntoIterator<Item = String>) -> Diagnostic {
        self.notes.extend(notes);
        self
    }

    pub fn help(mut self, help: impl Into<String>) -> Diagnostic {
        self.help = help.into();
        self
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}
