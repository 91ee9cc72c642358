//! [R-GRADUAL] [R-STATE] A release's gradual rollout on Workers versions, judged on the
//! fallback's own SLO (docs/adr/012-rollout-on-workers-versions.md): the controller's
//! decisions, sans I/O.
//!
//! The controller takes the clock and each window's evidence — the old and the new version's
//! answers, degraded answers, no-tier 5xx answers and p95 over the same window — and gives
//! commands: deploy the new version at a percentage, query a window, record a judgement, end.
//! Its [`State`] is what the registry keeps after every command, so a killed rollout resumes
//! at the recorded step with nothing lost or repeated. The drivers (wrangler and the
//! Analytics Engine SQL API; the local front of `drill --rollout`) perform and report.
//!
//! A judgement asks for evidence both ways, with the breaker's rule
//! (`understudy_core::breaker::rate::wilson`): a share is worse when the new version's
//! one-sided 99% lower bound is over the old's upper bound plus the margin, and within the
//! SLO only when the new version's upper bound is at most the old's lower bound plus the
//! margin. Anything between — too few answers, or a difference the answers cannot settle, such
//! as an origin incident hurting both versions — holds.

pub mod cloudflare;
pub mod guard;
pub mod latency;
pub mod preflight;
pub mod progress;
pub mod record;
pub mod replay;
pub mod run;

use serde::{Deserialize, Serialize};
use understudy_core::breaker::rate::wilson;
use understudy_core::Millis;

pub use self::latency::Histogram;
pub use crate::slo::{answers_to_advance, Slo};

/// The share of answers a p95 leaves slower than itself.
const SLOW_SHARE: f64 = 0.05;

/// One version's answers over a window.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Figures {
    pub answers: u64,
    /// Answered from a fallback tier or not at all (`fallback` + `unavailable`).
    pub degraded: u64,
    /// Answered 503/504: no tier could.
    pub unavailable: u64,
    /// The answers' latencies ([`latency`]'s buckets).
    pub latency: Histogram,
}

impl Figures {
    /// The p95 latency (a bucket's upper edge: never an underestimate), if any answers.
    pub fn p95_ms(&self) -> Option<f64> {
        self.latency.quantile(0.95)
    }
}

/// Both versions over the same window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    pub from: u64,
    pub to: u64,
    pub old: Figures,
    pub new: Figures,
}

/// A judgement of one window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum Judgement {
    Advance { reasons: Vec<String> },
    Hold { reasons: Vec<String> },
    RollBack { reasons: Vec<String> },
}

/// How one share compares.
fn share(
    name: &str,
    margin: f64,
    (old_k, old_n): (u64, u64),
    (new_k, new_n): (u64, u64),
) -> (Option<bool>, String) {
    let c = |x: u64| x.min(u64::from(u32::MAX)) as u32;
    let (old_lo, old_hi) = wilson(c(old_k), c(old_n));
    let (new_lo, new_hi) = wilson(c(new_k), c(new_n));
    let (old_lo, new_lo) = (old_lo.max(0.0), new_lo.max(0.0));
    let shown = format!(
        "{name}: new {:.2}% [{:.2}, {:.2}] of {new_n}, old {:.2}% [{:.2}, {:.2}] of {old_n}, margin +{:.2}%",
        100.0 * new_k as f64 / new_n.max(1) as f64,
        100.0 * new_lo,
        100.0 * new_hi,
        100.0 * old_k as f64 / old_n.max(1) as f64,
        100.0 * old_lo,
        100.0 * old_hi,
        100.0 * margin
    );
    if new_lo > old_hi + margin {
        (Some(false), format!("worse — {shown}"))
    } else if new_hi <= old_lo + margin {
        (Some(true), format!("within — {shown}"))
    } else {
        (None, format!("unsettled — {shown}"))
    }
}

/// How the p95 compares: worse with evidence when the share of the new version's answers
/// certainly slower than the old p95 plus the margin has a one-sided 99% lower bound over 5%
/// (so a noisy p95 from a thin window cannot roll a good release back); within when the new
/// p95 is at most that limit; unsettled otherwise.
fn p95(slo: &Slo, old: &Figures, new: &Figures) -> (Option<bool>, String) {
    let (Some(old_p95), Some(new_p95)) = (old.p95_ms(), new.p95_ms()) else {
        return (None, "unsettled — p95: no latencies".into());
    };
    let limit = old_p95 * (1.0 + slo.p95_margin);
    let n = new.latency.count();
    let slow = new.latency.above(limit);
    let c = |x: u64| x.min(u64::from(u32::MAX)) as u32;
    let (slow_lo, _) = wilson(c(slow), c(n));
    let shown = format!(
        "p95: new {new_p95:.1} ms, old {old_p95:.1} ms, limit {limit:.1} ms; {slow} of {n} new \
         answers over the limit ({:.1}%, lower bound {:.1}%)",
        100.0 * slow as f64 / n.max(1) as f64,
        100.0 * slow_lo
    );
    if slow_lo > SLOW_SHARE {
        (Some(false), format!("worse — {shown}"))
    } else if new_p95 <= limit {
        (Some(true), format!("within — {shown}"))
    } else {
        (None, format!("unsettled — {shown}"))
    }
}

