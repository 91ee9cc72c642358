//! The parts of a policy that read, lowered to the model the edge runs (defaults applied
//! in one place: each raw section's `lower`), each next to its raw form for spans. A part
//! that failed to read is absent here, and only the rules that need it wait for it to be
//! fixed: an unknown key or a bad value in one table never hides a rule about another.

use understudy_core::policy::*;

use crate::parse::breaker::RawBreaker;
use crate::parse::cascade::{RawCascade, RawTier};
use crate::parse::disclose::{default_disclosure, RawAdmin, RawCatalog, RawDisclosure};
use crate::parse::events::RawEvents;
use crate::parse::leaf::{Part, Span};
use crate::parse::origin::{RawBudget, RawOrigin};
use crate::parse::rollout::RawRollout;
use crate::parse::route::{RawParam, RawService};
use crate::parse::RawPolicy;
use crate::slo::Slo;
use understudy_core::policy::events::Events;

/// An optional section: absent (the default applies), read, or failed.
#[derive(Debug, Clone, Copy)]
pub enum Opt<T> {
    Absent,
    Ok(T),
    Failed,
}

impl<T> Opt<T> {
    /// `Some(None)` when absent, `Some(Some(t))` when read, `None` when it failed.
    pub fn read(&self) -> Option<Option<&T>> {
        match self {
            Opt::Absent => Some(None),
            Opt::Ok(t) => Some(Some(t)),
            Opt::Failed => None,
        }
    }
}

fn opt<'r, R, T>(p: &'r Option<Part<R>>, lower: impl FnOnce(&'r R) -> T) -> Opt<(T, &'r R)> {
    match p {
        None => Opt::Absent,
        Some(Part::Ok(r)) => Opt::Ok((lower(r), r)),
        Some(Part::Bad(_)) => Opt::Failed,
    }
}

pub struct Param<'r> {
    pub model: understudy_core::policy::Param,
    pub raw: &'r RawParam,
    pub key_span: Span,
}

pub struct TierPart<'r> {
    pub model: Tier,
    pub raw: &'r RawTier,
}

