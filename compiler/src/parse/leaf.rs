//! The value types a policy is made of. Each one is the single definition of what its
//! values may be: its `toml_span::Deserialize` checks them (with a coded problem naming the
//! fix) and its `JsonSchema` describes exactly the same set, from the same constants —
//! ranges, patterns, enum words. The checker and the schema cannot drift apart.

use std::borrow::Cow;

use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use toml_span::value::{Value, ValueInner};
use toml_span::{DeserError, Deserialize, Error};
use understudy_core::time::format_duration as fmt;

use super::duration;
use super::problem::{err, wrong, Problem};
pub use super::strings::*;
use crate::codes::Code;
pub use crate::diag::Span;

/// A value and the bytes of the policy it came from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spanned<T> {
    pub value: T,
    pub span: Span,
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Spanned<T> {
    fn deserialize(v: &mut Value<'de>) -> Result<Self, DeserError> {
        let span = (v.span.start, v.span.end);
        T::deserialize(v).map(|value| Spanned { value, span })
    }
}

impl<T: JsonSchema> JsonSchema for Spanned<T> {
    fn inline_schema() -> bool {
        T::inline_schema()
    }
    fn schema_name() -> Cow<'static, str> {
        T::schema_name()
    }
    fn schema_id() -> Cow<'static, str> {
        T::schema_id()
    }
    fn json_schema(g: &mut SchemaGenerator) -> Schema {
        T::json_schema(g)
    }
}

/// A part of the policy that may have failed to read: its errors travel with it, so the
/// rest of the policy is still read — and checked — when one part is wrong.
#[derive(Debug, Clone)]
pub enum Part<T> {
    Ok(T),
    Bad(Vec<Error>),
}

impl<T> Part<T> {
    pub fn get(&self) -> Option<&T> {
        match self {
            Part::Ok(t) => Some(t),
            Part::Bad(_) => None,
        }
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Part<T> {
    fn deserialize(v: &mut Value<'de>) -> Result<Self, DeserError> {
        Ok(match T::deserialize(v) {
            Ok(t) => Part::Ok(t),
            Err(e) => Part::Bad(e.errors),
        })
    }
}

impl<T: JsonSchema> JsonSchema for Part<T> {
    fn inline_schema() -> bool {
        T::inline_schema()
    }
    fn schema_name() -> Cow<'static, str> {
        T::schema_name()
    }
    fn schema_id() -> Cow<'static, str> {
        T::schema_id()
    }
    fn json_schema(g: &mut SchemaGenerator) -> Schema {
        T::json_schema(g)
    }
}

/// A duration in milliseconds, valid in `[MIN, MAX]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dur<const MIN: u64, const MAX: u64>(pub u64);

impl<const MIN: u64, const MAX: u64> Dur<MIN, MAX> {
    pub fn range() -> String {
        if MAX >= duration::LONGEST_MS {
            // No upper limit but the grammar's.
            format!("{}..", fmt(MIN))
        } else {
            format!("{}..={}", fmt(MIN), fmt(MAX))
        }
    }
}

impl<'de, const MIN: u64, const MAX: u64> Deserialize<'de> for Dur<MIN, MAX> {
    fn deserialize(v: &mut Value<'de>) -> Result<Self, DeserError> {
        match v.take() {
            ValueInner::String(s) => match duration::parse(&s) {
                Ok(ms) if (MIN..=MAX).contains(&ms) => Ok(Dur(ms)),
                Ok(ms) => Err(err(out_of_range(&s, ms == 0, &Self::range()), v)),
                Err(msg) => Err(err(
                    Problem::new(
                        Code::BadDuration,
                        format!("`{{key}}`: {msg}"),
                        "not a duration",
                        "write a whole number and one unit: `45ms`, `5s`, `30m`, `4h`, `1d`",
                    ),
                    v,
                )),
            },
            ValueInner::Integer(i) => Err(err(
                Problem::new(
                    Code::BadDuration,
                    format!("`{{key}}` is the bare number {i}: durations need a unit"),
                    "no unit",
                    format!("write it as a string with a unit, e.g. `\"{i}ms\"` or `\"{i}s\"`"),
                ),
                v,
            )),
            other => Err(wrong("a duration string such as \"45ms\"", &other, v)),
        }
    }
}