/// Judges one window's evidence against `slo`.
pub fn judge(slo: &Slo, ev: &Evidence) -> Judgement {
    let (old, new) = (&ev.old, &ev.new);
    if old.answers < slo.min_answers || new.answers < slo.min_answers {
        return Judgement::Hold {
            reasons: vec![format!(
                "too few answers: new {}, old {}, at least {} each",
                new.answers, old.answers, slo.min_answers
            )],
        };
    }
    let mut checks = vec![
        share(
            "degraded share",
            slo.degraded_margin,
            (old.degraded, old.answers),
            (new.degraded, new.answers),
        ),
        share(
            "no-tier 5xx share",
            slo.unavailable_margin,
            (old.unavailable, old.answers),
            (new.unavailable, new.answers),
        ),
    ];
    checks.push(p95(slo, old, new));
    let reasons: Vec<String> = checks.iter().map(|(_, r)| r.clone()).collect();
    if checks.iter().any(|(ok, _)| *ok == Some(false)) {
        Judgement::RollBack { reasons }
    } else if checks.iter().all(|(ok, _)| *ok == Some(true)) {
        Judgement::Advance { reasons }
    } else {
        Judgement::Hold { reasons }
    }
}

/// Where a rollout is: what the registry records after every command.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct State {
    /// Index into [`Slo::steps`].
    pub step: usize,
    /// When the current step's deployment was confirmed (its window starts then).
    pub since: Option<u64>,
    /// When the step is judged next (a dwell after it started, or after a hold).
    pub due: Option<u64>,
    pub holds: u32,
    pub phase: Phase,
    /// Every judgement so far, with its step and evidence.
    pub log: Vec<Logged>,
    /// Every deployment confirmed, with when (the timeline of `status` and `--report`).
    #[serde(default)]
    pub deployed: Vec<Deployed>,
}

/// A deployment the driver confirmed: the new version's share from `at` on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Deployed {
    pub at: u64,
    pub new_percent: u8,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// The step's deployment is asked for and not yet confirmed.
    Deploying,
    /// Deployed: waiting out the dwell, then judging.
    Watching,
    Done,
    /// The old version at 100% is asked for and not yet confirmed after a judgement against
    /// the new one: not finished — a killed controller asks for it again.
    RollingBack,
    RolledBack,
    /// `--abort`: the old version at 100% asked for by an operator, not yet confirmed.
    Aborting,
    /// `--abort` done: the old version at 100%, no judgement against the new one.
    Aborted,
    /// Refused before its first step: the replay pre-flight found the new release worse
    /// (`--replay`); nothing was deployed.
    Refused,
}

impl Phase {
    /// The phase in an operator's words (never the variant's name).
    pub fn word(self) -> &'static str {
        match self {
            Phase::Deploying => "deploying",
            Phase::Watching => "watching",
            Phase::Done => "advanced to 100%",
            Phase::RollingBack => "rolling back",
            Phase::RolledBack => "rolled back",
            Phase::Aborting => "aborting",
            Phase::Aborted => "aborted",
            Phase::Refused => "refused by the replay pre-flight",
        }
    }

    /// Whether the rollout has ended (nothing more to deploy).
    pub fn ended(self) -> bool {
        matches!(
            self,
            Phase::Done | Phase::RolledBack | Phase::Aborted | Phase::Refused
        )
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Logged {
    pub step: u8,
    pub at: u64,
    pub evidence: Evidence,
    pub judgement: Judgement,
}

/// What the driver must do.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// Deploy the new version at this percentage (the old at the rest); confirm with
    /// [`Controller::deployed`].
    Deploy { new_percent: u8 },
    /// Gather both versions' figures over `[from, to)` and report [`Controller::evidence`].
    Query { from: u64, to: u64 },
    /// Write the state to the registry before doing anything else.
    Record(State),
}

/// The controller of one rollout.
#[derive(Debug, Clone)]
pub struct Controller {
    slo: Slo,
    state: State,
}

impl Controller {
    /// A new rollout: deploy the first step.
    pub fn start(slo: Slo) -> (Controller, Vec<Command>) {
        let state = State {
            step: 0,
            since: None,
            due: None,
            holds: 0,
            phase: Phase::Deploying,
            log: Vec::new(),
            deployed: Vec::new(),
        };
        let c = Controller { slo, state };
        let cmds = c.deploying();
        (c, cmds)
    }

