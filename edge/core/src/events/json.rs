//! [V-INGEST] JSON whose objects never hold one key twice. serde_json keeps the last of two
//! equal keys and other parsers keep the first, so `{"total": 1, "total": 9999}` could be
//! checked at the edge as one event and processed by the consumer as another. Event bodies
//! are read with [`parse`] instead: a duplicate key at any depth is refused, with its path.
//!
//! It builds the same [`Value`] serde_json would, in one pass with one map lookup per key;
//! the body's size is already bounded (`max_body_bytes`) and serde_json's recursion limit
//! (128 levels) still applies.

use std::cell::RefCell;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::map::Entry;
use serde_json::{Map, Value};

/// Longest key segment shown in a path (the envelope's other refusals show 40 too).
const MAX_SEGMENT: usize = 40;
/// Longest path shown.
const MAX_PATH: usize = 200;

/// Why a body is not JSON with unique keys.
#[derive(Debug)]
pub enum Error {
    /// Not JSON (serde_json's error, with the line and column).
    Syntax(serde_json::Error),
    /// This key occurs twice in one object: its path, `payload.lines[1].sku`.
    Duplicate(String),
}

/// Parses `body`, refusing any object that holds a key twice (keys compared after
/// unescaping, as the consumer's parser will see them).
pub fn parse(body: &[u8]) -> Result<Value, Error> {
    let found = RefCell::new(None);
    let mut de = serde_json::Deserializer::from_slice(body);
    let parsed = Unique(&found)
        .deserialize(&mut de)
        .and_then(|v| de.end().map(|()| v));
    match (parsed, found.into_inner()) {
        (_, Some(segments)) => Err(Error::Duplicate(path(segments))),
        (Ok(v), None) => Ok(v),
        (Err(e), None) => Err(Error::Syntax(e)),
    }
}

/// One path segment, innermost first: an object key or an array index.
enum Segment {
    Key(String),
    Index(usize),
}

/// The path of a duplicate, from its segments innermost first.
fn path(segments: Vec<Segment>) -> String {
    let mut out = String::new();
    for s in segments.into_iter().rev() {
        match s {
            Segment::Index(i) => out.push_str(&format!("[{i}]")),
            Segment::Key(k) => {
                if !out.is_empty() {
                    out.push('.');
                }
                // Keys are the producer's text: no control characters, bounded.
                out.extend(k.chars().filter(|c| !c.is_control()).take(MAX_SEGMENT));
            }
        }
    }
    match out.char_indices().nth(MAX_PATH) {
        Some((cut, _)) => format!("{}…", &out[..cut]),
        None => out,
    }
}

/// The seed (and visitor) that builds a [`Value`] and records where a duplicate key is: the
/// innermost object sets the key, and every enclosing level adds its own segment while the
/// error unwinds — so the path costs nothing unless there is a duplicate.
#[derive(Clone, Copy)]
struct Unique<'a>(&'a RefCell<Option<Vec<Segment>>>);

impl Unique<'_> {
    /// Adds `segment` to the path of a duplicate found below it (a syntax error has none).
    fn within(self, segment: impl FnOnce() -> Segment) {
        if let Some(path) = self.0.borrow_mut().as_mut() {
            path.push(segment());
        }
    }
}

impl<'de> DeserializeSeed<'de> for Unique<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Unique<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, b: bool) -> Result<Value, E> {
        Ok(Value::Bool(b))
    }

    fn visit_i64<E>(self, n: i64) -> Result<Value, E> {
        Ok(Value::from(n))
    }

    fn visit_u64<E>(self, n: u64) -> Result<Value, E> {
        Ok(Value::from(n))
    }

    fn visit_f64<E>(self, n: f64) -> Result<Value, E> {
        Ok(Value::from(n))
    }

    fn visit_str<E>(self, s: &str) -> Result<Value, E> {
        Ok(Value::String(s.to_owned()))
    }

    fn visit_string<E>(self, s: String) -> Result<Value, E> {
        Ok(Value::String(s))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        loop {
            match seq.next_element_seed(self) {
                Ok(Some(v)) => items.push(v),
                Ok(None) => return Ok(Value::Array(items)),
                Err(e) => {
                    self.within(|| Segment::Index(items.len()));
                    return Err(e);
                }
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut m = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            match m.entry(key) {
                Entry::Occupied(o) => {
                    *self.0.borrow_mut() = Some(vec![Segment::Key(o.key().clone())]);
                    return Err(de::Error::custom("duplicate key"));
                }
                Entry::Vacant(slot) => match map.next_value_seed(self) {
                    Ok(v) => {
                        slot.insert(v);
                    }
                    Err(e) => {
                        self.within(|| Segment::Key(slot.key().clone()));
                        return Err(e);
                    }
                },
            }
        }
        Ok(Value::Object(m))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_reads_what_serde_json_reads() {
        let text = r#"{"a":[1,-2,3.5,"x\u00e9",null,true,{"b":{}}],"c":18446744073709551615}"#;
        let v = parse(text.as_bytes()).unwrap();
        assert_eq!(v, serde_json::from_str::<Value>(text).unwrap());
        assert!(matches!(parse(b"{\"a\":1} x"), Err(Error::Syntax(_))));
        assert!(matches!(parse(b"{\"a\":"), Err(Error::Syntax(_))));
    }

    #[test]
    fn a_duplicate_is_named_by_its_path() {
        let dup = |t: &str| match parse(t.as_bytes()) {
            Err(Error::Duplicate(p)) => p,
            other => panic!("{t}: {other:?}"),
        };
        assert_eq!(dup(r#"{"a":1,"a":2}"#), "a");
        assert_eq!(dup(r#"{"a":{"b":[0,{"c":1,"c":1}]}}"#), "a.b[1].c");
        assert_eq!(dup(r#"[[{"k\n":1,"k\n":2}]]"#), "[0][0].k");
        let long = format!(
            r#"{{"{0}":{{"{0}":{{"{0}":{{"{0}":{{"{0}":{{"{0}":1,"{0}":2}}}}}}}}}}}}"#,
            "k".repeat(60)
        );
        let p = dup(&long);
        assert!(p.ends_with('…') && p.chars().count() == MAX_PATH + 1, "{p}");
    }
}
