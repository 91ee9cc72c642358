//! [E-INPUT] A request's parameter values once [`crate::request`] has validated them: what
//! the tiers, key templates and the origin request read. A module of its own, below the
//! policy, because the tier kinds the policy declares read them too.

/// A validated parameter value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamValue {
    pub name: String,
    pub value: String,
    /// The value identifies a user (hash it in keys, never log it).
    pub identity: bool,
}

/// The request's validated parameters, in policy order; absent optional ones are left out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Params {
    pub values: Vec<ParamValue>,
}

impl Params {
    pub fn get(&self, name: &str) -> Option<&str> {
        self.values
            .iter()
            .find(|v| v.name == name)
            .map(|v| v.value.as_str())
    }

    /// Value and identity flag, in the shape [`crate::template::Template::render`] wants.
    pub fn lookup(&self, name: &str) -> Option<(&str, bool)> {
        self.values
            .iter()
            .find(|v| v.name == name)
            .map(|v| (v.value.as_str(), v.identity))
    }

    /// A live answer to this request is personalised: it names a user.
    pub fn is_personalized(&self) -> bool {
        self.values.iter().any(|v| v.identity)
    }
}
