//! [B-BAKE] [B-RELEASE] `understudy bake` and `understudy releases`, through the binary, on
//! a small policy and a stand-in edge module (so no wasm toolchain is needed; the real edge
//! is exercised by tests/releases.test.mjs). Guards issue 5: deterministic re-bakes,
//! rollback that keeps the current catalog, and every refusal leaving ACTIVE unchanged.

mod common;

use std::path::Path;

use common::*;
use understudy_compiler::dist::edge::MODULE;

/// [B-BAKE] Same inputs, byte-identical module; and a re-bake of a build output gives the
/// very module a full `understudy build` of the same policy and catalog gives.
#[test]
fn rebaking_twice_gives_byte_identical_modules_equal_to_a_full_build() {
    let env = Env::new("determinism");
    let p = env.policy_dir("v1", "v1", "800ms", &["SKU-1", "SKU-2"], DAY1);
    env.ok(&[
        "build",
        p.to_str().unwrap(),
        "--edge",
        "edge",
        "--out",
        "dist1",
        "--now",
        DAY1_NOON,
    ]);
    env.write("new/catalog.json", &catalog(&["SKU-2", "SKU-3"]));
    env.write("new/inventory.json", &inventory(DAY2, &["SKU-2", "SKU-3"]));
    for out in ["a", "b"] {
        env.ok(&[
            "bake",
            "--from",
            "dist1",
            "--catalog",
            "new/catalog.json",
            "--inventory",
            "new/inventory.json",
            "--out",
            out,
            "--now",
            DAY2_NOON,
        ]);
    }
    let (a, b) = (
        read(&env.p("a").join(MODULE)),
        read(&env.p("b").join(MODULE)),
    );
    assert_eq!(a, b, "two re-bakes of the same inputs differ");
    for f in [
        "manifest.json",
        "wrangler.toml",
        "entry.mjs",
        "bake.mjs",
        "index.js",
    ] {
        assert_eq!(
            read(&env.p("a").join(f)),
            read(&env.p("b").join(f)),
            "{f} differs"
        );
    }
    // The same policy built from scratch with the new catalog in place.
    let q = env.policy_dir("v1b", "v1", "800ms", &["SKU-2", "SKU-3"], DAY2);
    env.ok(&[
        "build",
        q.to_str().unwrap(),
        "--edge",
        "edge",
        "--out",
        "full",
        "--now",
        DAY2_NOON,
    ]);
    assert_eq!(
        a,
        read(&env.p("full").join(MODULE)),
        "re-bake and full build differ"
    );

    // The same through two registries.
    for reg in ["r1", "r2"] {
        env.ok(&[
            "releases",
            "add",
            p.to_str().unwrap(),
            "--registry",
            reg,
            "--edge",
            "edge",
            "--now",
            DAY1_NOON,
            "--promote",
        ]);
        env.ok(&[
            "bake",
            "--registry",
            reg,
            "--catalog",
            "new/catalog.json",
            "--inventory",
            "new/inventory.json",
            "--now",
            DAY2_NOON,
            "--promote",
        ]);
    }
    let id = std::fs::read_to_string(env.p("r1/ACTIVE")).unwrap();
    assert_eq!(id, std::fs::read_to_string(env.p("r2/ACTIVE")).unwrap());
    let m = |r: &str| read(&env.p(&format!("{r}/releases/{}/{MODULE}", id.trim())));
    assert_eq!(m("r1"), m("r2"));
    assert_eq!(m("r1"), a);
}

