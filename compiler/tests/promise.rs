//! The compiler's promise, as a property (issue 10): for every generated policy that
//! `check --deny-warnings` accepts, `simulate` — the edge's own engine on a virtual clock — answers every
//! request within the policy's budget under each fault class: the model hanging, failing
//! with 5xx, rate-limiting (429), resetting, answering a malformed body; the KV tiers
//! missing or stalling; and total network loss. Where the policy promises an answer
//! (`always_answer`) every answer is a disclosed fallback; where it does not, each is a
//! disclosed fallback or the 504 / 503 envelope.
//!
//! Warnings are where a promise lapses by the policy's own choice, named with their date or
//! case ([C-EXPIRY]); a test below shows the one a generated policy can carry
//! (`WARN_NO_MATCH_UNANSWERED`) is a real lapse.
//!
//! The number of policies comes from `PROPTEST_CASES` (proptest's default, 256, in the
//! normal suite; CI's long run sets thousands: `PROPTEST_CASES=5000 cargo test -p
//! understudy-compiler --test promise`).

use std::collections::BTreeMap;

use proptest::prelude::*;
use understudy_compiler::simulate::scenario::{KvSeed, ModelFault, Phase, Scenario};
use understudy_compiler::simulate::{self, Source};
use understudy_compiler::validate::load_text;
use understudy_core::catalog::Catalog;
use understudy_core::policy::{Policy, Promise, TierKind};
use understudy_core::Millis;

/// 2026-11-30T12:00:00Z: the scenario's start and the check's `now`.
const START: u64 = 1_796_040_000_000;
const REQUESTS: u64 = 24;
const QUERIES: [&str; 4] = ["headphones", "zebra", "coffee maker", "backpack"];

/// A policy to generate: the knobs that shape the timing and the cascade.
#[derive(Debug, Clone)]
struct Spec {
    deadline_ms: u64,
    attempts: u64,
    attempt_timeout_ms: u64,
    backoff_ms: u64,
    /// KV tiers before the final tier: (read timeout, keyed by the user).
    kv: Vec<(u64, bool)>,
    /// `None`: no embedded tier (best effort); `Some(true)`: keyword search.
    embedded: Option<bool>,
    no_match: &'static str,
    best_effort: bool,
    breaker: u8,
    extra_ms: u64,
    slack_ms: u64,
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        (1u64..400, 1u64..4, 1u64..300, 1u64..50),
        prop::collection::vec((1u64..120, any::<bool>()), 0..3),
        prop::option::weighted(0.8, any::<bool>()),
        // `next_tier` on a final keyword tier is warned about (and skipped below).
        prop::sample::select(vec!["curated", "empty", "curated", "empty", "next_tier"]),
        any::<bool>(),
        0u8..3,
        (0u64..200, 1u64..5),
    )
        .prop_map(
            |(
                (deadline_ms, attempts, attempt_timeout_ms, backoff_ms),
                kv,
                embedded,
                no_match,
                best_effort,
                breaker,
                (extra_ms, slack_ms),
            )| Spec {
                deadline_ms,
                attempts,
                attempt_timeout_ms,
                backoff_ms,
                kv,
                // A cascade that promises an answer ends with an embedded tier.
                embedded: if best_effort {
                    embedded
                } else {
                    embedded.or(Some(false))
                },
                no_match,
                best_effort,
                breaker,
                extra_ms,
                slack_ms,
            },
        )
}

