//! The scenario format (docs/scenarios.md): what arrives, when, what the model does, and
//! what the KV tiers hold. Parsed strictly: unknown keys, unknown tiers or parameters,
//! overlapping phases and unbounded runs are errors that name the place.

use std::collections::BTreeMap;
use std::path::Path;

use understudy_core::policy::{Policy, TierKind};
use understudy_core::time::parse_duration;

/// Most requests a scenario may describe: simulations and drills stay bounded.
pub const MAX_REQUESTS: u64 = 3_000_000;
/// The longest run simulated, in µs: a year.
pub const MAX_RUN_US: u64 = 365 * 86_400_000_000;

mod raw;
pub use raw::{RawExpect, RawKv, RawModel, RawPhase, RawScenario};

/// What the model does for one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelFault {
    Ok {
        latency_ms: u64,
    },
    Status {
        code: u16,
        latency_ms: u64,
    },
    RateLimited {
        retry_after_s: Option<u64>,
        latency_ms: u64,
    },
    Hang,
    Reset,
    Malformed {
        latency_ms: u64,
    },
    Empty {
        latency_ms: u64,
    },
    /// Answers after `fast_ms`, or — for `slow_ppm` millionths of calls, drawn per call —
    /// after `slow_ms` (a model with a long tail: what hedging is for).
    Bimodal {
        fast_ms: u64,
        slow_ms: u64,
        slow_ppm: u32,
    },
}

#[derive(Debug, Clone)]
pub struct Phase {
    pub requests: Option<(u64, u64)>,
    pub time: Option<(u64, u64)>,
    pub fault: ModelFault,
    /// The regions it strikes (`[fleet] regions`); empty: every call, wherever it is made.
    pub regions: Vec<String>,
}

impl Phase {
    /// Whether the phase strikes a call made in `region` (`None`: a run with no regions).
    pub fn strikes(&self, region: Option<&str>) -> bool {
        self.regions.is_empty() || region.is_some_and(|r| self.regions.iter().any(|x| x == r))
    }
}

#[derive(Debug, Clone)]
pub struct KvSeed {
    pub tier: String,
    pub binding: String,
    pub key: String,
    pub items: Vec<String>,
    /// Signed age at start, ms (negative: written in the future).
    pub age_ms: i64,
    /// The tier is published (`published = true`): the entry is what `understudy publish`
    /// wrote, validated against a snapshot taken `age` before the start.
    pub published: bool,
}

#[derive(Debug, Clone)]
pub struct Scenario {
    pub name: String,
    pub description: String,
    pub start_ms: u64,
    pub requests: u64,
    /// Arrival spacing in microseconds (so 2,400 req/s stays exact enough).
    pub interval_us: u64,
    pub params: BTreeMap<String, Vec<String>>,
    pub model_latency_ms: u64,
    pub phases: Vec<Phase>,
    pub kv: Vec<KvSeed>,
    pub kv_latency_ms: u64,
    pub expect: Option<RawExpect>,
    pub fleet: Option<super::fleet::spec::FleetSpec>,
}

impl Scenario {
    /// The window `[from, to)` in µs since the first arrival where phase `p` applies. A
    /// request-index phase `[a, b]` is the window `[(a − ½)·interval, (b + ½)·interval)`:
    /// the model is faulty for a stretch of time, and every call made in it — a first
    /// attempt, a retry, a hedge — meets the fault, as calls to the drill's origin do (its
    /// script is these windows, `understudy_lab::drill::script`). The half-interval guard
    /// absorbs the edge's own delay before it calls out. A phase through the last request
    /// lasts to the end of the run, the calls made after the last arrival included (a
    /// retry of the last request meets the fault too).
    pub fn window_us(&self, p: &Phase) -> (u64, u64) {
        let half = self.interval_us / 2;
        let (mut from, mut to) = (0u64, u64::MAX);
        if let Some((a, b)) = p.requests {
            from = from.max(a.saturating_mul(self.interval_us).saturating_sub(half));
            if b + 1 < self.requests {
                to = to.min((b + 1).saturating_mul(self.interval_us) - half);
            }
        }
        // A time past any run (`from = "1000000000d"`) is a phase that never comes.
        if let Some((a, b)) = p.time {
            from = from.max(a.saturating_mul(1000));
            to = to.min(b.saturating_mul(1000));
        }
        (from, to)
    }

