//! `understudy build POLICY [--out DIR] [--now RFC3339] [--edge DIR]`: validate as `check`
//! does, bake the policy and catalog into a copy of the prebuilt edge module, and write a
//! directory `wrangler deploy` accepts as it is (see [`understudy_compiler::dist`]).
//!
//! The validation time (recorded in the bake and the manifest, and the instant the catalog's
//! freshness is checked at) is `--now`, else `SOURCE_DATE_EPOCH`, else the clock: give one of
//! the first two for byte-identical rebuilds.
//!
//! Exit codes (as for every command, see `exit`): 0 built (warnings printed), 1 the policy
//! is invalid or a warning was denied (diagnostics on stderr), 2 usage or I/O (missing
//! policy, unwritable output, missing prebuilt edge).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Result};
use understudy_core::catalog::Catalog;
use understudy_core::policy::Policy;

use super::Stream;
use crate::args::BuildArgs;
use crate::exit::Exit;
use understudy_compiler::codes::Code;
use understudy_compiler::dist::{self, edge, Built, Inputs};
use understudy_compiler::load::{load_policy_with, Options};
use understudy_compiler::render::Sources;

/// What a successful build produced, for `dev` and for the summary line.
pub struct Output {
    pub dir: PathBuf,
    pub built: Built,
    /// The validated policy and catalog that were baked.
    pub policy: Policy,
    pub catalog: Option<Catalog>,
}

pub fn run(args: BuildArgs) -> Result<ExitCode> {
    match build(&args)? {
        Ok(out) => {
            let m = &out.built.manifest;
            println!(
                "built {} ({}, release {}) into {}: module {} bytes, bake {} bytes",
                m.policy.file,
                m.policy.service,
                out.built.release_id,
                out.dir.display(),
                m.module.bytes,
                m.module.bake_bytes
            );
            Ok(Exit::Ok.into())
        }
        Err(code) => Ok(code),
    }
}

/// Builds `args.policy`. The outer error is a usage or I/O problem (exit 2); the inner
/// `Err` is "the policy is invalid", already reported on stderr (exit 1).
pub fn build(args: &BuildArgs) -> Result<Result<Output, ExitCode>> {
    let now = match (&args.now, source_date_epoch()?) {
        (None, Some(ms)) => understudy_core::Millis(ms),
        (now, _) => super::parse_now(now.as_deref())?,
    };
    let loaded = load_policy_with(
        &args.policy,
        now,
        Options {
            allow_outside_paths: args.strictness.allow_outside_paths,
        },
    );
    if let Some(d) = loaded
        .diagnostics
        .iter()
        .find(|d| d.code == Code::PolicyUnreadable)
    {
        // The file named on the command line: an I/O problem (exit 2), as in `check`.
        bail!("{}", d.message);
    }
    understudy_compiler::timing::mark("start");
    let sources = Sources::for_diagnostics(&loaded.sources, &loaded.diagnostics);
    eprint!(
        "{}",
        super::render_all(&sources, &loaded.diagnostics, Stream::Stderr)
    );
    let denied = args.strictness.deny_warnings && loaded.has_warnings();
    let (Some(policy), false, false) = (loaded.policy.as_ref(), loaded.has_errors(), denied) else {
        let errors = loaded.diagnostics.iter().filter(|d| d.is_error()).count();
        let warnings = loaded.diagnostics.len() - errors;
        eprintln!(
            "error: {} is invalid ({errors} error(s), {warnings} warning(s){}); nothing was built",
            args.policy.display(),
            if denied { ", warnings denied" } else { "" }
        );
        return Ok(Err(Exit::Invalid.into()));
    };

    let edge = edge::locate(args.edge.as_deref())?;
    let policy_file = dist::file_name(&args.policy);
    let inputs = Inputs::new(&loaded, policy, &policy_file, now);
    let built = dist::assemble(&inputs, &edge)?;
    // Refuse, before writing anything, a module Workers would refuse to deploy.
    let budget = args.size.budget();
    let gzip = budget
        .gzip
        .map(|_| dist::gzip_len(&built.files[edge::MODULE]));
    let items = loaded.catalog.as_ref().map_or(0, |c| c.items.len());
    if let Some(d) = understudy_compiler::release::size::check(
        &built.manifest.module,
        gzip,
        items,
        budget,
        &args.policy,
    ) {
        eprint!("{}", super::render_all(&sources, [&d], Stream::Stderr));
        return Ok(Err(Exit::Invalid.into()));
    }
    let dir = args
        .out
        .clone()
        .unwrap_or_else(|| default_out(&policy.service.name));
    dist::write_dir(&dir, &built)?;
    understudy_compiler::timing::mark("write");
    let policy = policy.clone();
    Ok(Ok(Output {
        dir,
        built,
        policy,
        catalog: loaded.catalog,
    }))
}

/// `SOURCE_DATE_EPOCH` (seconds), the reproducible-builds convention: the validation time
/// when `--now` is not given, so scripted builds are byte-identical without a flag.
fn source_date_epoch() -> Result<Option<u64>> {
    match std::env::var("SOURCE_DATE_EPOCH") {
        Ok(v) if !v.trim().is_empty() => match v.trim().parse::<u64>() {
            Ok(s) => Ok(Some(s.saturating_mul(1000))),
            Err(_) => bail!("SOURCE_DATE_EPOCH={v:?} is not a whole number of seconds since 1970"),
        },
        _ => Ok(None),
    }
}

/// `dist/<worker name>` in the current directory.
pub fn default_out(service: &str) -> PathBuf {
    Path::new("dist").join(dist::wrangler::worker_name(service))
}