impl Spec {
    /// The policy's text. The budget is the worst case plus slack plus `extra_ms`, so most
    /// specs pass `check`; the property only looks at those that do.
    fn toml(&self) -> String {
        let io_steps = self.kv.len() as u64;
        let worst = self.deadline_ms + self.kv.iter().map(|(t, _)| t).sum::<u64>();
        let total = (worst + self.slack_ms * io_steps + self.extra_ms).clamp(1, 60_000);
        let mut t = format!(
            r#"version = "prop"

[service]
name = "prop-svc"
route = "/v1/search"

[params.q]
source = "query"
pattern = "^[a-z ]{{1,40}}$"
max_len = 40
required = true

[params.user]
source = "token_claim"
from = "sub"
pattern = "^[a-z0-9-]{{1,32}}$"
max_len = 32
required = true
identity = true

[identity]
secret = "TOKEN_KEY"
issuer = "https://auth.example"
audience = "prop"

[budget]
total = "{total}ms"
deadline = "{}ms"
slack = "{}ms"

[origin]
url = "https://model.example/v1/search"
method = "GET"
attempt_timeout = "{}ms"
attempts = {}
backoff = {{ base = "{}ms", max = "{}ms" }}
credential_secret = "MODEL_KEY"
"#,
            self.deadline_ms,
            self.slack_ms,
            self.attempt_timeout_ms,
            self.attempts,
            self.backoff_ms,
            self.backoff_ms * 4,
        );
        t.push_str(match self.breaker {
            0 => "\n[breaker]\nmode = \"off\"\n",
            1 => "\n[breaker]\nmode = \"consecutive\"\nfailures = 3\ncooldown = \"1s\"\n",
            _ => "\n[breaker]\nmode = \"rate\"\nwindow = \"2s\"\nmin_calls = 5\nslow_call_p95 = \"100ms\"\nhold_down = \"1s\"\nprobe_min_calls = 2\nprobe_fraction = 0.5\nprobe_p95 = \"100ms\"\n",
        });
        t.push_str(&format!(
            "\n[cascade]\npromise = \"{}\"\n",
            if self.best_effort {
                "best_effort"
            } else {
                "always_answer"
            }
        ));
        for (i, (timeout, per_user)) in self.kv.iter().enumerate() {
            let key = if *per_user { "u:{user}:{q}" } else { "q:{q}" };
            t.push_str(&format!(
                "\n[[cascade.tiers]]\nname = \"kv{i}\"\nkind = \"kv\"\nbinding = \"KV{i}\"\nkey = \"{key}\"\nmax_staleness = \"1h\"\nread_timeout = \"{timeout}ms\"\n"
            ));
            // A shared tier is sometimes a published one: its seeds carry the validation.
            if !*per_user && timeout % 2 == 0 {
                t.push_str("published = true\n");
            }
        }
        match self.embedded {
            Some(true) => t.push_str(&format!(
                "\n[[cascade.tiers]]\nname = \"keyword\"\nkind = \"embedded\"\nmode = \"keyword\"\nquery = \"q\"\nlimit = 3\nno_match = \"{}\"\n",
                self.no_match
            )),
            Some(false) => t.push_str(
                "\n[[cascade.tiers]]\nname = \"curated\"\nkind = \"embedded\"\nmode = \"curated\"\nlimit = 3\n",
            ),
            None => {}
        }
        t.push_str(
            "\n[disclosure]\ncache_control = \"public, max-age=30\"\nretry_after = \"5s\"\n",
        );
        if self.embedded.is_some() {
            t.push_str("\n[catalog]\nstubs = \"catalog.json\"\ninventory = \"inventory.json\"\non_expired = \"disclose\"\n");
        }
        t
    }
}

/// The catalog and its snapshot, written next to the generated policy.
fn catalog_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let titles = [
        ("S-1", "wireless noise-cancelling headphones"),
        ("S-2", "programmable drip coffee maker"),
        ("S-3", "waterproof laptop backpack"),
        ("S-4", "backlit mechanical keyboard"),
    ];
    let items: Vec<_> = titles
        .iter()
        .map(|(sku, title)| serde_json::json!({"sku": sku, "title": title, "category": "misc"}))
        .collect();
    let skus: Vec<_> = titles
        .iter()
        .map(|(sku, _)| serde_json::json!({"sku": sku, "status": "active", "stock": 100}))
        .collect();
    std::fs::write(
        dir.path().join("catalog.json"),
        serde_json::json!({ "items": items }).to_string(),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("inventory.json"),
        serde_json::json!({"taken_at": "2026-11-30T11:00:00Z", "skus": skus}).to_string(),
    )
    .unwrap();
    dir
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    Hang,
    Status5xx,
    RateLimited,
    Reset,
    Malformed,
    KvMiss,
    KvStall,
    NetworkLoss,
}