/// [C-STUBS] through `bake`: every offending SKU listed, exit 1, nothing written.
#[test]
fn a_rebake_with_unvalidated_skus_lists_every_one_and_writes_nothing() {
    let env = Env::new("offending");
    let p = env.policy_dir("v1", "v1", "800ms", &["SKU-1", "SKU-2"], DAY1);
    env.ok(&[
        "build",
        p.to_str().unwrap(),
        "--edge",
        "edge",
        "--out",
        "dist1",
        "--now",
        DAY1_NOON,
    ]);
    env.write(
        "new/catalog.json",
        &catalog(&["SKU-1", "SKU-2", "SKU-3", "SKU-4"]),
    );
    let inv = inventory(DAY2, &["SKU-1", "SKU-2", "SKU-3"])
        .replacen("\"stock\": 120", "\"stock\": 7", 1)
        .replacen(
            "\"status\": \"active\", \"stock\": 120}",
            "\"status\": \"discontinued\", \"stock\": 120}",
            1,
        );
    env.write("new/inventory.json", &inv);
    let r = env.run(&[
        "bake",
        "--from",
        "dist1",
        "--catalog",
        "new/catalog.json",
        "--inventory",
        "new/inventory.json",
        "--out",
        "out",
        "--now",
        DAY2_NOON,
    ]);
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    for needle in [
        "ERR_UNTESTED_COMPENSATION_REJECTED",
        "SKU-1: stock 7",
        "SKU-2: not active",
        "SKU-4: missing from the inventory snapshot",
        "nothing was baked",
    ] {
        assert!(
            r.stderr.contains(needle),
            "missing `{needle}` in:\n{}",
            r.stderr
        );
    }
    assert!(!env.p("out").exists());
}

/// [B-RELEASE] The rolled-back release serves the old policy with the current catalog.
#[test]
fn rollback_keeps_the_current_catalog() {
    let env = Env::new("rollback");
    let (_v1, current) = env.two_policies();
    let cur = env.bake_of(&current);
    assert_eq!(cur.policy.version, "v2");
    let r = env.ok(&[
        "releases",
        "rollback",
        "--registry",
        "reg",
        "--now",
        DAY2_NOON,
    ]);
    let rolled = env.active();
    assert_ne!(rolled, current);
    assert!(
        r.stdout.contains("with the current catalog"),
        "{}",
        r.stdout
    );
    let bake = env.bake_of(&rolled);
    assert_eq!(bake.policy.version, "v1", "the old policy");
    assert_eq!(bake.policy.budget.deadline_ms, 800);
    assert_eq!(bake.catalog_hash, cur.catalog_hash, "the current catalog");
    let skus: Vec<_> = bake
        .catalog
        .unwrap()
        .items
        .into_iter()
        .map(|i| i.sku)
        .collect();
    assert_eq!(skus, ["SKU-2", "SKU-3", "SKU-4", "SKU-9"]);
    assert_eq!(bake.release_id, rolled);
    let rec: serde_json::Value = serde_json::from_slice(&read(
        &env.p(&format!("reg/releases/{rolled}/release.json")),
    ))
    .unwrap();
    assert_eq!(rec["kind"], "rollback");
    assert_eq!(rec["parent"], current.as_str());
    // It is a deployable release like any other, and the diff says what changed.
    let d = env.ok(&["releases", "diff", &current, &rolled, "--registry", "reg"]);
    assert!(
        d.stdout.contains("budget.deadline: 700ms → 800ms"),
        "{}",
        d.stdout
    );
    assert!(d.stdout.contains("catalog: unchanged"), "{}", d.stdout);
    env.ok(&["releases", "verify", "--registry", "reg"]);
}

#[test]
fn rollback_to_an_expired_catalog_is_refused_unless_forced() {
    let env = Env::new("expired");
    let (v1, current) = env.two_policies();
    // Day 3: the current catalog (day 2's snapshot) is past the 24 h ceiling.
    let r = env.run(&[
        "releases",
        "rollback",
        "--registry",
        "reg",
        "--now",
        DAY3_NOON,
    ]);
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains("refusing to roll back") && r.stderr.contains("past the 1d ceiling"),
        "{}",
        r.stderr
    );
    assert_eq!(env.active(), current, "ACTIVE unchanged");
    // The target as it was: its own catalog is older still.
    let r = env.run(&[
        "releases",
        "rollback",
        "--registry",
        "reg",
        "--to",
        &v1,
        "--with-its-catalog",
        "--now",
        DAY2_NOON,
    ]);
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains(&format!("release {v1}: its catalog")),
        "{}",
        r.stderr
    );
    assert_eq!(env.active(), current);
    // Forced: validated as of the snapshot, so the edge sees its true age.
    let r = env.ok(&[
        "releases",
        "rollback",
        "--registry",
        "reg",
        "--now",
        DAY3_NOON,
        "--force",
    ]);
    let rolled = env.active();
    assert_ne!(rolled, current, "{}", r.stdout);
    let bake = env.bake_of(&rolled);
    assert_eq!(bake.policy.version, "v1");
    assert_eq!(bake.validated_at_ms, bake.catalog.unwrap().snapshot_at_ms);
    let list = env.ok(&["releases", "list", "--registry", "reg", "--now", DAY3_NOON]);
    assert!(
        list.stdout.contains(&format!("* {rolled}")),
        "{}",
        list.stdout
    );
    assert!(list.stdout.contains("STALE"), "{}", list.stdout);
}

