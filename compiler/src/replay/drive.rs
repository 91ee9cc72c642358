//! One replayed run: a policy's engine — the Worker's own, through `simulate`'s virtual
//! driver — over the logged arrivals, against the world the logs saw, in one case. Each
//! logged isolate gets an engine of its own (its breaker, its KV memory), as in production;
//! the isolates share the world, which holds no state they could pass between them.

use std::collections::BTreeMap;

use understudy_core::bake::Bake;
use understudy_core::catalog::Catalog;
use understudy_core::engine::virtual_io::Virtual;
use understudy_core::engine::Engine;
use understudy_core::policy::Policy;
use understudy_core::Millis;

use super::line::Line;
use super::observed::Observed;
use super::requests::Values;
use super::world::{Case, ReplayWorld, Request, Unknowable};
use crate::simulate::{self, request};

/// What one replayed run produced.
#[derive(Debug, Clone)]
pub struct Run {
    /// The replayed requests' lines, in arrival order.
    pub lines: Vec<Line>,
    pub unknowable: Unknowable,
    /// Requests the run did not answer, or whose line did not read back (both defects).
    pub lost: u64,
}

/// Replays `logged` (sorted by arrival; the first arrived at `first_ms`) through `policy`
/// and its `catalog`, in virtual time starting at `start_ms`, against `obs` in `case`.
pub fn run(
    policy: &Policy,
    catalog: Option<&Catalog>,
    logged: &[Line],
    first_ms: u64,
    obs: &Observed,
    case: Case,
    start_ms: u64,
) -> Result<Run, String> {
    let values = Values::for_policy(policy)?;
    let bake = Bake {
        release_id: "replay".into(),
        policy_hash: String::new(),
        catalog_hash: String::new(),
        validated_at_ms: start_ms,
        compiler_version: crate::dist::COMPILER_VERSION.into(),
        policy: policy.clone(),
        catalog: catalog.cloned(),
    };
    let requests: Vec<Request<'_>> = logged
        .iter()
        .map(|l| Request {
            logged: l,
            at_ms: l.at_ms.saturating_sub(first_ms),
        })
        .collect();
    let mut world = ReplayWorld::new(obs, case, policy, Millis(start_ms), &requests);
    let mut isolates: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, l) in logged.iter().enumerate() {
        isolates.entry(l.isolate.as_str()).or_default().push(i);
    }
    let mut tokens = BTreeMap::new();
    for indices in isolates.values() {
        let mut engine = Engine::new(&bake)?;
        let mut v = Virtual::new();
        for &i in indices {
            let at_ms = requests[i].at_ms;
            let due_us = at_ms * 1000;
            let now_s = (start_ms + at_ms) / 1000;
            let value = |name: &str| values.get(name, i as u64);
            let planned = request::plan_with(policy, i as u64, due_us, value, &mut tokens, now_s);
            v.arrive(
                start_ms * 1000 + due_us,
                i as u64,
                simulate::arrival(&planned),
            );
        }
        // Tokens are cached per claim set; each request's is its own.
        tokens.clear();
        v.run(&mut engine, &simulate::DevBindings, &mut world);
    }
    let unknowable = world.unknowable();
    let mut lost = world.unreadable;
    let mut lines = Vec::with_capacity(logged.len());
    for l in world.lines {
        match l {
            Some(l) => lines.push(l),
            None => lost += 1,
        }
    }
    lines.sort_by_key(|l| l.at_ms);
    Ok(Run {
        lines,
        unknowable,
        lost,
    })
}
