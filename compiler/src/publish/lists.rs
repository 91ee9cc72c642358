//! The per-key lists a catalog owner publishes (docs/publish.md "Lists"): which SKUs a KV
//! tier answers with, per value of the tier's key parameter (per category, say). JSON or
//! CSV, chosen by the file's extension (`.csv`, else JSON).
//!
//! JSON: `{"lists": {"audio": ["SKU-1001", {"sku": "SKU-1002", "title": "…"}], …}}` — an
//! entry is a SKU (served as `{"sku": "…"}`) or an item object with a string `sku` (served
//! as written, whitespace removed).
//!
//! CSV: a header row naming the key column (the key parameter's name, or `key`) and `sku`;
//! any other column is a string field of the item (empty cells left out). Rows of one key
//! keep their order, which is the list's.
//!
//! Every problem is collected with its line, so one run shows them all.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

/// One entry of a list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub sku: String,
    /// The item as the edge serves it: compact JSON.
    pub json: String,
    /// 1-based line in the lists file.
    pub line: usize,
}

/// The lists, by key value (sorted: the output order does not depend on the file's).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Lists {
    pub lists: BTreeMap<String, Vec<Entry>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonFile<'a> {
    #[serde(borrow)]
    lists: BTreeMap<String, Vec<&'a serde_json::value::RawValue>>,
}

fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|b| **b == b'\n')
        .count()
        + 1
}

/// Parses `text` read from `path`; `param` is the key parameter's name (a CSV key column).
pub fn parse(path: &Path, text: &str, param: &str) -> Result<Lists, Vec<String>> {
    let csv = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("csv"));
    if csv {
        parse_csv(text, param)
    } else {
        parse_json(text)
    }
}

fn parse_json(text: &str) -> Result<Lists, Vec<String>> {
    let file: JsonFile = serde_json::from_str(text).map_err(|e| {
        vec![format!(
            "line {}, column {}: not a lists file ({e}); expected {{\"lists\": {{\"KEY\": [\"SKU\", …]}}}}",
            e.line(),
            e.column()
        )]
    })?;
    let mut out = Lists::default();
    let mut problems = Vec::new();
    for (key, raws) in file.lists {
        let mut entries = Vec::with_capacity(raws.len());
        for raw in raws {
            let offset = raw.get().as_ptr() as usize - text.as_ptr() as usize;
            let line = line_of(text, offset);
            let value: serde_json::Value = match serde_json::from_str(raw.get()) {
                Ok(v) => v,
                Err(e) => {
                    problems.push(format!("line {line}: list `{key}`: {e}"));
                    continue;
                }
            };
            let (sku, json) = match &value {
                serde_json::Value::String(s) => {
                    (s.clone(), serde_json::json!({ "sku": s }).to_string())
                }
                serde_json::Value::Object(m) => match m.get("sku") {
                    Some(serde_json::Value::String(s)) => {
                        (s.clone(), crate::validate::stubs::minify(raw.get()))
                    }
                    _ => {
                        problems.push(format!(
                            "line {line}: list `{key}`: an item object needs a string `sku`"
                        ));
                        continue;
                    }
                },
                other => {
                    problems.push(format!(
                        "line {line}: list `{key}`: an entry is a SKU string or an item object, not `{other}`"
                    ));
                    continue;
                }
            };
            entries.push(Entry { sku, json, line });
        }
        out.lists.insert(key, entries);
    }
    if problems.is_empty() {
        Ok(out)
    } else {
        Err(problems)
    }
}

