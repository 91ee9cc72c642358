//! [R-GUARD] The replay pre-flight (`releases rollout ID --replay FILE…`, `releases diff A
//! B --replay FILE…`): before a single user meets the new release, the production logs are
//! replayed through the old release's policy and the new one's (docs/replay.md), and the two
//! are judged as a rollout step would judge them — the degraded share, the no-tier 5xx
//! share and the p95, with the rollout's own margins and evidence rule ([`super::judge`]).
//!
//! Both replays meet the same world, in both of its cases (what the logs cannot tell: a
//! call they saw cut, waited for longer). The new release is **worse** when the judgement
//! rolls it back in both cases — the rollout refuses to start; **maybe worse** when in one
//! of them — the rollout starts, and says so; otherwise not worse.

use serde::{Deserialize, Serialize};
use understudy_core::bake::Bake;

use super::{judge, Evidence, Figures, Histogram, Judgement, Slo};
use crate::replay::figures::Figures as Replayed;
use crate::replay::{self, Logs, Subject};

/// What the replay found of the new release against the old.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Rolled back in both cases: the rollout is refused (unless `--force`).
    Worse,
    /// Rolled back in one case only: the logs cannot tell.
    MaybeWorse,
    NotWorse,
}

impl Verdict {
    pub fn word(self) -> &'static str {
        match self {
            Verdict::Worse => "worse",
            Verdict::MaybeWorse => "maybe worse (the logs cannot tell)",
            Verdict::NotWorse => "not worse",
        }
    }
}

/// One case's judgement, with its evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Case {
    pub case: String,
    pub old: Figures,
    pub new: Figures,
    pub judgement: Judgement,
}

/// The pre-flight's evidence, as printed and recorded in the rollout's record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplayCheck {
    pub logs: Vec<String>,
    pub service: String,
    /// The release whose lines were replayed.
    pub logged_release: String,
    pub requests: u64,
    pub verdict: Verdict,
    pub cases: Vec<Case>,
    /// The rollout started although the verdict was `worse` (`--force`).
    #[serde(default)]
    pub forced: bool,
}

/// A replayed column's figures as a rollout judges them.
fn figures(f: &Replayed) -> Figures {
    Figures {
        answers: f.answers,
        degraded: f.degraded + f.unavailable,
        unavailable: f.unavailable,
        latency: Histogram::of(f.latencies_ms.iter().map(|ms| *ms as f64)),
    }
}

/// Replays `logs` through `old`'s and `new`'s policies (virtual time from the first logged
/// arrival) and judges them with `slo`.
pub fn check(logs: &Logs, old: &Bake, new: &Bake, slo: &Slo) -> Result<ReplayCheck, String> {
    fn subject(b: &Bake) -> Subject<'_> {
        Subject {
            name: b.release_id.clone(),
            policy: &b.policy,
            catalog: b.catalog.as_ref(),
        }
    }
    let window = replay::default_window_ms(logs.span_ms);
    let (o, n) = (subject(old), subject(new));
    let r = replay::replay(logs, &o, &n, logs.first_ms, window, 1.0)?;
    let mut cases = Vec::new();
    for (case, old_f, new_f) in [
        ("best", &r.logged_policy.best, &r.candidate.best),
        ("worst", &r.logged_policy.worst, &r.candidate.worst),
    ] {
        let ev = Evidence {
            from: logs.first_ms,
            to: logs.first_ms + logs.span_ms,
            old: figures(old_f),
            new: figures(new_f),
        };
        cases.push(Case {
            case: case.into(),
            judgement: judge(slo, &ev),
            old: ev.old,
            new: ev.new,
        });
    }
    let back = cases
        .iter()
        .filter(|c| matches!(c.judgement, Judgement::RollBack { .. }))
        .count();
    let verdict = match back {
        0 => Verdict::NotWorse,
        n if n == cases.len() => Verdict::Worse,
        _ => Verdict::MaybeWorse,
    };
    Ok(ReplayCheck {
        logs: logs
            .files
            .iter()
            .map(|f| f.path.display().to_string())
            .collect(),
        service: logs.service.clone(),
        logged_release: logs.release.clone(),
        requests: logs.lines.len() as u64,
        verdict,
        cases,
        forced: false,
    })
}

