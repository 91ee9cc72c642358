//! `[service]`, `[params.*]` and `[identity]`: what the endpoint is and what it reads [P-ROUTE].

use std::borrow::Cow;
use std::collections::BTreeMap;

use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use toml_span::value::{Value, ValueInner};
use toml_span::{DeserError, Deserialize};
use understudy_core::policy::{IdentityRules, Method, Param, ParamSource, ParamType, Service};

use super::leaf::*;
use super::problem::Problem;
use super::table::{Problems, Table, Unknown};
use crate::codes::Code;

impl Words for Method {
    const NAME: &'static str = "Method";
    const ALL: &'static [(&'static str, Method)] = Method::ALL;
}

impl Words for ParamSource {
    const NAME: &'static str = "ParamSource";
    const ALL: &'static [(&'static str, ParamSource)] = ParamSource::ALL;
}

impl Words for ParamType {
    const NAME: &'static str = "ParamType";
    const ALL: &'static [(&'static str, ParamType)] = ParamType::ALL;
}

/// [P-ROUTE] The endpoint.
#[derive(Debug, Clone, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Service")]
pub struct RawService {
    /// Service name: the Worker's name, in logs and metrics.
    pub name: Spanned<Name>,
    /// Route path; `{name}` segments are path parameters.
    pub route: Spanned<UrlPath>,
    /// Accepted methods (default ["GET"]).
    pub methods: Option<Spanned<NonEmpty<Spanned<Word<Method>>>>>,
    /// Declared peak traffic in requests per second, to check the breaker can trigger.
    pub expected_rps: Option<Spanned<Count<1, 10_000_000>>>,
    #[serde(skip)]
    pub span: Span,
    #[serde(skip)]
    pub unknown: Unknown,
}

impl<'de> Deserialize<'de> for RawService {
    fn deserialize(v: &mut Value<'de>) -> Result<Self, DeserError> {
        let span = (v.span.start, v.span.end);
        let mut t = Table::new(v)?;
        let name = t.req("name");
        let route = t.req("route");
        let methods = t.opt("methods");
        let expected_rps = t.opt("expected_rps");
        let unknown = Unknown(t.finish()?);
        Ok(RawService {
            name: name.ok_or_else(bug)?,
            route: route.ok_or_else(bug)?,
            methods,
            expected_rps,
            span,
            unknown,
        })
    }
}

/// `finish` already failed the table when a required key was missing or wrong; this is
/// only reached if toml-span changed that contract.
pub(super) fn bug() -> DeserError {
    DeserError { errors: Vec::new() }
}

impl Problems for RawService {
    fn problems(&self, out: &mut Vec<toml_span::Error>) {
        self.unknown.problems(out);
    }
}

impl RawService {
    pub fn lower(&self) -> Service {
        Service {
            name: self.name.value.0.clone(),
            route: self.route.value.0.clone(),
            methods: self
                .methods
                .as_ref()
                .map(|m| m.value.0.iter().map(|w| w.value.0).collect())
                .unwrap_or_else(|| vec![Method::Get]),
            expected_rps: self.expected_rps.map(|c| c.value.0 as u32),
        }
    }
}

/// `[params.NAME]`: the request parameters by name.
#[derive(Debug, Clone, Default)]
pub struct RawParams(pub BTreeMap<String, (Span, Part<RawParam>)>);

const PARAM_NAME: &str = "^[A-Za-z0-9_]{1,64}$";

impl<'de> Deserialize<'de> for RawParams {
    fn deserialize(v: &mut Value<'de>) -> Result<Self, DeserError> {
        let table = match v.take() {
            ValueInner::Table(t) => t,
            other => {
                return Err(Problem::new(
                    Code::WrongType,
                    format!("`params` must be a table, found a {}", other.type_str()),
                    "expected a table",
                    "write `[params.NAME]` tables, one per parameter",
                )
                .at(v.span)
                .into())
            }
        };
        let re = regex_lite::Regex::new(PARAM_NAME).map_err(|_| bug())?;
        let mut out = BTreeMap::new();
        let mut errors = Vec::new();
        for (key, mut value) in table {
            if !re.is_match(&key.name) {
                errors.push(
                    Problem::new(
                        Code::InvalidValue,
                        format!("`{}` is not a parameter name", key.name),
                        "letters, digits and `_` only",
                        "rename the parameter with letters, digits and `_`",
                    )
                    .at(key.span),
                );
                continue;
            }
            let part =
                Part::<RawParam>::deserialize(&mut value).unwrap_or_else(|e| Part::Bad(e.errors));
            out.insert(
                key.name.into_owned(),
                ((key.span.start, key.span.end), part),
            );
        }
        if errors.is_empty() {
            Ok(RawParams(out))
        } else {
            // The good parameters' errors are reported with the bad names.
            for (_, (_, p)) in out {
                p.problems(&mut errors);
            }
            Err(DeserError { errors })
        }
    }
}

impl Problems for RawParams {
    fn problems(&self, out: &mut Vec<toml_span::Error>) {
        for (_, p) in self.0.values() {
            p.problems(out);
        }
    }
}

impl JsonSchema for RawParams {
    fn schema_name() -> Cow<'static, str> {
        "Params".into()
    }
    fn json_schema(g: &mut SchemaGenerator) -> Schema {
        let param = g.subschema_for::<RawParam>();
        json_schema!({
            "type": "object",
            "description": "Request parameters by name, validated before any I/O.",
            "propertyNames": {"pattern": PARAM_NAME},
            "additionalProperties": param,
        })
    }
}

