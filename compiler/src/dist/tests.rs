//! Tests of the built directory, on a hand-made policy and a tiny stand-in module, so they
//! need neither the validator nor a wasm toolchain.

use std::path::PathBuf;

use understudy_core::bake::{self, SECTION_NAME};
use understudy_core::catalog::Catalog;
use understudy_core::policy::*;

use super::*;
pub(crate) use crate::fixtures::{sample_catalog, sample_policy};

fn stand_in_edge() -> Edge {
    let mut module = wasm::HEADER.to_vec();
    module.extend_from_slice(&[1, 4, 1, 0x60, 0, 0]);
    module.extend_from_slice(&[0, 5, 4, b'n', b'a', b'm', b'e']);
    Edge {
        dir: PathBuf::from("edge/worker/build"),
        glue_js: b"export default {};\n".to_vec(),
        module,
    }
}

fn build_with(policy: &Policy, catalog: &Catalog, validated_at_ms: u64, edge: &Edge) -> Built {
    let inputs = Inputs {
        policy,
        catalog: Some(catalog),
        policy_hash: "aa",
        catalog_hash: "bb",
        policy_file: "recommendations.toml",
        validated_at_ms,
    };
    assemble(&inputs, edge).unwrap()
}

#[test]
fn the_same_inputs_give_byte_identical_output() {
    let (p, c, e) = (sample_policy(), sample_catalog(), stand_in_edge());
    let a = build_with(&p, &c, 1_764_460_800_000, &e);
    let b = build_with(&p, &c, 1_764_460_800_000, &e);
    assert_eq!(a.files, b.files);
    assert_eq!(
        a.files.keys().map(String::as_str).collect::<Vec<_>>(),
        [
            "bake.mjs",
            "entry.mjs",
            "index.js",
            "index_bg.wasm",
            "manifest.json",
            "wrangler.toml"
        ]
    );
}

#[test]
fn the_module_carries_a_bake_the_worker_can_decode() {
    let (p, c, e) = (sample_policy(), sample_catalog(), stand_in_edge());
    let built = build_with(&p, &c, 1_764_460_800_000, &e);
    let module = &built.files["index_bg.wasm"];
    let section = wasm::custom_section(module, SECTION_NAME)
        .unwrap()
        .expect("bake section");
    let decoded = bake::decode(section).unwrap();
    assert_eq!(decoded.policy, p);
    assert_eq!(decoded.catalog, Some(c));
    assert_eq!(decoded.release_id, built.release_id);
    assert_eq!(decoded.validated_at_ms, 1_764_460_800_000);
    assert_eq!(decoded.compiler_version, COMPILER_VERSION);
    assert!(built.release_id.starts_with("r-") && built.release_id.len() == 14);
}

/// A re-bake of a built module (used as `--edge`) replaces the bake instead of stacking one,
/// and yields the same release as baking the clean module.
#[test]
fn rebaking_a_built_module_is_the_same_as_baking_the_clean_one() {
    let (p, c, e) = (sample_policy(), sample_catalog(), stand_in_edge());
    let first = build_with(&p, &c, 1, &e);
    let rebuilt_edge = Edge {
        dir: e.dir.clone(),
        glue_js: e.glue_js.clone(),
        module: first.files["index_bg.wasm"].clone(),
    };
    let again = build_with(&p, &c, 1, &rebuilt_edge);
    assert_eq!(first.files, again.files);
}

#[test]
fn release_id_ignores_validation_time_but_not_content() {
    let (p, c, e) = (sample_policy(), sample_catalog(), stand_in_edge());
    let a = build_with(&p, &c, 1, &e);
    let b = build_with(&p, &c, 2, &e);
    assert_eq!(a.release_id, b.release_id);
    assert_ne!(a.files["index_bg.wasm"], b.files["index_bg.wasm"]);
    assert_ne!(release_id("aa", "bb", "cc"), release_id("aa", "bc", "cc"));
}

