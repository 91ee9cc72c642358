//! What a file's code weighs: its lines that are not test code, wherever the tests sit.

use crate::read::{lex, test_items};

/// The lines of `text` that are not test code: every line, blank and comment lines
/// included, but those a `#[cfg(test)]` item (a module, a `fn`, an `impl`, a `use`…) covers
/// wholly, wherever the item sits in the file. An item covers the lines from its attribute
/// to its end, and the comments and attributes just above it (its doc comment).
pub fn code_lines(text: &str) -> usize {
    let code = lex(text);
    let lexed: Vec<&str> = code.split('\n').collect();
    let source: Vec<&str> = text.split('\n').collect();
    assert_eq!(lexed.len(), source.len(), "the lexer keeps every line");
    // The byte where each line of `code` starts, and the line a byte sits on.
    let starts: Vec<usize> = std::iter::once(0)
        .chain(code.match_indices('\n').map(|(i, _)| i + 1))
        .collect();
    let line_of = |at: usize| starts.partition_point(|&s| s <= at) - 1;
    let end_of = |line: usize| starts.get(line + 1).map_or(code.len(), |s| s - 1);
    let blank = |s: &str| s.trim().is_empty();

    let mut test = vec![false; lexed.len()];
    for item in test_items(&code) {
        let (first, last) = (line_of(item.start), line_of(item.end - 1));
        // A line the item shares with code stays code.
        let from = first + usize::from(!blank(&code[starts[first]..item.start]));
        let to_end = code.get(item.end..end_of(last)).unwrap_or("");
        let to = (last + 1).saturating_sub(usize::from(!blank(to_end)));
        for t in test.iter_mut().take(to).skip(from) {
            *t = true;
        }
        // Its doc comment and other attributes above it.
        let mut above = from;
        while above > 0 && !test[above - 1] && from < to {
            let (l, s) = (lexed[above - 1].trim(), source[above - 1].trim());
            let comment = l.is_empty() && !s.is_empty();
            let attribute = l.starts_with("#[") && l.ends_with(']');
            if !(comment || attribute) {
                break;
            }
            above -= 1;
            test[above] = true;
        }
    }
    (0..text.lines().count()).filter(|&l| !test[l]).count()
}