const FAULTS: [Fault; 8] = [
    Fault::Hang,
    Fault::Status5xx,
    Fault::RateLimited,
    Fault::Reset,
    Fault::Malformed,
    Fault::KvMiss,
    Fault::KvStall,
    Fault::NetworkLoss,
];

/// The scenario of one fault class: every request meets the fault. KV holds a fresh entry
/// for every key unless the class takes it away (a miss) or makes reads hang (a stall;
/// total network loss is the origin resetting and KV reads never returning).
fn scenario(policy: &Policy, fault: Fault) -> Scenario {
    let model = match fault {
        Fault::Hang | Fault::KvMiss | Fault::KvStall => ModelFault::Hang,
        Fault::Status5xx => ModelFault::Status {
            code: 500,
            latency_ms: 3,
        },
        Fault::RateLimited => ModelFault::RateLimited {
            retry_after_s: Some(1),
            latency_ms: 3,
        },
        Fault::Reset | Fault::NetworkLoss => ModelFault::Reset,
        Fault::Malformed => ModelFault::Malformed { latency_ms: 3 },
    };
    let users = ["alice", "bob", "carol"];
    let mut params = BTreeMap::new();
    params.insert(
        "q".to_string(),
        QUERIES.iter().map(|s| s.to_string()).collect(),
    );
    params.insert(
        "user".to_string(),
        users.iter().map(|s| s.to_string()).collect(),
    );
    let mut kv = Vec::new();
    if !matches!(fault, Fault::KvMiss | Fault::NetworkLoss) {
        for tier in &policy.cascade.tiers {
            let TierKind::Kv(t) = &tier.kind else {
                continue;
            };
            for i in 0..REQUESTS as usize {
                let (q, u) = (QUERIES[i % QUERIES.len()], users[i % users.len()]);
                let key = t
                    .key
                    .render(|n| match n {
                        "q" => Some((q, false)),
                        "user" => Some((u, true)),
                        _ => None,
                    })
                    .unwrap();
                kv.push(KvSeed {
                    tier: tier.name.clone(),
                    binding: t.binding.clone(),
                    key,
                    items: vec![format!("KV-{i}")],
                    age_ms: 60_000,
                    published: t.published,
                });
            }
        }
    }
    Scenario {
        name: format!("{fault:?}"),
        description: String::new(),
        start_ms: START,
        requests: REQUESTS,
        interval_us: 25_000,
        params,
        model_latency_ms: 3,
        phases: vec![Phase {
            requests: Some((0, REQUESTS - 1)),
            time: None,
            fault: model,
            regions: Vec::new(),
        }],
        kv,
        kv_latency_ms: if matches!(fault, Fault::KvStall | Fault::NetworkLoss) {
            3_600_000
        } else {
            2
        },
        expect: None,
        fleet: None,
    }
}

fn keeps_the_promise(policy: &Policy, catalog: Option<&Catalog>) -> Result<(), TestCaseError> {
    for fault in FAULTS {
        let sc = scenario(policy, fault);
        let run = simulate::run(policy, catalog, &sc);
        prop_assert_eq!(
            run.results.len() as u64,
            REQUESTS,
            "{:?}: every request answered",
            fault
        );
        for r in &run.results {
            prop_assert!(
                r.latency_ms <= policy.budget.total_ms,
                "{:?}: request {} answered in {} ms, over the {} ms budget",
                fault,
                r.index,
                r.latency_ms,
                policy.budget.total_ms
            );
            match (&r.source, policy.cascade.promise) {
                (Source::Tier(_), _) => {
                    prop_assert_eq!(r.status, 200);
                    prop_assert!(
                        r.reason.is_some(),
                        "{:?}: a fallback names its reason",
                        fault
                    );
                }
                (Source::Error(504 | 503), Promise::BestEffort) => {
                    prop_assert!(
                        r.reason.is_some(),
                        "{:?}: the envelope names its reason",
                        fault
                    );
                }
                (other, promise) => prop_assert!(
                    false,
                    "{:?}: request {} got {:?} (status {}) under {:?}",
                    fault,
                    r.index,
                    other,
                    r.status,
                    promise
                ),
            }
        }
    }
    Ok(())
}