fn out_of_range(shown: &str, zero: bool, range: &str) -> Problem {
    let message = if zero {
        format!(
            "`{{key}}` is {shown}: {} (valid: {range})",
            super::problem::OFF
        )
    } else {
        format!("`{{key}}` is {shown}, outside its valid range {range}")
    };
    Problem::new(
        Code::OutOfRange,
        message,
        format!("must be in {range}"),
        format!("use a value in {range}; docs/policy.md gives each key's range and why"),
    )
}

impl<const MIN: u64, const MAX: u64> JsonSchema for Dur<MIN, MAX> {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> Cow<'static, str> {
        format!("Duration_{MIN}_{MAX}").into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "pattern": duration::pattern(MIN, MAX),
            "description": format!("A duration: a whole number and one unit (ms, s, m, h, d), in {}.", Self::range()),
        })
    }
}

/// A whole number in `[MIN, MAX]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Count<const MIN: u64, const MAX: u64>(pub u64);

impl<'de, const MIN: u64, const MAX: u64> Deserialize<'de> for Count<MIN, MAX> {
    fn deserialize(v: &mut Value<'de>) -> Result<Self, DeserError> {
        let i = match v.take() {
            ValueInner::Integer(i) => i,
            // JSON Schema's `integer` is any number without a fraction, `5.0` included:
            // accept what the schema accepts.
            ValueInner::Float(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => f as i64,
            other => return Err(wrong("a whole number", &other, v)),
        };
        match u64::try_from(i) {
            Ok(n) if (MIN..=MAX).contains(&n) => Ok(Count(n)),
            _ => Err(err(
                out_of_range(&i.to_string(), i == 0, &format!("{MIN}..={MAX}")),
                v,
            )),
        }
    }
}

impl<const MIN: u64, const MAX: u64> JsonSchema for Count<MIN, MAX> {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> Cow<'static, str> {
        format!("Count_{MIN}_{MAX}").into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({"type": "integer", "minimum": MIN, "maximum": MAX})
    }
}

/// A ratio in `(0, MAX]`, or `[0, MAX]` when `ZERO` is allowed; `MAX` in thousandths
/// (default 1).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ratio<const ZERO: bool, const MAX_MILLI: u64 = 1000>(pub f64);

impl<const ZERO: bool, const MAX_MILLI: u64> Ratio<ZERO, MAX_MILLI> {
    fn max() -> f64 {
        MAX_MILLI as f64 / 1000.0
    }
}

impl<'de, const ZERO: bool, const MAX_MILLI: u64> Deserialize<'de> for Ratio<ZERO, MAX_MILLI> {
    fn deserialize(v: &mut Value<'de>) -> Result<Self, DeserError> {
        let max = Self::max();
        let r = match v.take() {
            ValueInner::Float(f) => f,
            ValueInner::Integer(i) => i as f64,
            other => {
                return Err(wrong(
                    &format!("a number between 0 and {max} (e.g. `0.15`)"),
                    &other,
                    v,
                ))
            }
        };
        let low_ok = if ZERO { r >= 0.0 } else { r > 0.0 };
        if low_ok && r <= max {
            return Ok(Ratio(r));
        }
        let range = if ZERO {
            format!("0..={max}")
        } else {
            format!("above 0, up to {max}")
        };
        Err(err(out_of_range(&r.to_string(), r == 0.0, &range), v))
    }
}

impl<const ZERO: bool, const MAX_MILLI: u64> JsonSchema for Ratio<ZERO, MAX_MILLI> {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> Cow<'static, str> {
        format!("Ratio_{ZERO}_{MAX_MILLI}").into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        let max = Self::max();
        if ZERO {
            json_schema!({"type": "number", "minimum": 0, "maximum": max})
        } else {
            json_schema!({"type": "number", "exclusiveMinimum": 0, "maximum": max})
        }
    }
}

