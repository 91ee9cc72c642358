//! `understudy schema`: the JSON Schema of the policy format, for editors with TOML
//! language servers (Taplo, Even Better TOML): completion, hover docs, validation.
//!
//! The schema is derived from the compiler's typed raw policy
//! (`understudy_compiler::parse::schema`), so it refuses what `check` refuses value by
//! value: the same types, ranges, patterns and enum words, one branch per tier kind and
//! breaker mode.

use std::process::ExitCode;

use crate::args::SchemaArgs;
use crate::exit::Exit;
use understudy_compiler::parse::schema::schema;

pub fn run(args: SchemaArgs) -> anyhow::Result<ExitCode> {
    let text = serde_json::to_string_pretty(&schema())? + "\n";
    match args.out {
        Some(path) => std::fs::write(&path, text)
            .map_err(|e| anyhow::anyhow!("cannot write `{}`: {e}", path.display()))?,
        None => print!("{text}"),
    }
    Ok(Exit::Ok.into())
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    /// Every key path of the schema, through properties, items, branches and maps.
    fn keys(v: &Value, defs: &Value, prefix: &str, out: &mut Vec<String>) {
        if let Some(r) = v.get("$ref").and_then(Value::as_str) {
            let name = r.rsplit('/').next().unwrap_or("");
            if let Some(d) = defs.get(name) {
                keys(d, defs, prefix, out);
            }
        }
        for branch in ["oneOf", "anyOf", "allOf"] {
            for b in v
                .get(branch)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                keys(b, defs, prefix, out);
            }
        }
        if let Some(items) = v.get("items") {
            keys(items, defs, prefix, out);
        }
        if let Some(extra) = v.get("additionalProperties").filter(|a| a.is_object()) {
            keys(extra, defs, prefix, out);
        }
        if let Some(props) = v.get("properties").and_then(Value::as_object) {
            for (k, sub) in props {
                let path = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                if !out.contains(&path) {
                    out.push(path.clone());
                    keys(sub, defs, &path, out);
                }
            }
        }
    }

    #[test]
    fn every_schema_key_is_documented() {
        let doc =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/policy.md"))
                .expect("docs/policy.md");
        let s = schema();
        let mut all = Vec::new();
        keys(&s, &s["$defs"], "", &mut all);
        assert!(all.len() > 60, "{all:?}");
        for path in all {
            let leaf = path.rsplit('.').next().unwrap_or(&path);
            assert!(
                doc.contains(&format!("`{leaf}`")) || doc.contains(&format!("`[{leaf}")),
                "docs/policy.md does not document `{path}`"
            );
        }
    }
}