#[test]
fn a_tampered_release_is_refused_by_name_and_active_is_unchanged() {
    let env = Env::new("tamper");
    let (v1, current) = env.two_policies();
    let cat = env.p(&format!("reg/releases/{v1}/sources/catalog.json"));
    let mut bytes = read(&cat);
    bytes.extend_from_slice(b" ");
    std::fs::write(&cat, bytes).unwrap();
    let r = env.run(&[
        "releases",
        "promote",
        &v1,
        "--registry",
        "reg",
        "--now",
        DAY1_NOON,
    ]);
    assert_eq!(r.code, 2, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains("sources/catalog.json") && r.stderr.contains("tampered"),
        "{}",
        r.stderr
    );
    assert_eq!(env.active(), current);
    let r = env.run(&[
        "releases",
        "rollback",
        "--registry",
        "reg",
        "--to",
        &v1,
        "--now",
        DAY2_NOON,
    ]);
    assert_eq!(r.code, 2, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(env.active(), current);
    let v = env.run(&["releases", "verify", "--registry", "reg"]);
    assert_eq!(v.code, 2);
    assert!(v.stdout.contains(&format!("DAMAGED  {v1}")), "{}", v.stdout);

    // A flipped byte in the active module, and a file added to a release.
    let wasm = env.p(&format!("reg/releases/{current}/{MODULE}"));
    let mut m = read(&wasm);
    let last = m.len() - 1;
    m[last] ^= 1;
    std::fs::write(&wasm, m).unwrap();
    let r = env.run(&[
        "releases",
        "rollback",
        "--registry",
        "reg",
        "--now",
        DAY2_NOON,
    ]);
    assert_eq!(r.code, 2, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains(MODULE) && r.stderr.contains("SHA-256"),
        "{}",
        r.stderr
    );
    assert_eq!(env.active(), current);
    let other = env
        .releases()
        .into_iter()
        .find(|i| *i != v1 && *i != current)
        .unwrap();
    env.write(&format!("reg/releases/{other}/extra.js"), "evil()");
    let r = env.run(&[
        "releases",
        "promote",
        &other,
        "--registry",
        "reg",
        "--now",
        DAY2_NOON,
    ]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("extra.js") && r.stderr.contains("not part of the release"),
        "{}",
        r.stderr
    );
    assert_eq!(env.active(), current);
}

#[test]
fn an_unknown_release_id_is_an_error_naming_the_registry() {
    let env = Env::new("unknown");
    let (_, current) = env.two_policies();
    for args in [
        vec!["releases", "promote", "r-000000000000", "--registry", "reg"],
        vec![
            "releases",
            "rollback",
            "--to",
            "r-000000000000",
            "--registry",
            "reg",
        ],
        vec![
            "releases",
            "diff",
            "r-000000000000",
            current.as_str(),
            "--registry",
            "reg",
        ],
        vec![
            "bake",
            "--registry",
            "reg",
            "--from",
            "r-000000000000",
            "--catalog",
            "day2/catalog.json",
            "--inventory",
            "day2/inventory.json",
        ],
    ] {
        let r = env.run(&args);
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
        assert!(
            r.stderr
                .contains("no release `r-000000000000` in the registry reg"),
            "{}",
            r.stderr
        );
        assert_eq!(env.active(), current);
    }
    let r = env.run(&["releases", "list", "--registry", "nowhere"]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("nowhere is not a release registry"),
        "{}",
        r.stderr
    );
}

/// Bad catalog files: each a clear error naming the file, exit 1, no new release, ACTIVE
/// unchanged.
#[test]
fn malformed_truncated_duplicated_or_misencoded_catalogs_leave_active_unchanged() {
    let env = Env::new("badcat");
    let (_, current) = env.two_policies();
    let before = env.releases();
    let good_inv = inventory(DAY2, &["SKU-2", "SKU-3"]);
    let full = catalog(&["SKU-2", "SKU-3"]);
    let utf16: Vec<u8> = full.encode_utf16().flat_map(u16::to_le_bytes).collect();
    let cases: Vec<(&str, Vec<u8>, Vec<u8>, &str)> = vec![
        (
            "malformed",
            b"{\"items\": [ {\"sku\": \"SKU-2\", }]}".to_vec(),
            good_inv.clone().into_bytes(),
            "ERR_CATALOG_MALFORMED",
        ),
        (
            "truncated",
            full.as_bytes()[..full.len() / 2].to_vec(),
            good_inv.clone().into_bytes(),
            "ERR_CATALOG_MALFORMED",
        ),
        (
            "duplicate",
            catalog(&["SKU-2", "SKU-3", "SKU-2"]).into_bytes(),
            good_inv.clone().into_bytes(),
            "appears twice",
        ),
        (
            "dup-inventory",
            full.clone().into_bytes(),
            inventory(DAY2, &["SKU-2", "SKU-3", "SKU-3"]).into_bytes(),
            "more than once",
        ),
        (
            "utf16",
            utf16,
            good_inv.clone().into_bytes(),
            "probably UTF-16",
        ),
        (
            "utf16-bom",
            [
                &[0xff, 0xfe][..],
                &full
                    .encode_utf16()
                    .flat_map(u16::to_le_bytes)
                    .collect::<Vec<u8>>(),
            ]
            .concat(),
            good_inv.clone().into_bytes(),
            "is UTF-16",
        ),
        (
            "latin1",
            full.replace("headphones", "caf\u{e9}")
                .replace('\u{e9}', "\u{1}")
                .into_bytes()
                .into_iter()
                .map(|b| if b == 1 { 0xe9 } else { b })
                .collect(),
            good_inv.clone().into_bytes(),
            "not UTF-8",
        ),
        (
            "truncated-inventory",
            full.clone().into_bytes(),
            good_inv.as_bytes()[..20].to_vec(),
            "ERR_CATALOG_MALFORMED",
        ),
    ];
    for (name, cat, inv, needle) in cases {
        let c = env.p(&format!("{name}/catalog.json"));
        let i = env.p(&format!("{name}/inventory.json"));
        std::fs::create_dir_all(c.parent().unwrap()).unwrap();
        std::fs::write(&c, cat).unwrap();
        std::fs::write(&i, inv).unwrap();
        let r = env.run(&[
            "bake",
            "--registry",
            "reg",
            "--catalog",
            c.to_str().unwrap(),
            "--inventory",
            i.to_str().unwrap(),
            "--now",
            DAY2_NOON,
            "--promote",
        ]);
        assert_eq!(r.code, 1, "{name}: {}\n{}", r.stdout, r.stderr);
        assert!(
            r.stderr.contains(needle),
            "{name}: missing `{needle}`:\n{}",
            r.stderr
        );
        assert!(
            r.stderr.contains(&format!("{name}/")),
            "{name}: the file is named:\n{}",
            r.stderr
        );
        assert_eq!(env.active(), current, "{name}");
        assert_eq!(env.releases(), before, "{name}: no release written");
    }
}

/// Issue 12: the limit is the raw module size, the platform's 64 MiB by default; sizes
/// read as `1.5MiB` / `512KiB` / bytes; a limit above the platform's is a usage error with
/// its figure; the gzip budget is opt-in.
#[test]
fn a_module_over_the_size_limit_is_refused_with_a_diagnostic() {
    let env = Env::new("size");
    let p = env.policy_dir("v1", "v1", "800ms", &["SKU-1", "SKU-2"], DAY1);
    let add = |extra: &[&str]| {
        let mut args = vec![
            "releases",
            "add",
            p.to_str().unwrap(),
            "--registry",
            "reg",
            "--edge",
            "edge",
            "--now",
            DAY1_NOON,
        ];
        args.extend_from_slice(extra);
        env.run(&args)
    };
    let r = add(&["--size-limit", "100"]);
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains("ERR_MODULE_TOO_LARGE") && r.stderr.contains("over the 100 B limit"),
        "{}",
        r.stderr
    );
    assert!(!env.p("reg/ACTIVE").exists());
    let r = add(&["--size-limit", "65MiB"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("above the platform's limit of 64.00 MiB")
            && r.stderr.contains("September 2026"),
        "{}",
        r.stderr
    );
    let r = add(&["--gzip-limit", "10B"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("--gzip-limit"), "{}", r.stderr);
    let ok = add(&["--size-limit", "1.5MiB", "--gzip-limit", "512KiB"]);
    assert_eq!(ok.code, 0, "{}", ok.stderr);
    assert!(ok.stdout.contains("gzipped"), "{}", ok.stdout);
}

/// Each release directory deploys as it is, with the release ID as the version tag, and
/// keeps its sources in a shape `understudy check` accepts.
#[test]
fn a_release_directory_is_deployable_and_keeps_its_sources() {
    let env = Env::new("layout");
    let p = env.policy_dir("v1", "v1", "800ms", &["SKU-1", "SKU-2"], DAY1);
    env.ok(&[
        "releases",
        "add",
        p.to_str().unwrap(),
        "--registry",
        "reg",
        "--edge",
        "edge",
        "--now",
        DAY1_NOON,
        "--promote",
    ]);
    let id = env.active();
    let dir = env.p(&format!("reg/releases/{id}"));
    for f in [
        "wrangler.toml",
        "entry.mjs",
        "bake.mjs",
        "index.js",
        MODULE,
        "manifest.json",
        "release.json",
        "deploy.sh",
        "sources/policy.toml",
        "sources/catalog.json",
        "sources/inventory.json",
    ] {
        assert!(dir.join(f).is_file(), "{f} missing");
    }
    let deploy = String::from_utf8(read(&dir.join("deploy.sh"))).unwrap();
    assert!(
        deploy.contains(&format!(
            "deploy --tag {id} --message \"understudy release {id}"
        )),
        "{deploy}"
    );
    let manifest: serde_json::Value =
        serde_json::from_slice(&read(&dir.join("manifest.json"))).unwrap();
    assert_eq!(manifest["release_id"], id.as_str());
    env.ok(&[
        "check",
        dir.join("sources/policy.toml").to_str().unwrap(),
        "--now",
        DAY1_NOON,
    ]);
    // Adding the same inputs again keeps the existing, immutable release.
    let again = env.ok(&[
        "releases",
        "add",
        p.to_str().unwrap(),
        "--registry",
        "reg",
        "--edge",
        "edge",
        "--now",
        DAY1_NOON,
    ]);
    assert!(again.stdout.contains("kept existing"), "{}", again.stdout);
    // A lock file left by a writer that died (a bare pid, as older versions wrote) no longer
    // blocks: it is taken over with a message (issue 12; tests/registry_crash.rs has more).
    env.write("reg/.lock", "12345\n");
    let r = env.run(&[
        "releases",
        "promote",
        &id,
        "--registry",
        "reg",
        "--now",
        DAY1_NOON,
    ]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains("took over the lock") && r.stderr.contains("12345"),
        "{}",
        r.stderr
    );
    assert!(!env.p("reg/.lock").exists());
}

/// A target policy with stricter catalog rules refuses the current catalog: the rollback
/// fails with the [C-STUBS] diagnostics instead of serving stubs its own policy rejects.
#[test]
fn rollback_to_a_stricter_policy_refuses_a_catalog_it_would_reject() {
    let env = Env::new("stricter");
    let skus = ["SKU-1", "SKU-2"];
    env.write("v1/catalog.json", &catalog(&skus));
    env.write("v1/inventory.json", &inventory(DAY2, &skus));
    let strict = policy("v1", "800ms").replace("min_stock = 50", "min_stock = 100");
    env.write("v1/policy.toml", &strict);
    env.ok(&[
        "releases",
        "add",
        "v1/policy.toml",
        "--registry",
        "reg",
        "--edge",
        "edge",
        "--now",
        DAY2_NOON,
        "--promote",
    ]);
    let v2 = env.policy_dir("v2", "v2", "700ms", &skus, DAY2);
    env.ok(&[
        "releases",
        "add",
        v2.to_str().unwrap(),
        "--registry",
        "reg",
        "--edge",
        "edge",
        "--now",
        DAY2_NOON,
        "--promote",
    ]);
    env.write("low/catalog.json", &catalog(&skus));
    env.write(
        "low/inventory.json",
        &inventory(DAY2, &skus).replacen("\"stock\": 120", "\"stock\": 60", 1),
    );
    env.ok(&[
        "bake",
        "--registry",
        "reg",
        "--catalog",
        "low/catalog.json",
        "--inventory",
        "low/inventory.json",
        "--now",
        DAY2_NOON,
        "--promote",
    ]);
    let current = env.active();
    let count = env.releases().len();
    let r = env.run(&[
        "releases",
        "rollback",
        "--registry",
        "reg",
        "--now",
        DAY2_NOON,
    ]);
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("SKU-1: stock 60 ≤ 100"), "{}", r.stderr);
    assert!(
        r.stderr.contains("does not accept the current catalog"),
        "{}",
        r.stderr
    );
    assert_eq!(env.active(), current);
    assert_eq!(env.releases().len(), count);
}

/// Writes go through temporary files and directories renamed into place: none is left,
/// and the lock is released.
#[test]
fn no_temporary_file_or_lock_is_left_behind() {
    let env = Env::new("tmpfiles");
    env.two_policies();
    env.ok(&[
        "releases",
        "rollback",
        "--registry",
        "reg",
        "--now",
        DAY2_NOON,
    ]);
    let _ = env.run(&[
        "releases",
        "rollback",
        "--registry",
        "reg",
        "--now",
        DAY3_NOON,
    ]);
    fn walk(dir: &Path, out: &mut Vec<String>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            if name.contains(".tmp") || name == ".lock" {
                out.push(p.display().to_string());
            }
            if p.is_dir() {
                walk(&p, out);
            }
        }
    }
    let mut left = Vec::new();
    walk(&env.p("reg"), &mut left);
    assert!(left.is_empty(), "{left:?}");
    let history = std::fs::read_to_string(env.p("reg/history.jsonl")).unwrap();
    assert_eq!(history.lines().count(), 5, "{history}");
    assert!(history
        .lines()
        .last()
        .unwrap()
        .contains("\"action\":\"rollback\""));
}

