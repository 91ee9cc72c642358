//! The replayed requests. The logs carry no parameter (nothing that identifies a user, by
//! design), so each replayed request gets values the policy accepts: a value of its own
//! for every parameter a tier reads or that identifies a user — no two replayed requests
//! share a KV key, so each read goes to the tier as the logged requests' reads did, rather
//! than to the isolate's memory of another request's — and the policy's default for the
//! others. What the tiers found is the logs' (`world`); the embedded tier answers from the
//! baked catalog for these values (for a curated tier by category: the global list).

use std::collections::BTreeSet;

use understudy_core::policy::{ParamType, Policy};
use understudy_core::request::Validator;

/// A shape of value: its name in messages, and the value for request `n`.
type Shape = (&'static str, fn(u64) -> String);

/// Shapes tried, in order, for a parameter that needs a value of its own per request.
const SHAPES: &[Shape] = &[
    ("r<n>", |i| format!("r{i}")),
    ("<n>", |i| i.to_string()),
    ("R<n>", |i| format!("R{i}")),
    ("r_<n>", |i| format!("r_{i}")),
    ("r-<n>", |i| format!("r-{i}")),
];

/// How a parameter's value is chosen.
#[derive(Debug, Clone)]
enum Source {
    Shape(fn(u64) -> String),
    Fixed(String),
    Absent,
}

/// The value of each parameter for each replayed request.
#[derive(Debug, Clone)]
pub struct Values {
    params: Vec<(String, Source)>,
}

impl Values {
    /// Values `policy` accepts; an error names a parameter none of the shapes fits.
    pub fn for_policy(policy: &Policy) -> Result<Values, String> {
        let validator = Validator::new(policy)?;
        let keyed: BTreeSet<&str> = policy
            .cascade
            .tiers
            .iter()
            .flat_map(|t| t.kind.params())
            .map(|k| k.value)
            .collect();
        let mut params = Vec::new();
        for p in &policy.params {
            let own = p.identity || keyed.contains(p.name.as_str());
            let source = if !own {
                match &p.default {
                    Some(d) => Source::Fixed(d.clone()),
                    None if !p.required => Source::Absent,
                    None => shape(&validator, &p.name, p.ty)?,
                }
            } else {
                shape(&validator, &p.name, p.ty)?
            };
            params.push((p.name.clone(), source));
        }
        Ok(Values { params })
    }

    /// Parameter `name`'s value for request `i`.
    pub fn get(&self, name: &str, i: u64) -> Option<String> {
        match &self.params.iter().find(|(n, _)| n == name)?.1 {
            Source::Shape(f) => Some(f(i)),
            Source::Fixed(v) => Some(v.clone()),
            Source::Absent => None,
        }
    }
}

fn shape(v: &Validator, name: &str, ty: ParamType) -> Result<Source, String> {
    let fits = |f: fn(u64) -> String| {
        [0, 7, 1_234_567]
            .iter()
            .all(|i| v.check(name, &f(*i)).is_ok())
    };
    let shapes: Vec<_> = match ty {
        ParamType::Integer => SHAPES.iter().filter(|(s, _)| *s == "<n>").collect(),
        ParamType::String => SHAPES.iter().collect(),
    };
    shapes
        .into_iter()
        .find(|(_, f)| fits(*f))
        .map(|(_, f)| Source::Shape(*f))
        .ok_or_else(|| {
            let tried: Vec<&str> = SHAPES.iter().map(|(s, _)| *s).collect();
            format!(
                "parameter `{name}`: the replay gives each request a value of its own, and the policy's rules refuse every shape it tries ({}); loosen its `pattern` or `max_len` in a copy of the policy to replay it",
                tried.join(", ")
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyed_and_identity_parameters_get_a_value_per_request_others_their_default() {
        let p = crate::fixtures::sample_policy();
        let v = Values::for_policy(&p).expect("values");
        for param in &p.params {
            let a = v.get(&param.name, 1);
            let b = v.get(&param.name, 2);
            let validator = Validator::new(&p).unwrap();
            if let Some(a) = &a {
                assert!(
                    validator.check(&param.name, a).is_ok(),
                    "{}={a}",
                    param.name
                );
            }
            let keyed = p
                .cascade
                .tiers
                .iter()
                .flat_map(|t| t.kind.params())
                .any(|k| k.value == param.name);
            if param.identity || keyed {
                assert_ne!(a, b, "{} is the same for two requests", param.name);
            }
        }
    }
}
