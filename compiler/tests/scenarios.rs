//! Every shipped scenario reads against a shipped policy: a scenario a user is pointed at
//! (docs/scenarios.md, docs/fleet.md) never fails on its own text.

use std::path::Path;

use understudy_compiler::load::load_policy;
use understudy_compiler::simulate::scenario;
use understudy_core::Millis;

#[test]
fn every_shipped_scenario_reads_against_a_shipped_policy() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    // The scenarios start on 2026-11-30; the policies' snapshots are read as of then.
    let now = Millis(1_796_040_000_000);
    let policies: Vec<_> = std::fs::read_dir(root.join("policies"))
        .expect("policies/")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .map(|p| {
            let loaded = load_policy(&p, now);
            loaded
                .policy
                .unwrap_or_else(|| panic!("{} does not load", p.display()))
        })
        .collect();
    assert!(policies.len() >= 4);
    let mut seen = 0;
    for entry in std::fs::read_dir(root.join("scenarios")).expect("scenarios/") {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        // The events drill's scenarios (an `[events]` table) are read by `drill --events`.
        if path.extension().is_none_or(|x| x != "toml") || text.contains("\n[events]") {
            continue;
        }
        seen += 1;
        let errors: Vec<String> = policies
            .iter()
            .map(|p| scenario::load(&path, p))
            .filter_map(Result::err)
            .collect();
        assert!(
            errors.len() < policies.len(),
            "{} reads against no shipped policy: {errors:#?}",
            path.display()
        );
    }
    assert!(seen >= 10, "{seen} scenarios");
}
