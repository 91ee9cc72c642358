//! The replay against logs of known provenance: `simulate`'s own run of a seed-000-like
//! incident (the engine's log lines, as a Worker prints them), replayed through the same
//! policy and through changed ones. In virtual time the logs have no host in them, so the
//! logged policy's replay must give the logged figures back almost exactly; the drills
//! against workerd (tests/replay.test.mjs) prove the same against the real Worker.

use std::path::{Path, PathBuf};

use understudy_core::catalog::Catalog;
use understudy_core::policy::Policy;
use understudy_core::Millis;

use super::*;
use crate::simulate::{self, scale::scale_policy, scenario};

/// 2026-11-30T12:00:00Z: the sample catalog is fresh then.
const NOON: u64 = 1_796_040_000_000;
/// The incident's clock at a tenth of seed 000's, as the suite's drills play it.
const SCALE: f64 = 0.1;

fn recommendations() -> (Policy, Option<Catalog>) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../policies/recommendations.toml");
    let loaded = crate::load::load_policy(&path, Millis(NOON));
    let policy = loaded.policy.clone().expect("the shipped policy loads");
    (scale_policy(&policy, SCALE), loaded.catalog.clone())
}

/// Seed 000's recovery incident at a tenth of its length: 100 req/s for 20 s, the model
/// 500 ms slow from 1 s to 9 s, some users and categories cached.
fn incident(policy: &Policy) -> scenario::Scenario {
    let users: Vec<String> = (0..134).map(|u| format!("\"u-{u:03}\"")).collect();
    let mut text = format!(
        "name = \"seed-000-tenth\"\nstart = \"2026-11-30T12:00:00Z\"\nrate = 100\nrequests = 2000\n\
         [params]\nuser_id = [{}]\ncategory_id = [\"audio\", \"computing\", \"kitchen\", \"bags\", \"all\"]\n\
         [model]\nlatency = \"25ms\"\n[[model.phase]]\nfrom = \"1s\"\nto = \"9s\"\nfault = \"slow\"\nlatency = \"500ms\"\n",
        users.join(", ")
    );
    for u in 0..20 {
        text.push_str(&format!(
            "[[kv]]\ntier = \"user\"\nparams = {{ user_id = \"u-{u:03}\" }}\nitems = [\"SKU-1001\"]\nage = \"1h\"\n"
        ));
    }
    for c in ["audio", "computing", "kitchen", "bags"] {
        text.push_str(&format!(
            "[[kv]]\ntier = \"category\"\nparams = {{ category_id = \"{c}\" }}\nitems = [\"SKU-1001\"]\nage = \"2h\"\n"
        ));
    }
    let raw: scenario::RawScenario = toml::from_str(&text).expect("scenario");
    scenario::build(raw, policy).expect("valid scenario")
}

/// The incident's log lines in a file, and the directory holding it.
fn logged(policy: &Policy, catalog: Option<&Catalog>) -> (tempfile::TempDir, PathBuf) {
    let run = simulate::run_logged(policy, catalog, &incident(policy));
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("edge.ndjson");
    std::fs::write(&path, run.logs.join("\n") + "\n").expect("written");
    (dir, path)
}

fn replay_with(candidate: &Policy) -> Replay {
    let (policy, catalog) = recommendations();
    let (_dir, path) = logged(&policy, catalog.as_ref());
    let logs = logs(&[path], &Select::default()).expect("logs");
    let s = |name: &str, p| Subject {
        name: name.into(),
        policy: p,
        catalog: catalog.as_ref(),
    };
    replay(
        &logs,
        &s("logged", &policy),
        &s("candidate", candidate),
        NOON,
        1_000,
        1.0,
    )
    .expect("replayed")
}

#[test]
fn the_logged_policy_replayed_gives_the_logged_figures_back() {
    let (policy, _) = recommendations();
    let r = replay_with(&policy);
    let (a, b) = (&r.as_logged, &r.logged_policy.best);
    assert_eq!(
        r.logged_policy.best, r.logged_policy.worst,
        "nothing unknowable"
    );
    assert!(
        !r.logged_policy.unknowable.any(),
        "{:?}",
        r.logged_policy.unknowable
    );
    assert_eq!(r.incidents.len(), 1, "{:?}", r.incidents);
    assert_eq!(r.logged_policy.lost, 0);
    // No host in virtual time: every figure, window and instant comes back exactly.
    assert_eq!(a, b);
    assert!(
        a.incidents[0].recovered_at_ms.is_some(),
        "{:?}",
        a.incidents
    );
}

#[test]
fn a_shorter_deadline_is_known_from_the_logs_and_a_longer_one_is_a_range() {
    let (policy, _) = recommendations();
    let mut shorter = policy.clone();
    shorter.origin.attempt_timeout_ms = 30;
    shorter.budget.deadline_ms = 30;
    let r = replay_with(&shorter);
    assert!(
        !r.candidate.unknowable.any(),
        "{:?}",
        r.candidate.unknowable
    );
    assert_eq!(r.candidate.best, r.candidate.worst);
    // The model answers in 25 ms when healthy: a 30 ms deadline keeps it live.
    assert!(r.candidate.best.live * 10 >= r.as_logged.live * 9);

    let mut longer = policy.clone();
    longer.budget.total_ms = 120;
    longer.budget.deadline_ms = 100;
    longer.origin.attempt_timeout_ms = 100;
    let r = replay_with(&longer);
    assert!(
        r.candidate.unknowable.calls_past_censoring > 0,
        "{:?}",
        r.candidate.unknowable
    );
    let (best, worst) = (&r.candidate.best, &r.candidate.worst);
    assert!(
        best.live > worst.live,
        "best {} live, worst {}",
        best.live,
        worst.live
    );
    // The real world — the model 500 ms slow — is the worst case here: nothing answers
    // within 100 ms. The worst case degrades as the logged policy did.
    assert!(
        worst.live.abs_diff(r.as_logged.live) * 20 <= r.as_logged.live,
        "{} vs {}",
        worst.live,
        r.as_logged.live
    );
}