/// The evidence, one line each.
pub fn human(c: &ReplayCheck, old: &str, new: &str) -> String {
    let mut out = format!(
        "replay pre-flight: {} requests of {} (release {}) from {} replayed through {old} and {new}: {new} is {}\n",
        c.requests,
        c.service,
        c.logged_release,
        c.logs.join(", "),
        c.verdict.word()
    );
    for case in &c.cases {
        let (word, reasons) = match &case.judgement {
            Judgement::Advance { reasons } => ("not worse", reasons),
            Judgement::Hold { reasons } => ("unsettled", reasons),
            Judgement::RollBack { reasons } => ("worse", reasons),
        };
        out.push_str(&format!("  {} case: {word}\n", case.case));
        for r in reasons {
            out.push_str(&format!("    {r}\n"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::simulate::{self, scenario};
    use understudy_core::Millis;

    const NOON: u64 = 1_796_040_000_000;

    fn bake(policy: understudy_core::policy::Policy, id: &str) -> Bake {
        let loaded = crate::load::load_policy(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../policies/semantic-search.toml"),
            Millis(NOON),
        );
        Bake {
            release_id: id.into(),
            policy_hash: String::new(),
            catalog_hash: String::new(),
            validated_at_ms: NOON,
            compiler_version: String::new(),
            policy,
            catalog: loaded.catalog,
        }
    }

    /// Seed 002's incident, 30 requests a second for 60 s (enough answers to judge), logged
    /// under the shipped policy.
    fn logs() -> (tempfile::TempDir, Logs, understudy_core::policy::Policy) {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../policies/semantic-search.toml");
        let policy = crate::load::load_policy(&path, Millis(NOON))
            .policy
            .expect("policy");
        let raw: scenario::RawScenario = toml::from_str(
            "name = \"s\"\nstart = \"2026-11-30T12:00:00Z\"\nrate = 30\nrequests = 1800\n[params]\nq = [\"headphones\", \"keyboard\", \"backpack\"]\n[model]\nlatency = \"150ms\"\n[[model.phase]]\nfrom = \"20s\"\nto = \"40s\"\nfault = \"down\"\n",
        )
        .expect("scenario");
        let sc = scenario::build(raw, &policy).expect("valid");
        let run = simulate::run_logged(&policy, None, &sc);
        let dir = tempfile::tempdir().expect("dir");
        let file = dir.path().join("edge.ndjson");
        std::fs::write(&file, run.logs.join("\n")).expect("written");
        let logs = replay::logs(&[file], &replay::Select::default()).expect("logs");
        (dir, logs, policy)
    }

    #[test]
    fn a_release_without_its_final_net_replays_worse_and_the_same_policy_does_not() {
        let (_dir, logs, policy) = logs();
        let slo = Slo {
            min_answers: 300,
            ..Slo::default()
        };
        let old = bake(policy.clone(), "r-old");
        let same = check(&logs, &old, &bake(policy.clone(), "r-same"), &slo).expect("replayed");
        assert_eq!(
            same.verdict,
            Verdict::NotWorse,
            "{}",
            human(&same, "r-old", "r-same")
        );
        // The keyword tier (the final net) removed: during the outage every request the
        // query cache misses gets a no-tier 503.
        let mut worse = policy.clone();
        worse.cascade.tiers.retain(|t| t.name != "keyword");
        worse.cascade.promise = understudy_core::policy::Promise::BestEffort;
        let c = check(&logs, &old, &bake(worse, "r-worse"), &slo).expect("replayed");
        assert_eq!(
            c.verdict,
            Verdict::Worse,
            "{}",
            human(&c, "r-old", "r-worse")
        );
        let text = human(&c, "r-old", "r-worse");
        assert!(text.contains("no-tier 5xx share: new"), "{text}");
    }
}