    /// What the model does for a call made `t_us` after the first arrival. Earlier phases win.
    pub fn fault_at(&self, t_us: u64) -> ModelFault {
        self.fault_at_in(t_us, None)
    }

    /// [`Self::fault_at`] for a call made in `region` (a phase limited to regions strikes
    /// only there).
    pub fn fault_at_in(&self, t_us: u64, region: Option<&str>) -> ModelFault {
        self.phases
            .iter()
            .find(|p| {
                let (from, to) = self.window_us(p);
                from <= t_us && t_us < to && p.strikes(region)
            })
            .map_or(
                ModelFault::Ok {
                    latency_ms: self.model_latency_ms,
                },
                |p| p.fault,
            )
    }

    /// What the model does for request `i` arriving `t_ms` after the start. Earlier phases win.
    pub fn fault(&self, i: u64, t_ms: u64) -> ModelFault {
        self.fault_in(i, t_ms, None)
    }

    /// [`Self::fault`] for a request served in `region`.
    pub fn fault_in(&self, i: u64, t_ms: u64, region: Option<&str>) -> ModelFault {
        for p in self.phases.iter().filter(|p| p.strikes(region)) {
            let by_req = p.requests.map(|(a, b)| (a..=b).contains(&i));
            let by_time = p.time.map(|(a, b)| t_ms >= a && t_ms < b);
            let hit = match (by_req, by_time) {
                (Some(r), Some(t)) => r && t,
                (Some(r), None) => r,
                (None, Some(t)) => t,
                (None, None) => false,
            };
            if hit {
                return p.fault;
            }
        }
        ModelFault::Ok {
            latency_ms: self.model_latency_ms,
        }
    }

    /// The value of parameter `name` for request `i` (values cycle).
    pub fn param(&self, name: &str, i: u64) -> Option<&str> {
        let values = self.params.get(name)?;
        values
            .get((i % values.len() as u64) as usize)
            .map(String::as_str)
    }
}

fn dur(what: &str, s: &str) -> Result<u64, String> {
    parse_duration(s).map_err(|e| format!("{what}: {e}"))
}

fn parse_time(s: &str) -> Option<u64> {
    let t = time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339).ok()?;
    u64::try_from(t.unix_timestamp_nanos() / 1_000_000).ok()
}

/// Reads and checks a scenario against the policy it will run with.
pub fn load(path: &Path, policy: &Policy) -> Result<Scenario, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
    let raw: RawScenario = toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    build(raw, policy).map_err(|e| format!("{}: {e}", path.display()))
}

