//! The policy's JSON Schema, derived from the typed raw policy: the same types, ranges,
//! patterns and enum words `check` reads with, and one branch per tier kind, breaker mode
//! and embedded mode. `understudy schema` writes it for editors (Taplo / Even Better TOML).

use schemars::generate::SchemaSettings;
use schemars::transform::{RecursiveTransform, Transform};
use schemars::Schema;
use serde_json::Value;

use super::RawPolicy;

/// TOML has no null: optional keys are simply absent, never `null`.
fn no_null(schema: &mut Schema) {
    if let Some(Value::Array(any)) = schema.get_mut("anyOf") {
        any.retain(|s| s.get("type").and_then(Value::as_str) != Some("null"));
        if any.len() == 1 {
            let only = any.remove(0);
            schema.remove("anyOf");
            if let Value::Object(map) = only {
                for (k, v) in map {
                    schema.insert(k, v);
                }
            }
        }
    }
    if let Some(Value::Array(words)) = schema.get_mut("enum") {
        words.retain(|w| !w.is_null());
    }
    if let Some(Value::Array(types)) = schema.get_mut("type") {
        types.retain(|t| t.as_str() != Some("null"));
        if types.len() == 1 {
            let only = types.remove(0);
            schema.insert("type".into(), only);
        }
    }
}

/// The whole schema (draft 2020-12).
pub fn schema() -> Value {
    let mut generator = SchemaSettings::draft2020_12().into_generator();
    let mut root = generator.root_schema_for::<RawPolicy>();
    RecursiveTransform(no_null).transform(&mut root);
    root.insert("title".into(), Value::String("Understudy policy".into()));
    root.to_value()
}

#[cfg(test)]
mod tests {
    #[test]
    fn no_schema_allows_null() {
        let text = super::schema().to_string();
        assert!(!text.contains("null"), "{text}");
    }
}
