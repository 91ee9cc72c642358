//! The prebuilt edge: worker-build's output (`edge/worker/build`), which `understudy build`
//! copies and bakes into. Building it is the one Rust compile in the pipeline, so the
//! compiler only ever *reads* it — except when the default location is empty inside a
//! checkout, where it runs `scripts/build-edge.sh` once (cached by a fingerprint).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

/// The wasm-bindgen glue and worker-build's entrypoint, bundled by esbuild.
pub const GLUE_JS: &str = "index.js";
/// The module; the glue imports it by this name.
pub const MODULE: &str = "index_bg.wasm";
/// Where `scripts/build-edge.sh` writes, relative to the workspace root.
pub const DEFAULT_DIR: &str = "edge/worker/build";

pub struct Edge {
    pub dir: PathBuf,
    pub glue_js: Vec<u8>,
    pub module: Vec<u8>,
}

/// Reads the prebuilt edge from `explicit` (`--edge DIR`), or from the default location in
/// the checkout around the current directory (or around this compiler's sources).
pub fn locate(explicit: Option<&Path>) -> Result<Edge> {
    if let Some(dir) = explicit {
        return read(dir).with_context(|| {
            format!(
                "--edge {}: not a prebuilt edge (expected {GLUE_JS} and {MODULE} from `scripts/build-edge.sh`)",
                dir.display()
            )
        });
    }
    let Some(root) = workspace_root() else {
        bail!(
            "no prebuilt edge: pass `--edge DIR` (a directory with {GLUE_JS} and {MODULE}, from \
             `scripts/build-edge.sh` in an Understudy checkout), or run `understudy build` inside the checkout"
        );
    };
    let dir = root.join(DEFAULT_DIR);
    if !(dir.join(GLUE_JS).is_file() && dir.join(MODULE).is_file()) {
        let script = root.join("scripts/build-edge.sh");
        eprintln!(
            "note: no prebuilt edge in {}; building it once with {}",
            dir.display(),
            script.display()
        );
        let status = Command::new("bash")
            .arg(&script)
            .current_dir(&root)
            .status()
            .with_context(|| format!("could not run {}", script.display()))?;
        if !status.success() {
            bail!(
                "{} failed ({status}); the edge could not be built",
                script.display()
            );
        }
    }
    read(&dir).with_context(|| format!("the prebuilt edge in {} is incomplete", dir.display()))
}

fn read(dir: &Path) -> Result<Edge> {
    let glue = dir.join(GLUE_JS);
    let module = dir.join(MODULE);
    Ok(Edge {
        glue_js: std::fs::read(&glue).with_context(|| format!("cannot read {}", glue.display()))?,
        module: std::fs::read(&module)
            .with_context(|| format!("cannot read {}", module.display()))?,
        dir: dir.to_path_buf(),
    })
}

/// The Understudy checkout: the nearest ancestor of the current directory holding
/// `edge/worker/Cargo.toml`, else the one this binary was compiled from, if it still exists.
pub fn workspace_root() -> Option<PathBuf> {
    let is_root = |p: &Path| p.join("edge/worker/Cargo.toml").is_file();
    if let Ok(cwd) = std::env::current_dir() {
        if let Some(found) = cwd.ancestors().find(|p| is_root(p)) {
            return Some(found.to_path_buf());
        }
    }
    let compiled = Path::new(env!("CARGO_MANIFEST_DIR")).parent()?;
    is_root(compiled).then(|| compiled.to_path_buf())
}
