//! [V-OPS] Payload fields the policy names (`[events] redact`) never appear in logs: the
//! edge never logs a payload at all, and the one place that shows one — `events inspect`,
//! whose output operators paste into tickets — shows those fields masked.

use serde_json::Value;

/// What a redacted value is replaced with.
pub const MASK: &str = "[REDACTED]";

/// `payload` with every field at a dotted path in `paths` replaced by [`MASK`] (arrays on
/// the way are searched element by element).
pub fn redact(mut payload: Value, paths: &[String]) -> Value {
    for p in paths {
        let keys: Vec<&str> = p.split('.').collect();
        mask(&mut payload, &keys);
    }
    payload
}

fn mask(v: &mut Value, keys: &[&str]) {
    let Some((first, rest)) = keys.split_first() else {
        return;
    };
    match v {
        Value::Object(m) => {
            if let Some(child) = m.get_mut(*first) {
                if rest.is_empty() {
                    *child = Value::from(MASK);
                } else {
                    mask(child, rest);
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                mask(item, keys);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn named_fields_are_masked_wherever_the_path_leads() {
        let p = json!({
            "email": "ann@example.com",
            "card": {"number": "4242424242424242", "brand": "visa"},
            "lines": [{"sku": "A", "note": "gift for ann"}, {"sku": "B"}],
            "total": 12.5
        });
        let r = redact(
            p,
            &[
                "email".into(),
                "card.number".into(),
                "lines.note".into(),
                "absent.x".into(),
            ],
        );
        let text = r.to_string();
        for secret in ["ann@example.com", "4242424242424242", "gift for ann"] {
            assert!(!text.contains(secret), "{text}");
        }
        assert_eq!(r["card"]["brand"], "visa");
        assert_eq!(r["total"], 12.5);
        assert_eq!(r["lines"][1]["sku"], "B");
    }
}
