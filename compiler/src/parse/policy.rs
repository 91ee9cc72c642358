//! The typed raw policy: the TOML as written, every value with its span. Reading it
//! checks each value on its own (types, units, ranges, header grammar, enum words); whether
//! the values make sense together is `validate`'s job. Its JSON Schema is derived from these
//! same types (`schema.rs`).

use schemars::JsonSchema;
use toml_span::value::Value;

use super::breaker::RawBreaker;
use super::cascade::RawCascade;
use super::disclose::{RawAdmin, RawCatalog, RawDisclosure, RawStorm};
use super::events::RawEvents;
use super::leaf::{Part, Spanned, Text};
use super::origin::{RawBudget, RawOrigin};
use super::rollout::RawRollout;
use super::route::{RawIdentity, RawParams, RawService};
use super::table::{Problems, Table, Unknown};

/// An Understudy fallback policy (docs/policy.md).
#[derive(Debug, Clone, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Policy")]
pub struct RawPolicy {
    /// The policy's version label (free text; releases add a content hash).
    pub version: Option<Part<Spanned<Text>>>,
    pub service: Part<RawService>,
    pub params: Option<Part<RawParams>>,
    pub identity: Option<Part<RawIdentity>>,
    pub budget: Part<RawBudget>,
    pub origin: Part<RawOrigin>,
    pub breaker: Option<Part<RawBreaker>>,
    pub cascade: Part<RawCascade>,
    pub disclosure: Option<Part<RawDisclosure>>,
    pub storm: Option<Part<RawStorm>>,
    pub catalog: Option<Part<RawCatalog>>,
    pub admin: Option<Part<RawAdmin>>,
    pub events: Option<Part<RawEvents>>,
    pub rollout: Option<Part<RawRollout>>,
    #[serde(skip)]
    pub unknown: Unknown,
}

impl RawPolicy {
    /// Reads the document. Never fails as a whole: each part keeps its own errors.
    pub fn read(root: &mut Value<'_>) -> RawPolicy {
        let Ok(mut t) = Table::new(root) else {
            // toml_span::parse always yields a table at the root.
            return RawPolicy::empty();
        };
        let version = t.opt_part("version");
        let service = t.part("service");
        let params = t.opt_part("params");
        let identity = t.opt_part("identity");
        let budget = t.part("budget");
        let origin = t.part("origin");
        let breaker = t.opt_part("breaker");
        let cascade = t.part("cascade");
        let disclosure = t.opt_part("disclosure");
        let storm = t.opt_part("storm");
        let catalog = t.opt_part("catalog");
        let admin = t.opt_part("admin");
        let events = t.opt_part("events");
        let rollout = t.opt_part("rollout");
        let unknown = Unknown(t.finish().unwrap_or_else(|e| e.errors));
        RawPolicy {
            version,
            service,
            params,
            identity,
            budget,
            origin,
            breaker,
            cascade,
            disclosure,
            storm,
            catalog,
            admin,
            events,
            rollout,
            unknown,
        }
    }

    fn empty() -> RawPolicy {
        RawPolicy {
            version: None,
            service: Part::Bad(Vec::new()),
            params: None,
            identity: None,
            budget: Part::Bad(Vec::new()),
            origin: Part::Bad(Vec::new()),
            breaker: None,
            cascade: Part::Bad(Vec::new()),
            disclosure: None,
            storm: None,
            catalog: None,
            admin: None,
            events: None,
            rollout: None,
            unknown: Unknown::default(),
        }
    }
}

impl Problems for RawPolicy {
    fn problems(&self, out: &mut Vec<toml_span::Error>) {
        if let Some(Part::Bad(e)) = &self.version {
            out.extend(e.iter().cloned());
        }
        self.service.problems(out);
        self.params.problems(out);
        self.identity.problems(out);
        self.budget.problems(out);
        self.origin.problems(out);
        self.breaker.problems(out);
        self.cascade.problems(out);
        self.disclosure.problems(out);
        self.storm.problems(out);
        self.catalog.problems(out);
        self.admin.problems(out);
        self.events.problems(out);
        self.rollout.problems(out);
        self.unknown.problems(out);
    }
}