/// A request parameter, validated before any I/O.
#[derive(Debug, Clone, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(transform = header_from_is_a_token)]
#[schemars(rename = "Param")]
pub struct RawParam {
    /// Where the value comes from.
    pub source: Spanned<Word<ParamSource>>,
    /// Query key, header name, path segment or claim name (default: the parameter's name).
    pub from: Option<Spanned<Text>>,
    /// Value type (default string).
    #[serde(rename = "type")]
    pub ty: Option<Spanned<Word<ParamType>>>,
    /// Regular expression the whole value must match (regex-lite syntax).
    pub pattern: Option<Spanned<Pattern>>,
    /// Longest accepted value in bytes (default 256).
    pub max_len: Option<Spanned<Count<1, 8192>>>,
    /// Reject requests without it (default false).
    pub required: Option<Spanned<Flag>>,
    /// Value used when absent.
    pub default: Option<Spanned<AnyText>>,
    /// The parameter identifies a user: tiers keyed by it are per-user.
    pub identity: Option<Spanned<Flag>>,
    /// Explicit, warned opt-out: identity from an unverified source.
    pub allow_unverified_identity: Option<Spanned<Flag>>,
    #[serde(skip)]
    pub span: Span,
    #[serde(skip)]
    pub unknown: Unknown,
}

/// A header parameter's `from` is a header name: an RFC 9110 token.
fn header_from_is_a_token(schema: &mut Schema) {
    let rule = serde_json::json!({
        "if": {"properties": {"source": {"const": "header"}}, "required": ["source"]},
        "then": {"properties": {"from": {"pattern": TokenKind::PATTERN}}}
    });
    schema.insert("allOf".into(), serde_json::json!([rule]));
}

impl<'de> Deserialize<'de> for RawParam {
    fn deserialize(v: &mut Value<'de>) -> Result<Self, DeserError> {
        let span = (v.span.start, v.span.end);
        let mut t = Table::new(v)?;
        let source: Option<Spanned<Word<ParamSource>>> = t.req("source");
        let from: Option<Spanned<Text>> = t.opt("from");
        if let (Some(s), Some(f)) = (&source, &from) {
            if s.value.0 == ParamSource::Header && !TokenKind::regex().is_match(f.value.as_str()) {
                t.th.errors.push(
                    Problem::new(
                        Code::BadHeaderValue,
                        format!(
                            "`{{key}}` is {}, which is not an HTTP header name (an RFC 9110 token)",
                            shown(f.value.as_str())
                        ),
                        "not a header name",
                        TokenKind::HELP,
                    )
                    .at(toml_span::Span::new(f.span.0, f.span.1)),
                );
            }
        }
        let ty = t.opt("type");
        let pattern = t.opt("pattern");
        let max_len = t.opt("max_len");
        let required = t.opt("required");
        let default = t.opt("default");
        let identity = t.opt("identity");
        let allow_unverified_identity = t.opt("allow_unverified_identity");
        let unknown = Unknown(t.finish()?);
        Ok(RawParam {
            source: source.ok_or_else(bug)?,
            from,
            ty,
            pattern,
            max_len,
            required,
            default,
            identity,
            allow_unverified_identity,
            span,
            unknown,
        })
    }
}

impl Problems for RawParam {
    fn problems(&self, out: &mut Vec<toml_span::Error>) {
        self.unknown.problems(out);
    }
}

/// `max_len` when the policy does not say.
pub const DEFAULT_MAX_LEN: u64 = 256;

impl RawParam {
    pub fn lower(&self, name: &str) -> Param {
        Param {
            name: name.to_string(),
            source: self.source.value.0,
            from: self
                .from
                .as_ref()
                .map(|f| f.value.0.clone())
                .unwrap_or_else(|| name.to_string()),
            ty: self.ty.map_or(ParamType::String, |t| t.value.0),
            pattern: self.pattern.as_ref().map(|p| p.value.0.clone()),
            max_len: self.max_len.map_or(DEFAULT_MAX_LEN, |m| m.value.0) as u32,
            required: self.required.is_some_and(|r| r.value.0),
            default: self.default.as_ref().map(|d| d.value.0.clone()),
            identity: self.identity.is_some_and(|r| r.value.0),
            allow_unverified: self.allow_unverified_identity.is_some_and(|r| r.value.0),
        }
    }
}

/// Verified identity: HS256 bearer tokens.
#[derive(Debug, Clone, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Identity")]
pub struct RawIdentity {
    /// Secret binding holding the HMAC key.
    pub secret: Spanned<Binding>,
    /// Required `iss`.
    pub issuer: Spanned<Text>,
    /// Required `aud`.
    pub audience: Spanned<Text>,
    /// Clock skew tolerated on exp/nbf (default 30s, at most 5m).
    pub leeway: Option<Spanned<Dur<0, 300_000>>>,
    #[serde(skip)]
    pub unknown: Unknown,
}

impl<'de> Deserialize<'de> for RawIdentity {
    fn deserialize(v: &mut Value<'de>) -> Result<Self, DeserError> {
        let mut t = Table::new(v)?;
        let secret = t.req("secret");
        let issuer = t.req("issuer");
        let audience = t.req("audience");
        let leeway = t.opt("leeway");
        let unknown = Unknown(t.finish()?);
        Ok(RawIdentity {
            secret: secret.ok_or_else(bug)?,
            issuer: issuer.ok_or_else(bug)?,
            audience: audience.ok_or_else(bug)?,
            leeway,
            unknown,
        })
    }
}

impl Problems for RawIdentity {
    fn problems(&self, out: &mut Vec<toml_span::Error>) {
        self.unknown.problems(out);
    }
}

impl RawIdentity {
    pub fn lower(&self) -> IdentityRules {
        IdentityRules {
            secret: self.secret.value.0.clone(),
            issuer: self.issuer.value.0.clone(),
            audience: self.audience.value.0.clone(),
            leeway_ms: self.leeway.map_or(30_000, |l| l.value.0),
        }
    }
}