#[test]
fn wrangler_toml_binds_every_kv_tier_and_the_storm_limiter() {
    let (p, c, e) = (sample_policy(), sample_catalog(), stand_in_edge());
    let built = build_with(&p, &c, 1, &e);
    let toml = String::from_utf8(built.files["wrangler.toml"].clone()).unwrap();
    assert!(
        toml.contains("name = \"recommendation-service\"\nmain = \"entry.mjs\"\n"),
        "{toml}"
    );
    assert!(
        toml.contains("[[kv_namespaces]]\nbinding = \"CATEGORY_TOP\""),
        "{toml}"
    );
    assert!(
        toml.contains("[[ratelimits]]\nname = \"STORM_LIMITER\""),
        "{toml}"
    );
    assert!(
        toml.contains("simple = { limit = 3, period = 10 }"),
        "{toml}"
    );
    // The origin URL is baked; the override var is for local runs only.
    assert!(!toml.contains("UNDERSTUDY_ORIGIN_URL"), "{toml}");
    assert!(
        toml.contains("#   ADMIN_TOKEN\n#   ML_API_KEY\n"),
        "secrets are listed, sorted: {toml}"
    );
}

#[test]
fn manifest_has_sorted_keys_hashes_sizes_and_the_validation_time() {
    let (p, c, e) = (sample_policy(), sample_catalog(), stand_in_edge());
    let built = build_with(&p, &c, 1_764_460_800_000, &e);
    let text = String::from_utf8(built.files["manifest.json"].clone()).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["validated_at"], "2025-11-30T00:00:00Z");
    assert_eq!(v["policy"]["sha256"], "aa");
    assert_eq!(v["catalog"]["sha256"], "bb");
    assert_eq!(
        v["module"]["sha256"],
        sha256_hex(&built.files["index_bg.wasm"])
    );
    assert_eq!(v["module"]["bytes"], built.files["index_bg.wasm"].len());
    // The gzip size is a start-up budget measured on request (--gzip-limit), not recorded.
    assert!(v["module"].get("gzip_bytes").is_none());
    assert_eq!(
        v["files"]["wrangler.toml"],
        sha256_hex(&built.files["wrangler.toml"])
    );
    assert_eq!(v["bindings"]["kv"], serde_json::json!(["CATEGORY_TOP"]));
    // Keys appear in sorted order at the top level.
    let keys: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("  \""))
        .map(|l| l.split('"').nth(1).unwrap())
        .collect();
    let mut sorted = keys.clone();
    sorted.sort_unstable();
    assert_eq!(keys, sorted);
}

#[test]
fn a_foreign_file_as_module_is_an_error_naming_it() {
    let (p, c) = (sample_policy(), sample_catalog());
    let e = Edge {
        dir: PathBuf::from("somewhere"),
        glue_js: vec![],
        module: b"not wasm".to_vec(),
    };
    let inputs = Inputs {
        policy: &p,
        catalog: Some(&c),
        policy_hash: "aa",
        catalog_hash: "bb",
        policy_file: "p.toml",
        validated_at_ms: 0,
    };
    let err = format!("{:#}", assemble(&inputs, &e).err().unwrap());
    assert!(
        err.contains("somewhere/index_bg.wasm") && err.contains("not a WebAssembly module"),
        "{err}"
    );
}

#[test]
fn write_dir_replaces_its_own_output_but_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let tmp = dir.path();
    let (p, c, e) = (sample_policy(), sample_catalog(), stand_in_edge());
    let built = build_with(&p, &c, 1, &e);
    let out = tmp.join("out");
    write_dir(&out, &built).unwrap();
    std::fs::write(out.join("stale.txt"), "x").unwrap();
    write_dir(&out, &built).unwrap();
    assert!(
        !out.join("stale.txt").exists(),
        "a rebuild leaves no stale file"
    );
    assert_eq!(
        std::fs::read(out.join("wrangler.toml")).unwrap(),
        built.files["wrangler.toml"]
    );

    let foreign = tmp.join("foreign");
    std::fs::create_dir_all(&foreign).unwrap();
    std::fs::write(foreign.join("precious.txt"), "keep me").unwrap();
    let err = write_dir(&foreign, &built).unwrap_err().to_string();
    assert!(err.contains("not an `understudy build` output"), "{err}");
    assert!(foreign.join("precious.txt").exists());
}