fn parse_csv(text: &str, param: &str) -> Result<Lists, Vec<String>> {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(true)
        .trim(csv::Trim::All)
        .from_reader(text.as_bytes());
    let headers = reader
        .headers()
        .map_err(|e| vec![format!("line 1: the header row is not CSV ({e})")])?
        .clone();
    let find = |name: &str| headers.iter().position(|h| h.eq_ignore_ascii_case(name));
    let key_col = find(param).or_else(|| find("key"));
    let sku_col = find("sku");
    let (Some(key_col), Some(sku_col)) = (key_col, sku_col) else {
        return Err(vec![format!(
            "line 1: the header row must name the key column (`{param}` or `key`) and `sku`; it \
             has {}",
            headers
                .iter()
                .map(|h| format!("`{h}`"))
                .collect::<Vec<_>>()
                .join(", ")
        )]);
    };
    let mut out = Lists::default();
    let mut problems = Vec::new();
    for row in reader.records() {
        let row = match row {
            Ok(r) => r,
            Err(e) => {
                let line = e.position().map_or(0, |p| p.line() as usize);
                problems.push(format!("line {line}: not a CSV row ({e})"));
                continue;
            }
        };
        let line = row.position().map_or(0, |p| p.line() as usize);
        let key = row.get(key_col).unwrap_or_default();
        let sku = row.get(sku_col).unwrap_or_default();
        if key.is_empty() || sku.is_empty() {
            problems.push(format!(
                "line {line}: the key and the SKU must both be given (key `{key}`, sku `{sku}`)"
            ));
            continue;
        }
        let mut item = serde_json::Map::new();
        item.insert("sku".into(), sku.into());
        for (i, h) in headers.iter().enumerate() {
            if i == key_col || i == sku_col {
                continue;
            }
            if let Some(v) = row.get(i).filter(|v| !v.is_empty()) {
                item.insert(h.to_string(), v.into());
            }
        }
        out.lists.entry(key.to_string()).or_default().push(Entry {
            sku: sku.to_string(),
            json: serde_json::Value::Object(item).to_string(),
            line,
        });
    }
    if problems.is_empty() {
        Ok(out)
    } else {
        Err(problems)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_lists_take_skus_and_item_objects() {
        let text = "{\"lists\": {\n \"kitchen\": [\"K-1\"],\n \"audio\": [\n  \"A-1\",\n  {\"sku\": \"A-2\", \"title\": \"speaker\"}\n ]\n}}";
        let l = parse(Path::new("l.json"), text, "category_id").unwrap();
        let keys: Vec<&str> = l.lists.keys().map(String::as_str).collect();
        assert_eq!(keys, ["audio", "kitchen"]);
        let audio = &l.lists["audio"];
        assert_eq!(audio[0].json, "{\"sku\":\"A-1\"}");
        assert_eq!(audio[1].json, "{\"sku\":\"A-2\",\"title\":\"speaker\"}");
        assert_eq!((audio[0].line, audio[1].line), (4, 5));
    }

    #[test]
    fn csv_lists_keep_row_order_and_extra_columns() {
        let text = "category_id,sku,title\naudio,A-1,headphones\nkitchen,K-1,\naudio,A-2,speaker\n";
        let l = parse(Path::new("l.CSV"), text, "category_id").unwrap();
        let audio: Vec<&str> = l.lists["audio"].iter().map(|e| e.json.as_str()).collect();
        assert_eq!(
            audio,
            [
                "{\"sku\":\"A-1\",\"title\":\"headphones\"}",
                "{\"sku\":\"A-2\",\"title\":\"speaker\"}"
            ]
        );
        assert_eq!(l.lists["kitchen"][0].json, "{\"sku\":\"K-1\"}");
        assert_eq!(l.lists["audio"][1].line, 4);
    }

    #[test]
    fn every_malformed_entry_is_named_with_its_line() {
        let e = parse(
            Path::new("l.json"),
            "{\"lists\": {\"a\": [1, {\"title\": \"x\"}, \"ok\"]}}",
            "c",
        )
        .unwrap_err();
        assert_eq!(e.len(), 2, "{e:?}");
        assert!(
            e[0].contains("not `1`") && e[1].contains("string `sku`"),
            "{e:?}"
        );
        let e = parse(Path::new("l.json"), "{\"lists\": [", "c").unwrap_err();
        assert!(e[0].starts_with("line 1, column"), "{e:?}");
        let e = parse(Path::new("l.csv"), "cat,sku\na,1\n", "category_id").unwrap_err();
        assert!(e[0].contains("must name the key column"), "{e:?}");
        let e = parse(Path::new("l.csv"), "key,sku\na,\n,B\n\"x,1\n", "c").unwrap_err();
        assert!(e.len() >= 2 && e[0].starts_with("line 2"), "{e:?}");
    }
}