pub fn build(raw: RawScenario, policy: &Policy) -> Result<Scenario, String> {
    let start_ms = parse_time(&raw.start)
        .ok_or_else(|| format!("`start` = {:?} is not an RFC 3339 time", raw.start))?;
    if raw.requests == 0 || raw.requests > MAX_REQUESTS {
        return Err(format!(
            "`requests` = {} must be between 1 and {MAX_REQUESTS}",
            raw.requests
        ));
    }
    let interval_us = match (&raw.interval, raw.rate) {
        (Some(i), None) => dur("`interval`", i)?.saturating_mul(1000),
        (None, Some(r)) if r.is_finite() && r > 0.0 && r <= 1_000_000.0 => {
            (1_000_000.0 / r).round() as u64
        }
        (None, Some(r)) => {
            return Err(format!(
                "`rate` = {r} must be between 0 and 1000000 requests per second"
            ))
        }
        (Some(_), Some(_)) => return Err("give either `interval` or `rate`, not both".into()),
        (None, None) => {
            return Err("missing `interval` (e.g. \"1s\") or `rate` (requests per second)".into())
        }
    };
    // The run's clock is in microseconds: a run that would outlast a year is refused
    // rather than overflow it.
    if raw.requests.saturating_mul(interval_us) > MAX_RUN_US {
        return Err(format!(
            "{} requests {} apart last over a year: give a shorter `interval` or a higher `rate`",
            raw.requests,
            understudy_core::time::format_duration(interval_us / 1000)
        ));
    }
    for name in raw.params.keys() {
        if policy.param(name).is_none() {
            let known = policy
                .params
                .iter()
                .map(|p| p.name.as_str())
                .collect::<Vec<_>>()
                .join(", ");
            return Err(format!(
                "[params] `{name}` is not a parameter of the policy (it has: {known})"
            ));
        }
    }
    for (name, values) in &raw.params {
        if values.is_empty() {
            return Err(format!("[params] `{name}` has no values"));
        }
    }
    for p in policy
        .params
        .iter()
        .filter(|p| p.required && p.default.is_none())
    {
        if !raw.params.contains_key(&p.name) {
            return Err(format!(
                "[params] lacks `{}`, which the policy requires",
                p.name
            ));
        }
    }
    let model_latency_ms = dur("`model.latency`", &raw.model.latency)?;
    let mut phases = Vec::new();
    for (n, p) in raw.model.phase.iter().enumerate() {
        let at = format!("model.phase[{n}]");
        let latency_ms = match &p.latency {
            Some(l) => dur(&format!("{at}.latency"), l)?,
            None => model_latency_ms,
        };
        let fault = match p.fault.as_str() {
            "ok" | "slow" => ModelFault::Ok { latency_ms },
            "down" => ModelFault::Status { code: 503, latency_ms: 0 },
            "5xx" => ModelFault::Status { code: 500, latency_ms },
            "429" => ModelFault::RateLimited { retry_after_s: p.retry_after, latency_ms: latency_ms.min(5) },
            "hang" => ModelFault::Hang,
            "reset" => ModelFault::Reset,
            "malformed" => ModelFault::Malformed { latency_ms },
            "empty" => ModelFault::Empty { latency_ms },
            "bimodal" => {
                let slow_ms = match &p.slow_latency {
                    Some(l) => dur(&format!("{at}.slow_latency"), l)?,
                    None => return Err(format!("{at}: a bimodal fault needs `slow_latency`")),
                };
                let share = p.slow_share.unwrap_or(0.05);
                if !(0.0..=1.0).contains(&share) {
                    return Err(format!("{at}.slow_share = {share} is not between 0 and 1"));
                }
                ModelFault::Bimodal {
                    fast_ms: latency_ms,
                    slow_ms,
                    slow_ppm: (share * 1e6).round() as u32,
                }
            }
            other => match other.parse::<u16>() {
                Ok(code) if (400..=599).contains(&code) => ModelFault::Status { code, latency_ms },
                _ => {
                    return Err(format!(
                        "{at}.fault = {other:?} is not a fault; use ok, slow, down, 5xx, 429, hang, reset, malformed, empty, bimodal or a status from \"400\" to \"599\""
                    ))
                }
            },
        };
        let requests = match p.requests {
            Some([a, b]) if a > b => return Err(format!("{at}.requests = [{a}, {b}] is inverted")),
            Some([a, b]) if b >= raw.requests => {
                return Err(format!(
                    "{at}.requests = [{a}, {b}] reaches past the last request ({})",
                    raw.requests - 1
                ))
            }
            Some([a, b]) => Some((a, b)),
            None => None,
        };
        let time = match (&p.from, &p.to) {
            (Some(f), Some(t)) => {
                let (f, t) = (dur(&format!("{at}.from"), f)?, dur(&format!("{at}.to"), t)?);
                if f >= t {
                    return Err(format!("{at}: `from` must be before `to`"));
                }
                Some((f, t))
            }
            (None, None) => None,
            _ => return Err(format!("{at}: give both `from` and `to`")),
        };
        if requests.is_none() && time.is_none() {
            return Err(format!(
                "{at}: give `requests = [first, last]` or `from`/`to`"
            ));
        }
        let regions = match &p.regions {
            Some(r) if r.is_empty() => {
                return Err(format!(
                    "{at}.regions is empty; leave it out to strike everywhere"
                ))
            }
            Some(r) => {
                let named: Vec<&String> = raw
                    .fleet
                    .as_ref()
                    .and_then(|f| f.regions.as_ref())
                    .map(|m| m.keys().collect())
                    .unwrap_or_default();
                if let Some(bad) = r.iter().find(|x| !named.contains(x)) {
                    return Err(if named.is_empty() {
                        format!("{at}.regions names `{bad}`, but the scenario has no `[fleet] regions` table")
                    } else {
                        format!(
                            "{at}.regions names `{bad}`, not a region of `[fleet] regions` ({})",
                            named
                                .iter()
                                .map(|s| s.as_str())
                                .collect::<Vec<_>>()
                                .join(", ")
                        )
                    });
                }
                r.clone()
            }
            None => Vec::new(),
        };
        phases.push(Phase {
            requests,
            time,
            fault,
            regions,
        });
    }
    let mut kv = Vec::new();
    for (n, k) in raw.kv.iter().enumerate() {
        let at = format!("kv[{n}]");
        let tier = policy
            .cascade
            .tiers
            .iter()
            .find(|t| t.name == k.tier)
            .ok_or_else(|| format!("{at}.tier = {:?} is not a tier of the policy", k.tier))?;
        let TierKind::Kv(kvt) = &tier.kind else {
            return Err(format!("{at}.tier = {:?} is not a KV tier", k.tier));
        };
        for name in k.params.keys() {
            if policy.param(name).is_none() {
                return Err(format!(
                    "{at}.params: `{name}` is not a parameter of the policy"
                ));
            }
        }
        let key = kvt
            .key
            .render(|name| {
                let identity = policy.param(name).is_some_and(|p| p.identity);
                k.params.get(name).map(|v| (v.as_str(), identity))
            })
            .ok_or_else(|| {
                format!(
                    "{at}.params do not fill the key template `{}`",
                    kvt.key.source
                )
            })?;
        let age_ms = match k.age.strip_prefix('-') {
            Some(rest) => -(dur(&format!("{at}.age"), rest)? as i64),
            None => dur(&format!("{at}.age"), &k.age)? as i64,
        };
        kv.push(KvSeed {
            tier: k.tier.clone(),
            binding: kvt.binding.clone(),
            key,
            items: k.items.clone(),
            age_ms,
            published: kvt.published,
        });
    }
    let kv_latency_ms = match &raw.kv_latency {
        Some(l) => dur("`kv_latency`", l)?,
        None => 2,
    };
    if let Some(tiers) = raw.expect.as_ref().and_then(|e| e.tiers.as_ref()) {
        for name in tiers.keys() {
            if name != "origin" && !policy.cascade.tiers.iter().any(|t| &t.name == name) {
                return Err(format!(
                    "expect.tiers: `{name}` is not a tier of the policy (nor `origin`)"
                ));
            }
        }
    }
    Ok(Scenario {
        name: raw.name,
        description: raw.description,
        start_ms,
        requests: raw.requests,
        interval_us,
        params: raw.params,
        model_latency_ms,
        phases,
        kv,
        kv_latency_ms,
        expect: raw.expect,
        fleet: raw
            .fleet
            .as_ref()
            .map(|f| super::fleet::spec::spec(f).and_then(|s| s.against(policy)))
            .transpose()?,
    })
}