impl<'de> Deserialize<'de> for Flag {
    fn deserialize(v: &mut Value<'de>) -> Result<Self, DeserError> {
        match v.take() {
            ValueInner::Boolean(b) => Ok(Flag(b)),
            other => Err(wrong("a boolean (`true` or `false`)", &other, v)),
        }
    }
}

/// A boolean.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flag(pub bool);

impl JsonSchema for Flag {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> Cow<'static, str> {
        "Flag".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({"type": "boolean"})
    }
}

/// A KV key template: literal text with `{param}` placeholders. The pattern is the
/// template grammar of `understudy_core::template`; a problem points at the brace at fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateText(pub String);

/// The template grammar as a regular expression (for the schema).
pub const TEMPLATE_PATTERN: &str = r"^([^{}]|\{[A-Za-z0-9_]+\})+$";

impl TemplateText {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl<'de> Deserialize<'de> for TemplateText {
    fn deserialize(v: &mut Value<'de>) -> Result<Self, DeserError> {
        match v.take() {
            ValueInner::String(s) => {
                let help = "write the key as text with `{param}` placeholders, e.g. \"user_rec:{user_id}\"";
                if s.is_empty() {
                    return Err(err(
                        Problem::new(Code::BadTemplate, "`{key}` is empty", "no key", help),
                        v,
                    ));
                }
                match understudy_core::template::Template::parse(&s) {
                    Ok(_) => Ok(TemplateText(s.into_owned())),
                    Err(e) => {
                        // A string's span starts after its opening quote.
                        let at = v.span.start + e.offset;
                        Err(Problem::new(
                            Code::BadTemplate,
                            format!("`{{key}}`: {}", e.message),
                            "here",
                            help,
                        )
                        .at(toml_span::Span::new(at, at + 1))
                        .into())
                    }
                }
            }
            other => Err(wrong("a string", &other, v)),
        }
    }
}

impl JsonSchema for TemplateText {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> Cow<'static, str> {
        "KeyTemplate".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({"type": "string", "pattern": TEMPLATE_PATTERN})
    }
}

/// A regular expression (regex-lite syntax), compiled to check it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern(pub String);

impl<'de> Deserialize<'de> for Pattern {
    fn deserialize(v: &mut Value<'de>) -> Result<Self, DeserError> {
        match v.take() {
            ValueInner::String(s) => match regex_lite::Regex::new(&s) {
                Ok(_) if s.len() <= 1024 => Ok(Pattern(s.into_owned())),
                Ok(_) => Err(err(
                    Problem::new(
                        Code::InvalidValue,
                        "`{key}` is longer than 1024 characters",
                        "too long",
                        "keep patterns short; `max_len` bounds the value's length",
                    ),
                    v,
                )),
                Err(e) => Err(err(
                    Problem::new(
                        Code::InvalidValue,
                        format!("`{{key}}` is not a valid regular expression: {e}"),
                        "does not compile",
                        "fix the regular expression (regex-lite syntax, anchored with ^…$)",
                    ),
                    v,
                )),
            },
            other => Err(wrong("a string", &other, v)),
        }
    }
}

impl JsonSchema for Pattern {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> Cow<'static, str> {
        "Pattern".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({"type": "string", "format": "regex", "maxLength": 1024})
    }
}

/// An enumeration written as one of a few words.
pub trait Words: Sized + Copy + 'static {
    const NAME: &'static str;
    const ALL: &'static [(&'static str, Self)];
}

/// One of `T`'s words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Word<T>(pub T);