/// Cases: PROPTEST_CASES, else proptest's default (256). A spec `check` refuses is
/// skipped; room for that grows with the number of cases.
fn config() -> ProptestConfig {
    let c = ProptestConfig::default();
    ProptestConfig {
        max_global_rejects: c.cases.max(1024),
        ..c
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn every_accepted_policy_answers_within_its_budget_under_every_fault(spec in spec()) {
        let dir = catalog_dir();
        let path = dir.path().join("policy.toml");
        let loaded = load_text(&path, spec.toml(), Millis(START));
        // The property is about what `check --deny-warnings` accepts; most specs pass.
        prop_assume!(loaded.policy.is_some() && loaded.diagnostics.is_empty());
        let policy = loaded.policy.as_ref().unwrap();
        keeps_the_promise(policy, loaded.catalog.as_ref())?;
    }
}

/// The generator is not vacuous: most specs pass `check`, and both promises occur.
#[test]
fn most_generated_policies_pass_check() {
    use proptest::strategy::ValueTree;
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let (mut accepted, mut best_effort, mut always) = (0, 0, 0);
    let dir = catalog_dir();
    for _ in 0..200 {
        let spec = spec().new_tree(&mut runner).unwrap().current();
        let loaded = load_text(&dir.path().join("p.toml"), spec.toml(), Millis(START));
        if let (Some(p), true) = (&loaded.policy, loaded.diagnostics.is_empty()) {
            accepted += 1;
            match p.cascade.promise {
                Promise::BestEffort => best_effort += 1,
                Promise::AlwaysAnswer => always += 1,
            }
        }
    }
    assert!(
        accepted >= 120,
        "only {accepted}/200 generated policies pass check"
    );
    assert!(
        best_effort > 10 && always > 10,
        "{best_effort} best effort, {always} always answer"
    );
}

/// The property fails when the promise is broken: a policy that closes its budget exactly
/// (what `check` refuses as ERR_BUDGET_NO_SLACK) is late or unanswered under a hang.
#[test]
fn the_property_catches_a_broken_promise() {
    let dir = catalog_dir();
    let spec = Spec {
        deadline_ms: 100,
        attempts: 1,
        attempt_timeout_ms: 100,
        backoff_ms: 10,
        kv: vec![(50, false)],
        embedded: None,
        no_match: "curated",
        best_effort: true,
        breaker: 0,
        extra_ms: 0,
        slack_ms: 1,
    };
    let loaded = load_text(&dir.path().join("p.toml"), spec.toml(), Millis(START));
    assert!(loaded.policy.is_some(), "{:?}", loaded.diagnostics);
    let mut policy = loaded.policy.unwrap();
    // Take the promise away from under the checker: the final tier is gone.
    policy.cascade.promise = Promise::AlwaysAnswer;
    assert!(keeps_the_promise(&policy, None).is_err());
}

/// What `WARN_NO_MATCH_UNANSWERED` names is real: a final keyword tier that passes on when
/// nothing matches leaves "zebra" without an answer under `always_answer`.
#[test]
fn the_no_match_warning_names_a_real_lapse() {
    let dir = catalog_dir();
    let spec = Spec {
        deadline_ms: 50,
        attempts: 1,
        attempt_timeout_ms: 50,
        backoff_ms: 10,
        kv: vec![],
        embedded: Some(true),
        no_match: "next_tier",
        best_effort: false,
        breaker: 0,
        extra_ms: 10,
        slack_ms: 1,
    };
    let loaded = load_text(&dir.path().join("p.toml"), spec.toml(), Millis(START));
    let codes: Vec<&str> = loaded.diagnostics.iter().map(|d| d.code.as_str()).collect();
    assert_eq!(codes, ["WARN_NO_MATCH_UNANSWERED"]);
    let policy = loaded.policy.unwrap();
    assert!(keeps_the_promise(&policy, loaded.catalog.as_ref()).is_err());
}
