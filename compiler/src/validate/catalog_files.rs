//! The two JSON files a catalog is checked from — the stub catalog and the inventory
//! snapshot: where they are, and how a problem in one of them is reported. The stubs check,
//! the inventory snapshot and the explicit doors (`bake`, the registry) all need these, and
//! none of them owns the others.

use std::path::Path;

use crate::codes::Code;
use crate::diag::Diagnostic;

/// The catalog and inventory snapshot files to validate against.
#[derive(Debug, Clone, Copy)]
pub struct CatalogFiles<'a> {
    pub stubs: &'a Path,
    pub inventory: &'a Path,
}

/// Where the two files are.
#[derive(Clone, Copy)]
pub enum Files<'a> {
    /// As the policy names them, relative to `base` (the policy's directory).
    Declared { base: &'a Path, allow_outside: bool },
    /// Named by the caller (`understudy bake --catalog … --inventory …`).
    Given(CatalogFiles<'a>),
}

/// A catalog export in the wrong encoding often still "reads": UTF-16 text of ASCII is
/// valid UTF-8 with a NUL after every letter, and serde_json then reports a baffling
/// syntax error. Name the encoding instead.
pub fn encoding_problem(path: &Path) -> Option<Diagnostic> {
    // The first 64 KiB tell: a byte-order mark, or NULs between ASCII letters.
    let bytes = crate::files::head(path, 64 << 10)?;
    let problem = if bytes.starts_with(&[0xff, 0xfe]) || bytes.starts_with(&[0xfe, 0xff]) {
        "is UTF-16 (it starts with a UTF-16 byte-order mark)".to_string()
    } else if bytes.starts_with(&[0xef, 0xbb, 0xbf]) {
        "starts with a UTF-8 byte-order mark, which JSON does not allow".to_string()
    } else if let Some(at) = bytes.iter().position(|&b| b == 0) {
        format!("contains a NUL byte at offset {at}: it is probably UTF-16 or UTF-32, not UTF-8")
    } else {
        return None;
    };
    Some(
        Diagnostic::new(
            Code::CatalogUnreadable,
            path,
            format!("`{}` {problem}", path.display()),
        )
        .help(
            "export the catalog and the inventory snapshot as UTF-8 JSON without a byte-order mark",
        ),
    )
}

/// Most problems of one kind listed in a diagnostic's notes: a catalog with a thousand
/// broken items gets a short report, not a thousand lines.
pub const MAX_LISTED: usize = 20;

/// The first [`MAX_LISTED`] of `items`, then how many more there are.
pub fn listed(items: &[String]) -> Vec<String> {
    let mut out: Vec<String> = items.iter().take(MAX_LISTED).cloned().collect();
    if items.len() > MAX_LISTED {
        out.push(format!("… and {} more", items.len() - MAX_LISTED));
    }
    out
}

/// A problem located in a JSON file by line and column (1-based).
pub fn json_error(
    path: &Path,
    text: &str,
    line: usize,
    column: usize,
    message: String,
    help: &str,
) -> Diagnostic {
    let offset = offset_of(text, line, column);
    Diagnostic::new(Code::CatalogMalformed, path, message)
        .at((offset, (offset + 1).min(text.len().max(offset))), "here")
        .help(help)
}

fn offset_of(text: &str, line: usize, column: usize) -> usize {
    let mut off = 0;
    for (i, l) in text.split_inclusive('\n').enumerate() {
        if i + 1 == line {
            return (off + column.saturating_sub(1)).min(text.len());
        }
        off += l.len();
    }
    text.len()
}