impl<'de, T: Words> Deserialize<'de> for Word<T> {
    fn deserialize(v: &mut Value<'de>) -> Result<Self, DeserError> {
        match v.take() {
            ValueInner::String(s) => {
                if let Some((_, w)) = T::ALL.iter().find(|(n, _)| *n == s) {
                    return Ok(Word(*w));
                }
                let list = T::ALL
                    .iter()
                    .map(|(n, _)| format!("`{n}`"))
                    .collect::<Vec<_>>()
                    .join(", ");
                Err(err(
                    Problem::new(
                        Code::InvalidValue,
                        format!("`{{key}}` is {}, which is not one of {list}", shown(&s)),
                        "unknown value",
                        format!("use one of {list}"),
                    ),
                    v,
                ))
            }
            other => Err(wrong("a string", &other, v)),
        }
    }
}

impl<T: Words> JsonSchema for Word<T> {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> Cow<'static, str> {
        T::NAME.into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        let words: Vec<&str> = T::ALL.iter().map(|(n, _)| *n).collect();
        json_schema!({"type": "string", "enum": words})
    }
}

/// An array with at least one item.
#[derive(Debug, Clone, PartialEq)]
pub struct NonEmpty<T>(pub Vec<T>);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for NonEmpty<T> {
    fn deserialize(v: &mut Value<'de>) -> Result<Self, DeserError> {
        let span = v.span;
        let items = Vec::<T>::deserialize(v)?;
        if items.is_empty() {
            return Err(Problem::new(
                Code::InvalidValue,
                "`{key}` is empty",
                "at least one item",
                "list at least one item, or remove the key to use its default",
            )
            .at(span)
            .into());
        }
        Ok(NonEmpty(items))
    }
}

impl<T: JsonSchema> JsonSchema for NonEmpty<T> {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> Cow<'static, str> {
        format!("NonEmpty_{}", T::schema_name()).into()
    }
    fn json_schema(g: &mut SchemaGenerator) -> Schema {
        let items = g.subschema_for::<T>();
        json_schema!({"type": "array", "minItems": 1, "items": items})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read<T: for<'de> Deserialize<'de>>(toml: &str) -> Result<T, DeserError> {
        let mut v = toml_span::parse(toml).unwrap();
        let mut th = toml_span::de_helpers::TableHelper::new(&mut v).unwrap();
        th.required::<T>("x").map_err(DeserError::from)
    }

    #[test]
    fn the_template_pattern_is_the_template_grammar() {
        let template = regex_lite::Regex::new(TEMPLATE_PATTERN).unwrap();
        assert!(template.is_match("user_rec:{user_id}"));
        assert!(!template.is_match("a:{user"));
        assert!(!template.is_match("a}"));
        assert!(!template.is_match(""));
    }

    #[test]
    fn durations_outside_their_range_are_refused_with_the_range() {
        let e = read::<Dur<1, 60_000>>("x = \"0ms\"").unwrap_err();
        let toml_span::ErrorKind::Custom(t) = &e.errors[0].kind else {
            panic!()
        };
        assert!(
            t.contains("{off}") && t.contains("(valid: 1ms..=1m)"),
            "{t}"
        );
        assert_eq!(read::<Dur<1, 60_000>>("x = \"45ms\"").unwrap(), Dur(45));
    }

    #[test]
    fn counts_and_ratios_have_ranges() {
        assert!(read::<Count<1, 10>>("x = 0").is_err());
        assert!(read::<Count<1, 10>>("x = 11").is_err());
        assert!(read::<Count<1, 10>>("x = -3").is_err());
        assert_eq!(read::<Count<1, 10>>("x = 3").unwrap(), Count(3));
        assert_eq!(read::<Count<1, 10>>("x = 3.0").unwrap(), Count(3));
        assert!(read::<Count<1, 10>>("x = 3.5").is_err());
        assert!(read::<Ratio<false>>("x = 0.0").is_err());
        assert!(read::<Ratio<false>>("x = 1.5").is_err());
        assert_eq!(read::<Ratio<false>>("x = 1").unwrap(), Ratio(1.0));
        assert_eq!(read::<Ratio<true>>("x = 0").unwrap(), Ratio(0.0));
    }
}
