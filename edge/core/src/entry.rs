//! [E-CASCADE] What a KV tier's entry must look like: a JSON value `{"items":[...]}` and its
//! write time in the key's metadata `{"written_at": <ms>}` (or, for entries written by other
//! tools, a `written_at` field in the value). Anything else is a miss with a reason, never a
//! 500: KV holds what other programs wrote.
//!
//! [B-PUBLISH] A *published* (curated) tier's entries are answers only with the validation
//! `understudy publish` puts in their metadata: `{"snapshot_at": <ms>, "validated_at": <ms>}`
//! — the inventory snapshot the SKUs were checked against, and when. Their age counts from
//! the earlier of the two (the evidence: a re-validation today of yesterday's snapshot knows
//! nothing newer), exactly as the baked stubs' does. An entry without both — written by
//! anything else, or by the edge's own write-through — is a miss (`KV_NOT_VALIDATED`),
//! never an answer: seed 000 forbids serving a fallback item that did not pass inventory
//! validation.

use serde_json::Value;

use crate::classify::{items_at, Items};
use crate::time::Millis;

/// The metadata the edge writes with every entry.
pub const WRITTEN_AT: &str = "written_at";
/// A published entry's metadata: when its inventory snapshot was taken (ms since epoch).
pub const SNAPSHOT_AT: &str = "snapshot_at";
/// A published entry's metadata: when it was validated against that snapshot.
pub const VALIDATED_AT: &str = "validated_at";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub items: Items,
    /// What the entry's age counts from: its write time, or for a published entry its
    /// validation evidence (see the module docs).
    pub written_at: Millis,
}

/// Why an entry cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntryMiss {
    Absent,
    NotJson,
    BadShape(String),
    NoTimestamp,
    /// A published tier's entry without a valid validation in its metadata.
    NotValidated(String),
}

impl EntryMiss {
    pub fn code(&self) -> &'static str {
        match self {
            EntryMiss::Absent => "KV_ABSENT",
            EntryMiss::NotJson => "KV_NOT_JSON",
            EntryMiss::BadShape(_) => "KV_BAD_SHAPE",
            EntryMiss::NoTimestamp => "KV_NO_TIMESTAMP",
            EntryMiss::NotValidated(_) => "KV_NOT_VALIDATED",
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
            EntryMiss::NotValidated(why) => format!(
                "a published tier's entry must carry its validation (`{SNAPSHOT_AT}` and \
                 `{VALIDATED_AT}`, ms since epoch, in its metadata, as `understudy publish` \
                 writes them): {why}"
            ),
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

/// Parses a KV read of a published (curated) tier: the value, and the validation in the
/// key's metadata (nowhere else). The entry's age counts from the earlier of the snapshot
/// and the validation.
pub fn parse_published(value: Option<&str>, metadata: Option<&Value>) -> Result<Entry, EntryMiss> {
    let text = value.ok_or(EntryMiss::Absent)?;
    let meta = metadata.ok_or_else(|| EntryMiss::NotValidated("the key has no metadata".into()))?;
    let field = |name: &str| match meta.get(name) {
        None => Err(EntryMiss::NotValidated(format!("no `{name}`"))),
        Some(v) => whole_ms(v).ok_or_else(|| {
            EntryMiss::NotValidated(format!("`{name}` is {v}, not a time in ms since epoch"))
        }),
    };
    let snapshot_at = field(SNAPSHOT_AT)?;
    let validated_at = field(VALIDATED_AT)?;
    let root: Value = serde_json::from_str(text).map_err(|_| EntryMiss::NotJson)?;
    let items =
        items_at(root, &[String::from("items")]).map_err(|e| EntryMiss::BadShape(e.to_string()))?;
    Ok(Entry {
        items,
        written_at: snapshot_at.min(validated_at),
    })
}

/// A non-negative whole number of milliseconds (an integer, or a float without fraction).
fn whole_ms(n: &Value) -> Option<Millis> {
    n.as_u64()
        .or_else(|| {
            n.as_f64()
                .filter(|f| f.is_finite() && *f >= 0.0 && *f < 1e15 && f.fract() == 0.0)
                .map(|f| f as u64)
        })
        .map(Millis)
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

/// The metadata `understudy publish` writes with an entry of a published tier: the
/// inventory snapshot its SKUs were checked against, when, and (for an edge that does not
/// know the tier is published) `written_at`, the earlier of the two.
pub fn published_metadata(snapshot_at: Millis, validated_at: Millis) -> Value {
    let mut meta = serde_json::Map::new();
    meta.insert(SNAPSHOT_AT.into(), Value::from(snapshot_at.0));
    meta.insert(VALIDATED_AT.into(), Value::from(validated_at.0));
    meta.insert(
        WRITTEN_AT.into(),
        Value::from(snapshot_at.0.min(validated_at.0)),
    );
    Value::Object(meta)
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
    fn a_published_entry_is_an_answer_only_with_its_validation() {
        let value = Some(r#"{"items":[{"sku":"A"}]}"#);
        let meta = json!({"snapshot_at": 1_000, "validated_at": 5_000});
        let e = parse_published(value, Some(&meta)).unwrap();
        assert_eq!(e.written_at, Millis(1_000), "age counts from the evidence");
        assert_eq!(e.items, vec![r#"{"sku":"A"}"#.to_string()]);
        // What write-through or any other tool writes is not a validation.
        for bad in [
            json!({"written_at": 5_000}),
            json!({"snapshot_at": 1_000}),
            json!({"validated_at": 5_000}),
            json!({"snapshot_at": "yesterday", "validated_at": 5_000}),
            json!({"snapshot_at": -1, "validated_at": 5_000}),
            json!({"snapshot_at": 1.5, "validated_at": 5_000}),
        ] {
            let miss = parse_published(value, Some(&bad)).unwrap_err();
            assert_eq!(miss.code(), "KV_NOT_VALIDATED", "{bad}");
            assert!(
                miss.detail().contains("understudy publish"),
                "{}",
                miss.detail()
            );
        }
        assert_eq!(
            parse_published(value, None).unwrap_err().code(),
            "KV_NOT_VALIDATED"
        );
        let in_value = r#"{"items":[1],"snapshot_at":1,"validated_at":1}"#;
        assert_eq!(
            parse_published(Some(in_value), None).unwrap_err().code(),
            "KV_NOT_VALIDATED",
            "the validation lives in the metadata only"
        );
        assert_eq!(parse_published(None, Some(&meta)), Err(EntryMiss::Absent));
        let made = published_metadata(Millis(1_000), Millis(5_000));
        assert_eq!(
            made,
            json!({"snapshot_at": 1_000, "validated_at": 5_000, "written_at": 1_000})
        );
        assert_eq!(
            parse_published(value, Some(&made)).unwrap().written_at,
            Millis(1_000)
        );
        assert_eq!(
            parse_published(Some(r#"{"items":[]}"#), Some(&meta))
                .unwrap_err()
                .code(),
            "KV_BAD_SHAPE"
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