pub struct Model<'r> {
    pub version: Option<String>,
    pub service: Option<(Service, &'r RawService)>,
    /// The parameters that read; `params_complete` when that is all of them.
    pub params: Vec<Param<'r>>,
    pub params_complete: bool,
    pub identity: Opt<IdentityRules>,
    pub budget: Option<(Budget, &'r RawBudget)>,
    pub origin: Option<(Origin, &'r RawOrigin)>,
    pub breaker: Option<Breaker>,
    pub raw_breaker: Option<&'r RawBreaker>,
    pub cascade: Option<&'r RawCascade>,
    /// One entry per tier written, `None` where the tier failed to read.
    pub tiers: Vec<Option<TierPart<'r>>>,
    /// `None` when `[disclosure]` failed; the defaults when it is absent.
    pub disclosure: Option<Disclosure>,
    pub raw_disclosure: Option<&'r RawDisclosure>,
    pub storm: Opt<Storm>,
    pub catalog: Opt<(CatalogRules, &'r RawCatalog)>,
    pub admin: Opt<(Admin, &'r RawAdmin)>,
    pub events: Opt<(Events, &'r RawEvents)>,
    pub rollout: Opt<(Slo, &'r RawRollout)>,
}

impl<'r> Model<'r> {
    pub fn new(raw: &'r RawPolicy) -> Model<'r> {
        let (params, params_complete) = match &raw.params {
            None => (Vec::new(), true),
            Some(Part::Bad(_)) => (Vec::new(), false),
            Some(Part::Ok(ps)) => {
                let mut out = Vec::new();
                let mut complete = true;
                for (name, (key_span, p)) in &ps.0 {
                    match p {
                        Part::Ok(r) => out.push(Param {
                            model: r.lower(name),
                            raw: r,
                            key_span: *key_span,
                        }),
                        Part::Bad(_) => complete = false,
                    }
                }
                (out, complete)
            }
        };
        let cascade = raw.cascade.get();
        let tiers = cascade
            .map(|c| {
                c.tiers
                    .0
                    .iter()
                    .map(|t| {
                        let r = t.get()?;
                        Some(TierPart {
                            model: r.lower()?,
                            raw: r,
                        })
                    })
                    .collect()
            })
            .unwrap_or_default();
        let (disclosure, raw_disclosure) = match &raw.disclosure {
            None => (Some(default_disclosure()), None),
            Some(Part::Ok(d)) => (Some(d.lower()), Some(d)),
            Some(Part::Bad(_)) => (None, None),
        };
        let (breaker, raw_breaker) = match &raw.breaker {
            None => (Some(Breaker::Off), None),
            Some(Part::Ok(b)) => (Some(b.lower()), Some(b)),
            Some(Part::Bad(_)) => (None, None),
        };
        Model {
            version: match &raw.version {
                Some(Part::Ok(v)) => Some(v.value.0.clone()),
                _ => None,
            },
            service: raw.service.get().map(|s| (s.lower(), s)),
            params,
            params_complete,
            identity: match opt(&raw.identity, |i| i.lower()) {
                Opt::Absent => Opt::Absent,
                Opt::Ok((i, _)) => Opt::Ok(i),
                Opt::Failed => Opt::Failed,
            },
            budget: raw.budget.get().map(|b| (b.lower(), b)),
            origin: raw.origin.get().map(|o| (o.lower(), o)),
            breaker,
            raw_breaker,
            cascade,
            tiers,
            disclosure,
            raw_disclosure,
            storm: match opt(&raw.storm, |s| s.lower()) {
                Opt::Absent => Opt::Absent,
                Opt::Ok((s, _)) => Opt::Ok(s),
                Opt::Failed => Opt::Failed,
            },
            catalog: opt(&raw.catalog, |c| c.lower()),
            admin: opt(&raw.admin, |a| a.lower()),
            events: opt(&raw.events, |e| e.lower()),
            rollout: opt(&raw.rollout, |r| r.lower()),
        }
    }

    /// The parts that did not read, as the policy names them.
    pub fn unread(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        let mut miss = |failed: bool, name: &'static str| {
            if failed {
                out.push(name);
            }
        };
        miss(self.service.is_none(), "[service]");
        miss(!self.params_complete, "[params]");
        miss(matches!(self.identity, Opt::Failed), "[identity]");
        miss(self.budget.is_none(), "[budget]");
        miss(self.origin.is_none(), "[origin]");
        miss(self.breaker.is_none(), "[breaker]");
        miss(self.cascade.is_none(), "[cascade]");
        miss(
            self.cascade.is_some() && self.tiers.iter().any(Option::is_none),
            "[[cascade.tiers]]",
        );
        miss(self.disclosure.is_none(), "[disclosure]");
        miss(matches!(self.storm, Opt::Failed), "[storm]");
        miss(matches!(self.catalog, Opt::Failed), "[catalog]");
        miss(matches!(self.admin, Opt::Failed), "[admin]");
        miss(matches!(self.events, Opt::Failed), "[events]");
        out
    }

    /// The parameters' models, when every parameter read.
    pub fn params(&self) -> Option<Vec<understudy_core::policy::Param>> {
        self.params_complete
            .then(|| self.params.iter().map(|p| p.model.clone()).collect())
    }

    /// Every tier, when every tier read.
    pub fn all_tiers(&self) -> Option<Vec<&TierPart<'r>>> {
        self.cascade?;
        self.tiers.iter().map(Option::as_ref).collect()
    }

    /// The tiers that read, with their index.
    pub fn tiers(&self) -> impl Iterator<Item = (usize, &TierPart<'r>)> {
        self.tiers
            .iter()
            .enumerate()
            .filter_map(|(i, t)| t.as_ref().map(|t| (i, t)))
    }

    pub fn promise(&self) -> Option<Promise> {
        self.cascade.map(RawCascade::promise)
    }

    /// The whole policy, when every part read.
    pub fn policy(&self) -> Option<Policy> {
        let tiers = self
            .all_tiers()?
            .into_iter()
            .map(|t| t.model.clone())
            .collect();
        Some(Policy {
            version: self
                .version
                .clone()
                .unwrap_or_else(|| "unversioned".to_string()),
            service: self.service.as_ref()?.0.clone(),
            params: self.params()?,
            budget: self.budget?.0,
            origin: self.origin.as_ref()?.0.clone(),
            breaker: self.breaker.clone()?,
            cascade: Cascade {
                promise: self.promise()?,
                tiers,
            },
            disclosure: self.disclosure.clone()?,
            storm: self.storm.read()?.cloned(),
            catalog: self.catalog.read()?.map(|c| c.0.clone()),
            identity: self.identity.read()?.cloned(),
            admin: self.admin.read()?.map(|a| a.0.clone()),
            events: self.events.read()?.map(|e| e.0.clone()),
        })
    }
}
