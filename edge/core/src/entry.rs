//! [E-CASCADE] What a KV tier's entry must look like: a JSON value `{"items":[...]}` and its
//! write time in the key's metadata `{"written_at": <ms>}` (or, for entries written by other
//! tools, a `written_at` field in the value). Anything else is a miss with a reason, never a
//! 500: KV holds what other programs wrote.

use serde_json::Value;

use crate::classify::{items_at, Items};
use crate::time::Millis;

/// The metadata the edge writes with every entry.
pub const WRITTEN_AT: &str = "written_at";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub items: Items,
    pub written_at: Millis,
}

/// Why an entry cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntryMiss {
    Absent,
    NotJson,
    BadShape(String),
    NoTimestamp,
}

impl EntryMiss {
    pub fn code(&self) -> &'static str {
        match self {
            EntryMiss::Absent => "KV_ABSENT",
            EntryMiss::NotJson => "KV_NOT_JSON",
            EntryMiss::BadShape(_) => "KV_BAD_SHAPE",
            EntryMiss::NoTimestamp => "KV_NO_TIMESTAMP",
        }
    }

    pub fn detail(&self) -> String {
        match self {
            EntryMiss::Absent => "no entry under this key".into(),
            EntryMiss::NotJson => "value is not JSON".into(),
            EntryMiss::BadShape(e) => format!("value is not {{\"items\":[...]}}: {e}"),
            EntryMiss::NoTimestamp => {
                "no `written_at` (ms since epoch) in metadata or value".into()
            }
        }
    }
}

/// Parses a KV read: the value's text and the key's metadata.
pub fn parse(value: Option<&str>, metadata: Option<&Value>) -> Result<Entry, EntryMiss> {
    let text = value.ok_or(EntryMiss::Absent)?;
    let root: Value = serde_json::from_str(text).map_err(|_| EntryMiss::NotJson)?;
    let written_at = metadata
        .and_then(timestamp)
        .or_else(|| timestamp(&root))
        .ok_or(EntryMiss::NoTimestamp)?;
    let items =
        items_at(root, &[String::from("items")]).map_err(|e| EntryMiss::BadShape(e.to_string()))?;
    Ok(Entry { items, written_at })
}

/// `written_at` as a non-negative whole number of milliseconds.
fn timestamp(v: &Value) -> Option<Millis> {
    let n = v.get(WRITTEN_AT)?;
    n.as_u64()
        .or_else(|| {
            n.as_f64()
                .filter(|f| f.is_finite() && *f >= 0.0 && *f < 1e15)
                .map(|f| f as u64)
        })
        .map(Millis)
}

/// The value and metadata the edge writes for `items` at `now`.
pub fn render(items: &[String], now: Millis) -> (String, Value) {
    let value = format!("{{\"items\":[{}]}}", items.join(","));
    let mut meta = serde_json::Map::new();
    meta.insert(WRITTEN_AT.into(), Value::from(now.0));
    (value, Value::Object(meta))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_value_and_metadata() {
        let e = parse(
            Some(r#"{"items":[{"sku":"1"}]}"#),
            Some(&json!({"written_at": 1234})),
        )
        .unwrap();
        assert_eq!(
            e,
            Entry {
                items: vec![r#"{"sku":"1"}"#.into()],
                written_at: Millis(1234)
            }
        );
    }

    #[test]
    fn falls_back_to_a_timestamp_in_the_value() {
        let e = parse(Some(r#"{"items":[1],"written_at":99}"#), None).unwrap();
        assert_eq!(e.written_at, Millis(99));
        let e = parse(
            Some(r#"{"items":[1],"written_at":99}"#),
            Some(&json!({"other": 1})),
        )
        .unwrap();
        assert_eq!(e.written_at, Millis(99));
    }

    #[test]
    fn what_is_not_an_entry_is_a_miss_with_a_reason() {
        let m = json!({"written_at": 1});
        assert_eq!(parse(None, None), Err(EntryMiss::Absent));
        assert_eq!(parse(Some("<html>"), Some(&m)), Err(EntryMiss::NotJson));
        assert_eq!(
            parse(Some(r#"{"items":[1]}"#), None),
            Err(EntryMiss::NoTimestamp)
        );
        assert_eq!(
            parse(
                Some(r#"{"items":[1]}"#),
                Some(&json!({"written_at": "yesterday"}))
            ),
            Err(EntryMiss::NoTimestamp)
        );
        assert_eq!(
            parse(Some(r#"{"items":[1]}"#), Some(&json!({"written_at": -5}))),
            Err(EntryMiss::NoTimestamp)
        );
        assert_eq!(
            parse(Some(r#"{"items":[]}"#), Some(&m)).unwrap_err().code(),
            "KV_BAD_SHAPE"
        );
        assert_eq!(
            parse(Some(r#"{"recs":[1]}"#), Some(&m)).unwrap_err().code(),
            "KV_BAD_SHAPE"
        );
        assert_eq!(
            parse(Some(r#"[1]"#), Some(&m)).unwrap_err().code(),
            "KV_BAD_SHAPE"
        );
        assert_eq!(
            parse(Some(r#"[1]"#), None).unwrap_err().code(),
            "KV_NO_TIMESTAMP"
        );
    }

    #[test]
    fn what_the_edge_writes_it_can_read_back() {
        let items = vec![r#"{"sku":"1"}"#.to_string(), "2".into()];
        let (value, meta) = render(&items, Millis(42));
        let e = parse(Some(&value), Some(&meta)).unwrap();
        assert_eq!(
            e,
            Entry {
                items,
                written_at: Millis(42)
            }
        );
    }
}
