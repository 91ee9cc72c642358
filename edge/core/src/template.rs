//! Key templates (`user_rec:{user_id}`) and how parameter values are placed into them.
//!
//! User input must not reach outside its key space: a value is either hashed (identity
//! parameters, so raw user IDs never appear in KV keys or logs) or percent-encoded so that
//! it cannot introduce separators of its own.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Part {
    Lit(String),
    Param(String),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Template {
    pub source: String,
    pub parts: Vec<Part>,
    /// The rendered key is stored as its literal prefix and a SHA-256 of the whole key, so
    /// it fits Workers KV's 512-byte key limit whatever the parameters hold.
    pub hashed: bool,
}

/// A template that does not parse, with the byte offset of the problem in the source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateError {
    pub offset: usize,
    pub message: String,
}

impl Template {
    pub fn parse(source: &str) -> Result<Template, TemplateError> {
        let mut parts = Vec::new();
        let mut lit = String::new();
        let mut chars = source.char_indices().peekable();
        while let Some((i, c)) = chars.next() {
            match c {
                '{' => {
                    let mut name = String::new();
                    let mut closed = false;
                    for (_, c) in chars.by_ref() {
                        if c == '}' {
                            closed = true;
                            break;
                        }
                        name.push(c);
                    }
                    if !closed {
                        return Err(TemplateError {
                            offset: i,
                            message: "`{` is never closed; write `{param}`".into(),
                        });
                    }
                    if name.is_empty()
                        || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                    {
                        return Err(TemplateError {
                            offset: i,
                            message: format!(
                                "`{{{name}}}` is not a parameter name (letters, digits and `_`)"
                            ),
                        });
                    }
                    if !lit.is_empty() {
                        parts.push(Part::Lit(std::mem::take(&mut lit)));
                    }
                    parts.push(Part::Param(name));
                }
                '}' => {
                    return Err(TemplateError {
                        offset: i,
                        message: "`}` without a matching `{`".into(),
                    })
                }
                c => lit.push(c),
            }
        }
        if !lit.is_empty() {
            parts.push(Part::Lit(lit));
        }
        Ok(Template {
            source: source.to_string(),
            parts,
            hashed: false,
        })
    }

    /// The same template, rendering hashed keys (see [`Template::hashed`]).
    pub fn hashed(mut self) -> Template {
        self.hashed = true;
        self
    }

    /// The literal text before the first parameter (the key's namespace).
    pub fn prefix(&self) -> &str {
        match self.parts.first() {
            Some(Part::Lit(l)) => l,
            _ => "",
        }
    }

    /// The parameter names the template reads, in order.
    pub fn params(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().filter_map(|p| match p {
            Part::Param(n) => Some(n.as_str()),
            Part::Lit(_) => None,
        })
    }

    /// Renders the key. `value(name)` gives the parameter's value and whether it is an
    /// identity (hashed). Returns `None` when a parameter has no value. A hashed template
    /// renders its prefix and the SHA-256 (hex) of the whole key: at most the prefix's
    /// length plus 64 bytes.
    pub fn render<'a>(
        &self,
        mut value: impl FnMut(&str) -> Option<(&'a str, bool)>,
    ) -> Option<String> {
        let mut out = String::new();
        for part in &self.parts {
            match part {
                Part::Lit(l) => out.push_str(l),
                Part::Param(name) => {
                    let (v, identity) = value(name)?;
                    if identity {
                        out.push_str(&identity_hash(v));
                    } else {
                        encode_into(&mut out, v);
                    }
                }
            }
        }
        if self.hashed {
            return Some(format!(
                "{}{}",
                self.prefix(),
                hex::encode(Sha256::digest(out.as_bytes()))
            ));
        }
        Some(out)
    }
}

/// The key-space form of a user identity: the first 32 hex digits of its SHA-256.
/// Also used wherever a log line needs to tell users apart without naming them.
pub fn identity_hash(value: &str) -> String {
    let digest = Sha256::digest(value.as_bytes());
    hex::encode(&digest[..16])
}

fn encode_into(out: &mut String, v: &str) {
    for b in v.bytes() {
        if b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.' {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_literals_and_params() {
        let t = Template::parse("user_rec:{user_id}").unwrap();
        assert_eq!(
            t.parts,
            vec![Part::Lit("user_rec:".into()), Part::Param("user_id".into())]
        );
        assert_eq!(t.params().collect::<Vec<_>>(), vec!["user_id"]);
    }

    #[test]
    fn rejects_broken_braces_with_offsets() {
        assert_eq!(Template::parse("a:{user").unwrap_err().offset, 2);
        assert_eq!(Template::parse("a}").unwrap_err().offset, 1);
        assert!(Template::parse("a:{}").is_err());
        assert!(Template::parse("a:{user id}").is_err());
    }

    #[test]
    fn identity_values_are_hashed_and_others_encoded() {
        let t = Template::parse("u:{user}:{cat}").unwrap();
        let key = t
            .render(|n| match n {
                "user" => Some(("alice", true)),
                "cat" => Some(("a/b:c", false)),
                _ => None,
            })
            .unwrap();
        assert_eq!(key, format!("u:{}:a%2Fb%3Ac", identity_hash("alice")));
        assert!(!key.contains("alice"));
    }

    #[test]
    fn user_input_cannot_forge_another_key() {
        let t = Template::parse("cat:{cat}").unwrap();
        let forged = t.render(|_| Some(("x:user_rec:bob", false))).unwrap();
        assert_eq!(forged, "cat:x%3Auser_rec%3Abob");
    }

    #[test]
    fn hashed_templates_keep_their_prefix_and_bound_their_length() {
        let t = Template::parse("search:{q}").unwrap().hashed();
        let long = "x y".repeat(300);
        let key = t.render(|_| Some((long.as_str(), false))).unwrap();
        assert!(key.starts_with("search:"));
        assert_eq!(key.len(), "search:".len() + 64);
        let other = t.render(|_| Some(("x y", false))).unwrap();
        assert_ne!(key, other, "different values, different keys");
    }

    #[test]
    fn missing_value_renders_nothing() {
        let t = Template::parse("cat:{cat}").unwrap();
        assert_eq!(t.render(|_| None), None);
    }
}
