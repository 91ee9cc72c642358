//! Reading tables with toml-span's `TableHelper`, the cargo-deny way, plus the two things a
//! policy checker needs on top: an unknown key is reported without discarding its table
//! (the table's other keys are still good), and a part that fails keeps its errors instead
//! of failing its parent ([`Part`]). [`Problems`] collects every error left in the tree.

use toml_span::de_helpers::TableHelper;
use toml_span::value::Value;
use toml_span::{DeserError, Deserialize, Error, ErrorKind};

use super::leaf::{Part, Spanned};

/// A table being read, with its span (for "missing key" errors).
pub struct Table<'de> {
    pub th: TableHelper<'de>,
    pub span: toml_span::Span,
}

impl<'de> Table<'de> {
    pub fn new(v: &mut Value<'de>) -> Result<Table<'de>, DeserError> {
        let span = v.span;
        Ok(Table {
            th: TableHelper::new(v)?,
            span,
        })
    }

    pub fn req<T: Deserialize<'de>>(&mut self, key: &'static str) -> Option<Spanned<T>> {
        self.th.required_s::<Spanned<T>>(key).ok().map(|s| s.value)
    }

    pub fn opt<T: Deserialize<'de>>(&mut self, key: &'static str) -> Option<Spanned<T>> {
        self.th.optional::<Spanned<T>>(key)
    }

    /// A required part: missing or wrong, its errors stay inside it.
    pub fn part<T: Deserialize<'de>>(&mut self, key: &'static str) -> Part<T> {
        match self.th.take(key) {
            Some((_, mut v)) => Part::deserialize(&mut v).unwrap_or_else(|e| Part::Bad(e.errors)),
            None => Part::Bad(vec![Error {
                kind: ErrorKind::MissingField(key),
                span: self.span,
                line_info: None,
            }]),
        }
    }

    pub fn opt_part<T: Deserialize<'de>>(&mut self, key: &'static str) -> Option<Part<T>> {
        let (_, mut v) = self.th.take(key)?;
        Some(Part::deserialize(&mut v).unwrap_or_else(|e| Part::Bad(e.errors)))
    }

    /// Whether `key` is present (not yet read).
    pub fn has(&self, key: &str) -> bool {
        self.th.contains(key)
    }

    /// Finishes the table: unknown keys come back to be kept with the value (they do not
    /// make it wrong); any other error fails it, unknown keys included.
    pub fn finish(self) -> Result<Vec<Error>, DeserError> {
        match self.th.finalize(None) {
            Ok(()) => Ok(Vec::new()),
            Err(e) => {
                let (unknown, other): (Vec<Error>, Vec<Error>) = e
                    .errors
                    .into_iter()
                    .partition(|e| matches!(e.kind, ErrorKind::UnexpectedKeys { .. }));
                if other.is_empty() {
                    Ok(unknown)
                } else {
                    Err(DeserError {
                        errors: other.into_iter().chain(unknown).collect(),
                    })
                }
            }
        }
    }
}

/// Every error left in a read tree: unknown keys of good tables and the errors of parts
/// that failed.
pub trait Problems {
    fn problems(&self, out: &mut Vec<Error>);
}

impl<T: Problems> Problems for Part<T> {
    fn problems(&self, out: &mut Vec<Error>) {
        match self {
            Part::Ok(t) => t.problems(out),
            Part::Bad(e) => out.extend(e.iter().cloned()),
        }
    }
}

impl<T: Problems> Problems for Option<T> {
    fn problems(&self, out: &mut Vec<Error>) {
        if let Some(t) = self {
            t.problems(out);
        }
    }
}

impl<T: Problems> Problems for Spanned<T> {
    fn problems(&self, out: &mut Vec<Error>) {
        self.value.problems(out);
    }
}

impl<T: Problems> Problems for Vec<T> {
    fn problems(&self, out: &mut Vec<Error>) {
        for t in self {
            t.problems(out);
        }
    }
}

/// Unknown keys of a good table.
#[derive(Debug, Clone, Default)]
pub struct Unknown(pub Vec<Error>);

impl Problems for Unknown {
    fn problems(&self, out: &mut Vec<Error>) {
        out.extend(self.0.iter().cloned());
    }
}
