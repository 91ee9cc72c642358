//! Phase one, the cargo-deny way: TOML → the typed raw policy ([`RawPolicy`]), every value
//! with its span, every problem of a single value reported with its code — and the JSON
//! Schema derived from the same types ([`schema::schema`]), so an editor and `check` accept
//! the same values.
//!
//! Reading never stops at the first problem: a part of the policy that is wrong keeps its
//! errors ([`leaf::Part`]) and the rest is read, so `validate` can still check every part
//! that read.

pub mod breaker;
pub mod cascade;
pub mod disclose;
pub mod duration;
pub mod events;
mod index;
pub mod leaf;
pub mod origin;
pub mod policy;
mod problem;
pub mod rollout;
pub mod route;
pub mod schema;
mod strings;
pub mod table;
pub mod tier;

use std::path::Path;

pub use origin::host_of;
pub use policy::RawPolicy;

use crate::diag::Diagnostic;
use table::Problems;

/// What reading a policy's text gave.
pub struct Parsed {
    /// `None` only when the text is not TOML.
    pub raw: Option<RawPolicy>,
    /// Every problem found while reading, in the order of the text.
    pub diagnostics: Vec<Diagnostic>,
}

/// Reads policy `text` (as if from `file`, which diagnostics name).
pub fn parse(file: &Path, text: &str) -> Parsed {
    let mut root = match toml_span::parse(text) {
        Ok(v) => v,
        Err(e) => {
            return Parsed {
                raw: None,
                diagnostics: vec![problem::syntax_error(&e, file)],
            }
        }
    };
    let index = index::Index::new(&root);
    let raw = RawPolicy::read(&mut root);
    let mut errors = Vec::new();
    raw.problems(&mut errors);
    let mut diagnostics: Vec<Diagnostic> = errors
        .iter()
        .flat_map(|e| problem::diagnostics(e, file, &index))
        .collect();
    diagnostics.sort_by_key(|d| d.span.map(|s| s.0));
    Parsed {
        raw: Some(raw),
        diagnostics,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_are_extracted_for_domain_checks() {
        assert_eq!(
            host_of("https://ML.example:8443/x").as_deref(),
            Some("ml.example")
        );
        assert_eq!(
            host_of("http://user@127.0.0.1:8788").as_deref(),
            Some("127.0.0.1")
        );
        assert_eq!(host_of("ftp://x"), None);
        assert_eq!(host_of("https:///x"), None);
    }
}
