//! Shared by the registry tests: a small policy, catalogs and inventories, and an
//! environment with a stand-in edge module in which the binary runs.
// Each test crate uses a part of these helpers.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use understudy_compiler::dist::edge::MODULE;
use understudy_compiler::release::registry::decode_module_bake;

pub const BIN: &str = env!("CARGO_BIN_EXE_understudy");
/// The inventory snapshots are taken at 01:00 on these days; the policy's ceiling is 24 h.
pub const DAY1: &str = "2026-11-30T01:00:00Z";
pub const DAY2: &str = "2026-12-01T01:00:00Z";
pub const DAY1_NOON: &str = "2026-11-30T12:00:00Z";
pub const DAY2_NOON: &str = "2026-12-01T12:00:00Z";
pub const DAY3_NOON: &str = "2026-12-02T12:00:00Z";

pub fn policy(version: &str, deadline: &str) -> String {
    format!(
        r#"version = "{version}"

[service]
name = "svc"
route = "/v1/search"

[params.q]
source = "query"
max_len = 100
required = true

[budget]
total = "1s"
deadline = "{deadline}"

[origin]
url = "https://model.example/v1"
attempt_timeout = "{deadline}"

[[cascade.tiers]]
name = "cache"
kind = "kv"
binding = "CACHE"
key = "search:{{q}}"
max_staleness = "1h"
read_timeout = "50ms"
published = true

[[cascade.tiers]]
name = "keyword"
kind = "embedded"
mode = "keyword"
query = "q"

[disclosure]
cache_control = "public, max-age=30"
retry_after = "5s"

[catalog]
stubs = "catalog.json"
inventory = "inventory.json"
max_age = "24h"
min_stock = 50
"#
    )
}

pub fn catalog(skus: &[&str]) -> String {
    let items: Vec<String> = skus
        .iter()
        .map(|s| {
            format!(r#"{{"sku": "{s}", "title": "item {s} headphones", "category": "audio"}}"#)
        })
        .collect();
    format!("{{\"items\": [\n{}\n]}}\n", items.join(",\n"))
}

pub fn inventory(taken_at: &str, skus: &[&str]) -> String {
    let rows: Vec<String> = skus
        .iter()
        .map(|s| format!(r#"{{"sku": "{s}", "status": "active", "stock": 120}}"#))
        .collect();
    format!(
        "{{\"taken_at\": \"{taken_at}\", \"skus\": [\n{}\n]}}\n",
        rows.join(",\n")
    )
}

pub struct Env {
    pub dir: PathBuf,
    /// Removed when the test ends, whatever happens.
    _tmp: tempfile::TempDir,
}

pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Env {
    pub fn new(name: &str) -> Env {
        let tmp = tempfile::Builder::new()
            .prefix(&format!("understudy-releases-{name}-"))
            .tempdir()
            .unwrap();
        let dir = tmp.path().to_path_buf();
        std::fs::create_dir_all(dir.join("edge")).unwrap();
        // A stand-in edge: a valid module (one type section) and a glue file.
        let mut module = b"\0asm\x01\0\0\0".to_vec();
        module.extend_from_slice(&[1, 4, 1, 0x60, 0, 0]);
        std::fs::write(dir.join("edge").join(MODULE), module).unwrap();
        std::fs::write(dir.join("edge/index.js"), "export default {};\n").unwrap();
        Env { dir, _tmp: tmp }
    }

    pub fn p(&self, rel: &str) -> PathBuf {
        self.dir.join(rel)
    }

    pub fn write(&self, rel: &str, text: &str) -> PathBuf {
        let path = self.p(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        path
    }

    /// A policy directory `name/` with its catalog and inventory.
    pub fn policy_dir(
        &self,
        name: &str,
        version: &str,
        deadline: &str,
        skus: &[&str],
        taken_at: &str,
    ) -> PathBuf {
        self.write(&format!("{name}/catalog.json"), &catalog(skus));
        self.write(
            &format!("{name}/inventory.json"),
            &inventory(taken_at, skus),
        );
        self.write(&format!("{name}/policy.toml"), &policy(version, deadline))
    }

    pub fn run(&self, args: &[&str]) -> Run {
        let out = Command::new(BIN)
            .args(args)
            .current_dir(&self.dir)
            .output()
            .unwrap();
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    pub fn ok(&self, args: &[&str]) -> Run {
        let r = self.run(args);
        assert_eq!(
            r.code, 0,
            "understudy {args:?}:\n{}\n{}",
            r.stdout, r.stderr
        );
        r
    }

    pub fn active(&self) -> String {
        std::fs::read_to_string(self.p("reg/ACTIVE"))
            .unwrap()
            .trim()
            .to_string()
    }

    pub fn releases(&self) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(self.p("reg/releases"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    pub fn bake_of(&self, id: &str) -> understudy_core::bake::Bake {
        let path = self.p(&format!("reg/releases/{id}/{MODULE}"));
        decode_module_bake(&std::fs::read(&path).unwrap(), &path).unwrap()
    }

    /// A registry with v1 (deadline 800ms) built on day 1, re-baked with day 2's catalog,
    /// then v2 (deadline 700ms) added and re-baked with day 2's catalog plus SKU-9: active.
    pub fn two_policies(&self) -> (String, String) {
        let v1 = self.policy_dir("v1", "v1", "800ms", &["SKU-1", "SKU-2", "SKU-3"], DAY1);
        let v1 = v1.to_str().unwrap().to_string();
        self.ok(&[
            "releases",
            "add",
            &v1,
            "--registry",
            "reg",
            "--edge",
            "edge",
            "--now",
            DAY1_NOON,
            "--promote",
        ]);
        let v1_id = self.active();
        self.write("day2/catalog.json", &catalog(&["SKU-2", "SKU-3", "SKU-4"]));
        self.write(
            "day2/inventory.json",
            &inventory(DAY2, &["SKU-2", "SKU-3", "SKU-4"]),
        );
        self.ok(&[
            "bake",
            "--registry",
            "reg",
            "--catalog",
            "day2/catalog.json",
            "--inventory",
            "day2/inventory.json",
            "--now",
            DAY2_NOON,
            "--promote",
        ]);
        let v2 = self.policy_dir("v2", "v2", "700ms", &["SKU-2", "SKU-3", "SKU-4"], DAY2);
        self.ok(&[
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
        self.write(
            "day2b/catalog.json",
            &catalog(&["SKU-2", "SKU-3", "SKU-4", "SKU-9"]),
        );
        self.write(
            "day2b/inventory.json",
            &inventory(DAY2, &["SKU-2", "SKU-3", "SKU-4", "SKU-9"]),
        );
        self.ok(&[
            "bake",
            "--registry",
            "reg",
            "--catalog",
            "day2b/catalog.json",
            "--inventory",
            "day2b/inventory.json",
            "--now",
            DAY2_NOON,
            "--promote",
        ]);
        (v1_id, self.active())
    }
}

pub fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}