    /// A rollout rebuilt from its record (`rollout --resume`): a deployment that was asked
    /// for and not confirmed is asked for again (deploying the same split twice is
    /// harmless); a watched step goes on watching from its recorded start.
    pub fn resume(slo: Slo, state: State) -> (Controller, Vec<Command>) {
        let c = Controller { slo, state };
        let cmds = match c.state.phase {
            Phase::Deploying | Phase::RollingBack | Phase::Aborting => c.deploying(),
            _ => Vec::new(),
        };
        (c, cmds)
    }

    pub fn state(&self) -> &State {
        &self.state
    }

    pub fn slo(&self) -> &Slo {
        &self.slo
    }

    fn percent(&self) -> u8 {
        self.slo.steps.get(self.state.step).copied().unwrap_or(100)
    }

    fn deploying(&self) -> Vec<Command> {
        let percent = match self.state.phase {
            Phase::RollingBack
            | Phase::RolledBack
            | Phase::Aborting
            | Phase::Aborted
            | Phase::Refused => 0,
            _ => self.percent(),
        };
        vec![
            Command::Record(self.state.clone()),
            Command::Deploy {
                new_percent: percent,
            },
        ]
    }

    /// The driver confirms the last deployment at `now`. At 100% the rollout is done: there
    /// is no old version left to compare with.
    pub fn deployed(&mut self, now: Millis) -> Vec<Command> {
        let back = match self.state.phase {
            Phase::RollingBack => Some(Phase::RolledBack),
            Phase::Aborting => Some(Phase::Aborted),
            Phase::Deploying => None,
            _ => return Vec::new(),
        };
        let new_percent = if back.is_some() { 0 } else { self.percent() };
        self.state.deployed.push(Deployed {
            at: now.0,
            new_percent,
        });
        if let Some(phase) = back {
            self.state.phase = phase;
            return vec![Command::Record(self.state.clone())];
        }
        if self.percent() == 100 {
            self.state.phase = Phase::Done;
        } else {
            self.state.phase = Phase::Watching;
            self.state.since = Some(now.0);
            self.state.due = Some(now.0 + self.slo.dwell_ms);
        }
        vec![Command::Record(self.state.clone())]
    }

    /// Time passed: when a judgement is due, ask for the step's window so far.
    pub fn tick(&self, now: Millis) -> Vec<Command> {
        match (self.state.phase, self.state.since, self.state.due) {
            (Phase::Watching, Some(since), Some(due)) if now.0 >= due => vec![Command::Query {
                from: since,
                to: now.0,
            }],
            _ => Vec::new(),
        }
    }

    /// The window's evidence arrived at `now`: judge, and advance, hold or roll back.
    pub fn evidence(&mut self, now: Millis, ev: Evidence) -> Vec<Command> {
        if self.state.phase != Phase::Watching {
            return Vec::new();
        }
        let mut judgement = judge(&self.slo, &ev);
        if let Judgement::Hold { reasons } = &judgement {
            if self.state.holds + 1 > self.slo.max_holds {
                let mut reasons = reasons.clone();
                reasons.push(format!(
                    "held {} times at {}%: a rollout does not stay half-deployed",
                    self.state.holds,
                    self.percent()
                ));
                judgement = Judgement::RollBack { reasons };
            }
        }
        self.state.log.push(Logged {
            step: self.percent(),
            at: now.0,
            evidence: ev,
            judgement: judgement.clone(),
        });
        match judgement {
            Judgement::Hold { .. } => {
                // Judge again after another dwell, over the step's whole window so far.
                self.state.holds += 1;
                self.state.due = Some(now.0 + self.slo.dwell_ms);
                vec![Command::Record(self.state.clone())]
            }
            Judgement::RollBack { .. } => {
                self.state.phase = Phase::RollingBack;
                self.deploying()
            }
            Judgement::Advance { .. } => {
                self.state.step = (self.state.step + 1).min(self.slo.steps.len().saturating_sub(1));
                self.state.holds = 0;
                self.state.since = None;
                self.state.due = None;
                self.state.phase = Phase::Deploying;
                self.deploying()
            }
        }
    }

    /// `rollout --abort`: the old version at 100%, recorded as an operator's abort — its
    /// own phase, never mistaken for a judgement against the new version.
    pub fn abort(&mut self) -> Vec<Command> {
        self.state.phase = Phase::Aborting;
        self.state.due = None;
        self.deploying()
    }

    /// `rollout --abort --force` when the deployment serving now is not the rollout's: the
    /// rollout is recorded as aborted and nothing is deployed.
    pub fn close_aborted(&mut self) -> Vec<Command> {
        self.state.phase = Phase::Aborted;
        self.state.due = None;
        vec![Command::Record(self.state.clone())]
    }

    pub fn finished(&self) -> bool {
        self.state.phase.ended()
    }
}

#[cfg(test)]
mod tests;
