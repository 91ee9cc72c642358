//! `understudy publish POLICY --tier NAME --lists FILE --out FILE`: the catalog owner's
//! Tier 2 ([B-PUBLISH], docs/publish.md). Validates every SKU of the per-key lists against
//! the inventory snapshot with the stubs' rule, and writes the file `wrangler kv bulk put`
//! takes. Nothing invalid is published.
//!
//! Exit codes: 0 written, 1 refused (an invalid policy, a malformed list, a SKU that fails
//! validation without --drop-invalid, a stale snapshot) — nothing written, 2 usage or I/O.

use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use serde_json::json;

use crate::args::{Format, PublishArgs};
use crate::exit::Exit;
use understudy_compiler::publish::{self, Request};
use understudy_compiler::release::record::rfc3339;
use understudy_compiler::release::registry::write_atomic;
use understudy_compiler::render::{self, Sources};
use understudy_compiler::validate;

fn read(path: &std::path::Path, what: &str) -> Result<String> {
    validate::read_text(path, validate::stubs::MAX_CATALOG_BYTES)
        .map_err(anyhow::Error::msg)
        .with_context(|| format!("{what} {}", path.display()))
}

pub fn run(args: PublishArgs) -> Result<ExitCode> {
    let now = super::parse_now(args.now.as_deref())?;
    if !args.policy.is_file() {
        bail!(
            "policy file {} does not exist or is not a file",
            args.policy.display()
        );
    }
    let text = read(&args.policy, "policy")?;
    let loaded = validate::load_text_without_catalog(&args.policy, text);
    let Some(policy) = loaded.policy.as_ref().filter(|_| !loaded.has_errors()) else {
        let sources = Sources::for_diagnostics(&loaded.sources, &loaded.diagnostics);
        for d in &loaded.diagnostics {
            eprintln!("{}", render::human(&sources, d));
        }
        eprintln!(
            "error: {} is invalid; nothing was published",
            args.policy.display()
        );
        return Ok(Exit::Invalid.into());
    };
    let inventory = match (&args.inventory, &policy.catalog) {
        (Some(p), _) => p.clone(),
        (None, Some(c)) => args
            .policy
            .parent()
            .unwrap_or(std::path::Path::new("."))
            .join(&c.inventory),
        (None, None) => bail!(
            "{} has no [catalog] naming an inventory snapshot; pass --inventory FILE",
            args.policy.display()
        ),
    };
    let lists_text = read(&args.lists, "--lists")?;
    let inventory_text = read(&inventory, "inventory snapshot")?;
    let started = std::time::Instant::now();
    let result = publish::publish(&Request {
        policy,
        tier: &args.tier,
        lists_path: &args.lists,
        lists_text: &lists_text,
        inventory_path: &inventory,
        inventory_text: &inventory_text,
        now,
        drop_invalid: args.drop_invalid,
    });
    let p = match result {
        Ok(p) => p,
        Err(diags) => {
            let files = vec![
                (args.lists.clone(), lists_text.clone()),
                (inventory.clone(), inventory_text.clone()),
            ];
            let sources = Sources::for_diagnostics(&files, &diags);
            for d in &diags {
                eprintln!("{}", render::human(&sources, d));
            }
            eprintln!(
                "error: tier `{}` of {} was not published ({} problem(s)); nothing was written",
                args.tier,
                args.policy.display(),
                diags.len()
            );
            return Ok(Exit::Invalid.into());
        }
    };
    let elapsed_ms = started.elapsed().as_millis();
    for d in &p.dropped {
        eprintln!("dropped (--drop-invalid): {d}");
    }
    for k in &p.emptied {
        eprintln!("not published (--drop-invalid): every SKU of list `{k}` failed");
    }
    write_atomic(&args.out, p.bulk.as_bytes())?;
    match args.format {
        Format::Json => println!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "tier": args.tier,
                "binding": p.binding,
                "out": args.out,
                "keys": p.keys,
                "items": p.items,
                "snapshot_at": rfc3339(p.snapshot_at_ms),
                "validated_at": rfc3339(p.validated_at_ms),
                "expires_at": rfc3339(p.expires_at_ms),
                "expires_at_ms": p.expires_at_ms,
                "dropped": p.dropped,
                "not_published": p.emptied,
                "elapsed_ms": elapsed_ms,
            }))?
        ),
        Format::Human => {
            println!(
                "published tier `{}` (KV binding {}): {} key(s), {} item(s), validated {} against \
                 the snapshot of {}; the edge serves them until {} — wrote {} in {elapsed_ms} ms",
                args.tier,
                p.binding,
                p.keys,
                p.items,
                rfc3339(p.validated_at_ms),
                rfc3339(p.snapshot_at_ms),
                rfc3339(p.expires_at_ms),
                args.out.display()
            );
            println!(
                "load it: npx wrangler kv bulk put {} --binding {} --remote",
                args.out.display(),
                p.binding
            );
        }
    }
    Ok(Exit::Ok.into())
}
