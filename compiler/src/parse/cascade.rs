//! `[cascade]`: the promise and the ordered fallback tiers [P-TIERS]. Each tier is read on
//! its own ([`super::tier`]: its `kind` decides its keys, each kind in its module).

use std::borrow::Cow;

use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use toml_span::value::{Value, ValueInner};
use toml_span::{DeserError, Deserialize};
use understudy_core::policy::{Cascade, Promise};

use super::leaf::*;
use super::problem::Problem;
use super::route::bug;
use super::table::{Problems, Table, Unknown};
pub use super::tier::RawTier;
use crate::codes::Code;

impl Words for Promise {
    const NAME: &'static str = "Promise";
    const ALL: &'static [(&'static str, Promise)] = Promise::ALL;
}

/// [P-TIERS] The fallback cascade.
#[derive(Debug, Clone, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Cascade")]
pub struct RawCascade {
    /// always_answer (the last tier must be embedded) or best_effort (504/503 when nothing
    /// answers). Default always_answer.
    pub promise: Option<Spanned<Word<Promise>>>,
    /// Tiers in order.
    pub tiers: Tiers,
    #[serde(skip)]
    pub span: Span,
    #[serde(skip)]
    pub unknown: Unknown,
}

/// The tiers, each read on its own: one bad tier leaves the others checked.
#[derive(Debug, Clone)]
pub struct Tiers(pub Vec<Part<RawTier>>, pub Span);

impl<'de> Deserialize<'de> for Tiers {
    fn deserialize(v: &mut Value<'de>) -> Result<Self, DeserError> {
        let span = (v.span.start, v.span.end);
        match v.take() {
            ValueInner::Array(items) if !items.is_empty() => Ok(Tiers(
                items
                    .into_iter()
                    .map(|mut item| {
                        Part::<RawTier>::deserialize(&mut item)
                            .unwrap_or_else(|e| Part::Bad(e.errors))
                    })
                    .collect(),
                span,
            )),
            ValueInner::Array(_) => Err(empty(v.span)),
            other => Err(Problem::new(
                Code::WrongType,
                format!(
                    "`{{key}}` must be an array of tables (`[[cascade.tiers]]`), found a {}",
                    other.type_str()
                ),
                "expected `[[cascade.tiers]]`",
                "write each tier as a `[[cascade.tiers]]` table",
            )
            .at(v.span)
            .into()),
        }
    }
}

fn empty(span: toml_span::Span) -> DeserError {
    Problem::new(
        Code::EmptyCascade,
        "the cascade has no tier",
        "no `[[cascade.tiers]]`",
        "add fallback tiers in order, ending with an `embedded` tier for endpoints that must answer",
    )
    .at(span)
    .into()
}

impl JsonSchema for Tiers {
    fn schema_name() -> Cow<'static, str> {
        "Tiers".into()
    }
    fn json_schema(g: &mut SchemaGenerator) -> Schema {
        let tier = g.subschema_for::<RawTier>();
        json_schema!({"type": "array", "minItems": 1, "items": tier})
    }
}

impl<'de> Deserialize<'de> for RawCascade {
    fn deserialize(v: &mut Value<'de>) -> Result<Self, DeserError> {
        let span = (v.span.start, v.span.end);
        let mut t = Table::new(v)?;
        let promise = t.opt("promise");
        let tiers: Option<Spanned<Tiers>> = if t.has("tiers") {
            t.req("tiers")
        } else {
            t.th.take("tiers");
            t.th.errors.push(
                Problem::new(
                    Code::EmptyCascade,
                    "the cascade has no tier",
                    "no `[[cascade.tiers]]`",
                    "add fallback tiers in order, ending with an `embedded` tier for endpoints that must answer",
                )
                .at(t.span),
            );
            None
        };
        let unknown = Unknown(t.finish()?);
        Ok(RawCascade {
            promise,
            tiers: tiers.ok_or_else(bug)?.value,
            span,
            unknown,
        })
    }
}

impl Problems for RawCascade {
    fn problems(&self, out: &mut Vec<toml_span::Error>) {
        self.unknown.problems(out);
        self.tiers.0.problems(out);
    }
}

impl RawCascade {
    pub fn promise(&self) -> Promise {
        self.promise.map_or(Promise::AlwaysAnswer, |p| p.value.0)
    }

    /// The cascade, when every tier read.
    pub fn lower(&self) -> Option<Cascade> {
        let tiers = self
            .tiers
            .0
            .iter()
            .map(|t| t.get().and_then(RawTier::lower))
            .collect::<Option<Vec<_>>>()?;
        Some(Cascade {
            promise: self.promise(),
            tiers,
        })
    }
}