/// Issue 12: a re-bake can publish a KV tier with the release (`--publish TIER=LISTS`),
/// validated against the same snapshot: the release carries the bulk file and the lists,
/// its deploy.sh loads them first, its ID covers them, and `releases list` shows when the
/// stubs and the published tier expire.
#[test]
fn a_release_publishes_its_kv_tier_and_list_shows_when_both_expire() {
    let env = Env::new("publish");
    env.two_policies();
    let skus = ["SKU-2", "SKU-3", "SKU-4"];
    env.write("d/catalog.json", &catalog(&skus));
    env.write("d/inventory.json", &inventory(DAY2, &skus));
    env.write(
        "d/lists.json",
        r#"{"lists": {"headphones": ["SKU-3", "SKU-2"]}}"#,
    );
    env.write(
        "d/bad.json",
        r#"{"lists": {"headphones": ["SKU-3", "SKU-77"], "tents": ["SKU-78"]}}"#,
    );
    let bake = |lists: &str| {
        env.run(&[
            "bake",
            "--registry",
            "reg",
            "--catalog",
            "d/catalog.json",
            "--inventory",
            "d/inventory.json",
            "--now",
            DAY2_NOON,
            "--publish",
            lists,
            "--promote",
        ])
    };
    let before = env.active();
    let count = env.releases().len();
    let r = bake("cache=d/bad.json");
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stderr
            .contains("headphones: SKU-77: missing from the inventory snapshot"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("tents: SKU-78: missing"), "{}", r.stderr);
    assert_eq!(
        (env.active(), env.releases().len()),
        (before, count),
        "nothing written"
    );

    env.ok(&[
        "bake",
        "--registry",
        "reg",
        "--catalog",
        "d/catalog.json",
        "--inventory",
        "d/inventory.json",
        "--now",
        DAY2_NOON,
    ]);
    let without = env.active();
    bake("cache=d/lists.json");
    let id = env.active();
    assert_ne!(id, without, "the release ID covers the published lists");
    let dir = env.p(&format!("reg/releases/{id}"));
    let bulk: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("kv/CACHE.json")).unwrap()).unwrap();
    assert_eq!(bulk[0]["key"], "search:headphones");
    assert_eq!(
        bulk[0]["value"],
        r#"{"items":[{"sku":"SKU-3"},{"sku":"SKU-2"}]}"#
    );
    assert!(dir.join("sources/lists/cache.json").is_file());
    let deploy = std::fs::read_to_string(dir.join("deploy.sh")).unwrap();
    assert!(
        deploy.contains("kv bulk put kv/CACHE.json --binding CACHE --remote"),
        "{deploy}"
    );
    let out = std::process::Command::new("sh")
        .arg(dir.join("deploy.sh"))
        .arg("--dry-run")
        .env("WRANGLER", "echo wrangler")
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.contains("would run: wrangler kv bulk put kv/CACHE.json"),
        "{out}"
    );
    assert!(
        out.contains(&format!("wrangler deploy --tag {id}")),
        "{out}"
    );

    let row_of = |args: &[&str]| {
        let list = env.ok(args);
        list.stdout
            .lines()
            .find(|l| l.starts_with(&format!("* {id}")))
            .unwrap()
            .to_string()
    };
    let list = ["releases", "list", "--registry", "reg", "--now", DAY2_NOON];
    // Stubs: the day-2 snapshot (01:00) plus the 24 h ceiling; the cache tier: plus 1 h.
    let row = row_of(&[&list[..], &["--wide"]].concat());
    assert!(
        row.contains("2026-12-02T01:00:00Z") && row.contains("cache 2026-12-01T02:00:00Z"),
        "{row}"
    );
    // The narrow table shows the first of the two: when the edge first loses an answer.
    let row = row_of(&list);
    assert!(row.contains("2026-12-01 02:00"), "{row}");
    let json = env.ok(&["releases", "list", "--registry", "reg", "--format", "json"]);
    let v: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    let rel = v["releases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == id.as_str())
        .unwrap();
    assert_eq!(rel["published"][0]["expires_at"], "2026-12-01T02:00:00Z");
    assert_eq!(rel["stubs_expire_at"], "2026-12-02T01:00:00Z");
    env.ok(&["releases", "verify", "--registry", "reg"]);

    // The lists are content: changed (record and all), the release no longer hashes to its ID.
    let lists = dir.join("sources/lists/cache.json");
    std::fs::write(&lists, r#"{"lists": {"headphones": ["SKU-4"]}}"#).unwrap();
    let rec_path = dir.join("release.json");
    let mut rec: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&rec_path).unwrap()).unwrap();
    rec["files"]["sources/lists/cache.json"] =
        understudy_compiler::dist::sha256_hex(&std::fs::read(&lists).unwrap()).into();
    std::fs::write(&rec_path, serde_json::to_string_pretty(&rec).unwrap()).unwrap();
    let v = env.run(&["releases", "verify", "--registry", "reg"]);
    assert_eq!(v.code, 2);
    assert!(
        v.stdout.contains("no longer hashes to its ID"),
        "{}",
        v.stdout
    );
}
