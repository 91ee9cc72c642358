//! [V-OPS] Payload fields the policy names (`[events] redact`) never appear in logs: the
//! edge never logs a payload at all, and the one place that shows one — `events inspect`,
//! whose output operators paste into tickets — shows those fields masked.
//!
//! A path names a field however the producer spelled it: segments match keys in any case
//! (`customer.email` masks `Customer.Email`), and a key holding dots stands for the
//! segments it spells (`customer.email` masks `{"customer.email": …}` and
//! `{"Customer": {"EMAIL": …}}` alike). A key spelling a field *below* a named one is inside
//! it and masked too (`{"customer.email.domain": …}`). Producers' JSON varies with their
//! serializers; what must stay out of sight must not depend on that.

use serde_json::Value;

/// What a redacted value is replaced with.
pub const MASK: &str = "[REDACTED]";

/// `payload` with every field at a dotted path in `paths` replaced by [`MASK`] (arrays on
/// the way are searched element by element).
pub fn redact(mut payload: Value, paths: &[String]) -> Value {
    for p in paths {
        let segments: Vec<String> = p.split('.').map(str::to_lowercase).collect();
        mask(&mut payload, &segments);
    }
    payload
}

fn mask(v: &mut Value, rest: &[String]) {
    if rest.is_empty() {
        return;
    }
    match v {
        Value::Object(m) => {
            for (key, child) in m.iter_mut() {
                match below(key, rest) {
                    Some([]) => *child = Value::from(MASK),
                    Some(deeper) => mask(child, deeper),
                    None => {}
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                mask(item, rest);
            }
        }
        _ => {}
    }
}

/// What is left of `rest` (lower-case segments) below `key`: `None` when the key is not on
/// the path, empty when it is the named field or inside it.
fn below<'a>(key: &str, rest: &'a [String]) -> Option<&'a [String]> {
    let mut n = 0;
    for part in key.split('.') {
        match rest.get(n) {
            // The key goes on below the named field: it is inside it.
            None => return Some(&[]),
            Some(want) if part.to_lowercase() == *want => n += 1,
            Some(_) => return None,
        }
    }
    Some(&rest[n..])
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

    #[test]
    fn a_path_matches_keys_in_any_case_and_keys_holding_its_dots() {
        // A producer that writes `Customer.Email`, or one key `"customer.email"`, sends the
        // same field a policy naming `customer.email` means to keep out of sight.
        let paths = ["customer.email".to_string(), "a.b.c".to_string()];
        let masked = [
            json!({"customer": {"email": "s1@x"}}),
            json!({"Customer": {"Email": "s2@x"}}),
            json!({"CUSTOMER": {"email": "s3@x"}}),
            json!({"customer.email": "s4@x"}),
            json!({"Customer.Email": "s5@x"}),
            json!({"customer": {"Email": "s6@x"}}),
            json!({"CUSTOMER": [{"EMAIL": "s7@x"}, {"Email": "s8@x"}]}),
            json!({"A.b": {"C": "s9@x"}}),
            json!({"a": {"B.c": "s10@x"}}),
            // A key below the named field is inside it.
            json!({"customer.email.domain": "s11@x"}),
            json!({"customer": {"email.domain": "s12@x"}}),
        ];
        for p in masked {
            let text = redact(p.clone(), &paths).to_string();
            assert!(!text.contains("@x"), "{p} -> {text}");
            assert!(text.contains(MASK), "{text}");
        }
        // Only whole segments match.
        let kept = json!({
            "customer": {"emails": "k1", "email_verified": true},
            "customer.email2": "k2",
            "xcustomer.email": "k3",
            "a": {"b": "k5"}
        });
        assert_eq!(redact(kept.clone(), &paths), kept);
    }
}
