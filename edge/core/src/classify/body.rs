//! [E-VERIFY] Whether an answer's body is the declared shape: the non-empty list at the
//! policy's `result_path`, its items kept as the exact JSON text the model sent.

use serde_json::Value;

use super::{bounded, Items};

/// Why a body is not the declared shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BodyError {
    TooLarge { limit: u64 },
    NotJson(String),
    MissingPath(String),
    NotAList(String),
    EmptyList(String),
}

impl std::fmt::Display for BodyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BodyError::TooLarge { limit } => write!(f, "body larger than {limit} bytes"),
            BodyError::NotJson(e) => write!(f, "body is not JSON ({e})"),
            BodyError::MissingPath(p) => write!(f, "body has no `{p}`"),
            BodyError::NotAList(p) => write!(f, "`{p}` is not a list"),
            BodyError::EmptyList(p) => write!(f, "`{p}` is an empty list"),
        }
    }
}

/// Parses `body`, follows `path` and requires a non-empty list there; returns its items.
///
/// The model's answer is passed through, not rebuilt: the walk skips every field off the
/// path without building it, and each item is the exact JSON text the model sent (a
/// `serde_json::Value` tree built and written out again cost a few µs per answer on the
/// healthy path, issue 23).
pub fn verify_body(body: &[u8], path: &[String], max_bytes: u64) -> Result<Items, BodyError> {
    if body.len() as u64 > max_bytes {
        return Err(BodyError::TooLarge { limit: max_bytes });
    }
    let mut de = serde_json::Deserializer::from_slice(body);
    let found = serde::de::DeserializeSeed::deserialize(raw::AtPath(path), &mut de)
        .and_then(|f| de.end().map(|()| f))
        .map_err(|e| BodyError::NotJson(bounded(&e.to_string())))?;
    let dotted = || path.join(".");
    match found {
        raw::Found::Missing => Err(BodyError::MissingPath(dotted())),
        raw::Found::NotAList => Err(BodyError::NotAList(dotted())),
        raw::Found::List(items) if items.is_empty() => Err(BodyError::EmptyList(dotted())),
        raw::Found::List(items) => Ok(items),
    }
}

/// The walk down `result_path` that [`verify_body`] makes, in serde's terms.
mod raw {
    use std::fmt;

    use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
    use serde_json::value::RawValue;

    /// What the path leads to.
    pub enum Found {
        Missing,
        NotAList,
        /// The list's items, each as the JSON text the body holds.
        List(Vec<String>),
    }

    /// The rest of the path to follow from the value being read.
    pub struct AtPath<'p>(pub &'p [String]);

    impl<'de> DeserializeSeed<'de> for AtPath<'_> {
        type Value = Found;

        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Found, D::Error> {
            d.deserialize_any(self)
        }
    }

    impl<'de> Visitor<'de> for AtPath<'_> {
        type Value = Found;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a JSON value")
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Found, A::Error> {
            let Some((key, rest)) = self.0.split_first() else {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                return Ok(Found::NotAList);
            };
            let mut found = Found::Missing;
            while let Some(k) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                if k == key.as_str() {
                    // A key given twice: the last one counts, as a JSON object reads.
                    found = map.next_value_seed(AtPath(rest))?;
                } else {
                    map.next_value::<IgnoredAny>()?;
                }
            }
            Ok(found)
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Found, A::Error> {
            if !self.0.is_empty() {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                return Ok(Found::Missing);
            }
            let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(8));
            while let Some(item) = seq.next_element::<&'de RawValue>()? {
                items.push(item.get().to_string());
            }
            Ok(Found::List(items))
        }

        fn visit_bool<E>(self, _: bool) -> Result<Found, E> {
            Ok(self.scalar())
        }
        fn visit_i64<E>(self, _: i64) -> Result<Found, E> {
            Ok(self.scalar())
        }
        fn visit_u64<E>(self, _: u64) -> Result<Found, E> {
            Ok(self.scalar())
        }
        fn visit_f64<E>(self, _: f64) -> Result<Found, E> {
            Ok(self.scalar())
        }
        fn visit_str<E>(self, _: &str) -> Result<Found, E> {
            Ok(self.scalar())
        }
        fn visit_unit<E>(self) -> Result<Found, E> {
            Ok(self.scalar())
        }
    }

    impl AtPath<'_> {
        /// A scalar where the path goes on is a missing path; at its end, not a list.
        fn scalar(&self) -> Found {
            if self.0.is_empty() {
                Found::NotAList
            } else {
                Found::Missing
            }
        }
    }
}

/// Follows `path` in `root` and takes the non-empty list there (shared with KV values).
pub fn items_at(root: Value, path: &[String]) -> Result<Items, BodyError> {
    let dotted = path.join(".");
    let mut cur = root;
    for key in path {
        cur = match cur {
            Value::Object(mut m) => m
                .remove(key)
                .ok_or_else(|| BodyError::MissingPath(dotted.clone()))?,
            _ => return Err(BodyError::MissingPath(dotted)),
        };
    }
    match cur {
        Value::Array(a) if a.is_empty() => Err(BodyError::EmptyList(dotted)),
        Value::Array(a) => Ok(a.iter().map(|v| v.to_string()).collect()),
        _ => Err(BodyError::NotAList(dotted)),
    }
}
