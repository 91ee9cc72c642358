//! Where each key sits: the key path (`cascade.tiers[1].read_timeout`) of every value and
//! table in the document, found by its span. Diagnostics name the key they are about
//! without each value having to know its own place.

use std::collections::BTreeMap;

use toml_span::value::Value;

#[derive(Debug, Default)]
pub struct Index {
    /// A value's (or a key's) span → its key path.
    by_span: BTreeMap<(usize, usize), String>,
}

impl Index {
    pub fn new(root: &Value<'_>) -> Index {
        let mut index = Index::default();
        index.walk(root, "");
        index
    }

    fn walk(&mut self, v: &Value<'_>, path: &str) {
        self.by_span
            .entry((v.span.start, v.span.end))
            .or_insert_with(|| path.to_string());
        if let Some(table) = v.as_table() {
            for (k, child) in table {
                let p = if path.is_empty() {
                    k.name.to_string()
                } else {
                    format!("{path}.{}", k.name)
                };
                self.by_span.insert((k.span.start, k.span.end), p.clone());
                self.walk(child, &p);
            }
        } else if let Some(items) = v.as_array() {
            for (i, child) in items.iter().enumerate() {
                self.walk(child, &format!("{path}[{i}]"));
            }
        }
    }

    /// The key path of the value (or key) at `span`: the exact span first, else the
    /// innermost value containing its start (a problem inside a string).
    pub fn path_of(&self, span: (usize, usize)) -> Option<String> {
        if let Some(p) = self.by_span.get(&span) {
            return Some(p.clone());
        }
        self.by_span
            .iter()
            .filter(|((start, end), _)| *start <= span.0 && span.0 < *end)
            .min_by_key(|((start, end), _)| end - start)
            .map(|(_, p)| p.clone())
    }
}
