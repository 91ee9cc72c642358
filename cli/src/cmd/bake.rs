//! `understudy bake --catalog FILE --inventory FILE [--from DIR|ID] [--out DIR]
//! [--registry R [--promote]]`: the catalog owner's nightly job. Validates the new catalog
//! and inventory snapshot against the policy of an existing build exactly as `check` does,
//! then splices the new bake into that build's module — no Rust toolchain, no compile.
//!
//! Exit codes: 0 baked, 1 the catalog (or the policy with it) is invalid or the module is
//! over the size limit — nothing written, 2 usage or I/O.

use crate::args::BakeArgs;
use crate::exit::Exit;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{bail, Result};

use understudy_compiler::dist;
use understudy_compiler::release::ops::{self, FromDir};
use understudy_compiler::release::pipeline::{self, PolicySource, Request};
use understudy_compiler::release::record::Kind;
use understudy_compiler::release::registry::{LockOptions, Registry};
use understudy_compiler::release::size;
use understudy_compiler::validate::CatalogFiles;

pub fn run(args: BakeArgs) -> Result<ExitCode> {
    bake(&args)
}

fn bake(args: &BakeArgs) -> Result<ExitCode> {
    let started = Instant::now();
    let now = super::parse_now(args.now.as_deref())?;
    for (flag, path) in [
        ("--catalog", &args.catalog),
        ("--inventory", &args.inventory),
    ] {
        if !path.is_file() {
            bail!("{flag} {}: no such file", path.display());
        }
    }
    // Where the policy and the module come from.
    let from_dir = args
        .from
        .as_deref()
        .map(PathBuf::from)
        .filter(|p| p.is_dir());
    let (source, parent, plain_dir) = match (&from_dir, &args.registry) {
        (Some(dir), _) => {
            let fd = ops::from_dir(dir)?;
            let plain = fd.release.is_none().then(|| dir.clone());
            let parent = fd.release.clone();
            (fd, parent, plain)
        }
        (None, Some(root)) => {
            let reg = Registry::open(root)?;
            let id = match args.from.as_deref() {
                Some(id) => reg.resolve(id)?,
                None => match reg.active()? {
                    Some(id) => id,
                    None => bail!(
                        "the registry {} has no active release to re-bake; pass --from ID",
                        root.display()
                    ),
                },
            };
            let rel = reg.load(&id)?;
            let path = rel.source_path(&rel.record.sources.policy);
            let text = std::fs::read_to_string(&path)
                .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
            let fd = FromDir {
                policy: PolicySource::Text { path, text },
                edge: rel.edge()?,
                release: Some(id.clone()),
            };
            (fd, Some(id), None)
        }
        (None, None) => match &args.from {
            Some(f) => bail!(
                "--from {f}: no such directory (to name a release by ID, pass --registry too)"
            ),
            None => bail!("say what to re-bake: --from DIR (a build output) or --registry R"),
        },
    };
    let out = match (&args.out, &args.registry, &plain_dir) {
        (Some(o), _, _) => Some(o.clone()),
        (None, None, Some(dir)) => Some(dir.clone()),
        (None, None, None) => bail!(
            "a release directory is immutable: pass --out DIR for a plain build output, or \
             --registry R to publish a new release"
        ),
        (None, Some(_), _) => None,
    };

    let baked = pipeline::bake(&Request {
        policy: source.policy,
        catalog: Some(CatalogFiles {
            stubs: &args.catalog,
            inventory: &args.inventory,
        }),
        edge: &source.edge,
        now,
        budget: args.size.budget(),
        publish: &args.publish,
    })?;
    eprint!("{}", baked.warnings);
    let m = &baked.built.manifest;
    let items = baked.catalog.as_ref().map_or(0, |c| c.items.len());
    if let Some(out) = &out {
        dist::write_dir(out, &baked.built)?;
        understudy_compiler::timing::mark("write");
        println!("wrote {}", out.display());
    }
    if let Some(root) = &args.registry {
        let reg = Registry::open_or_create(root)?.with_lock_options(LockOptions {
            wait: args.wait,
            command: "bake".into(),
            long: false,
        });
        let note = format!(
            "bake: {} ({items} items) with {}",
            args.catalog.display(),
            args.inventory.display()
        );
        let p = ops::publish(
            &reg,
            &baked,
            Kind::Bake,
            parent.as_deref(),
            &note,
            now,
            args.promote,
        )?;
        println!(
            "{} release {} in {}{}",
            if p.existed {
                "kept existing"
            } else {
                "published"
            },
            p.release.id(),
            root.display(),
            if p.promoted { " (active)" } else { "" }
        );
    }
    let snapshot = baked
        .catalog
        .as_ref()
        .map(|c| understudy_compiler::release::record::rfc3339(c.snapshot_at_ms))
        .unwrap_or_default();
    let budget = args.size.budget();
    let gzip = baked
        .gzip_bytes
        .map(|g| format!(", {} gzipped", size::human(g)))
        .unwrap_or_default();
    println!(
        "baked {items} item(s) (snapshot {snapshot}) into release {} of {} in {} ms: module {}{gzip} (limit {}), bake {}",
        baked.built.release_id,
        m.policy.file,
        started.elapsed().as_millis(),
        size::human(m.module.bytes),
        size::human(budget.raw),
        size::human(m.module.bake_bytes),
    );
    Ok(Exit::Ok.into())
}
