//! `understudy replay POLICY --logs FILE…`: the edge's own logs replayed through the policy
//! they were written under and through a candidate, side by side (docs/replay.md). Exit 0;
//! 1 when a policy is invalid; 2 on usage or I/O errors, logs that cannot be read or hold
//! no line to replay, or services or releases mixed without `--service` / `--release`.

use std::process::ExitCode;

use anyhow::{anyhow, bail, Context as _};
use understudy_compiler::load::load_policy;
use understudy_compiler::release::registry::Registry;
use understudy_compiler::replay::{self, report, Select, Subject};
use understudy_compiler::simulate::scale::scale_policy;
use understudy_core::catalog::Catalog;
use understudy_core::policy::Policy;
use understudy_core::Millis;

use crate::args::{Format, ReplayArgs};
use crate::exit::Exit;

/// A policy to replay, owned.
struct Owned {
    name: String,
    policy: Policy,
    catalog: Option<Catalog>,
}

pub fn run(args: ReplayArgs) -> anyhow::Result<ExitCode> {
    if !(args.time_scale > 0.0 && args.time_scale <= 1.0) {
        bail!(
            "--time-scale {} must be more than 0 and at most 1",
            args.time_scale
        );
    }
    let select = Select {
        service: args.service.clone(),
        release: args.release.clone(),
    };
    let logs = replay::logs(&args.logs, &select).map_err(|e| anyhow!(e))?;
    let now = match &args.now {
        Some(_) => super::parse_now(args.now.as_deref())?,
        None => Millis(logs.first_ms),
    };
    let Some(candidate) = policy_file(&args.policy, now) else {
        return Ok(Exit::Invalid.into());
    };
    let logged = match (&args.logged_policy, &args.registry) {
        (Some(p), _) => match policy_file(p, now) {
            Some(o) => o,
            None => return Ok(Exit::Invalid.into()),
        },
        (None, Some(dir)) => {
            let reg = Registry::open(dir)?;
            let id = reg.resolve(&logs.release).with_context(|| {
                format!("the logs were written by release {}", logs.release)
            })?;
            let bake = reg.load(&id)?.bake()?;
            Owned {
                name: format!("release {id}"),
                policy: bake.policy,
                catalog: bake.catalog,
            }
        }
        (None, None) => bail!(
            "the logs were written by release {} of {}: name its policy with --logged-policy FILE, or give --registry DIR holding that release",
            logs.release,
            logs.service
        ),
    };
    let scaled = |o: &Owned| scale_policy(&o.policy, args.time_scale);
    let (lp, cp) = (scaled(&logged), scaled(&candidate));
    let window_ms = match &args.window {
        Some(w) => understudy_core::time::parse_duration(w)
            .map_err(|e| anyhow!("--window {w}: {e}"))?
            .max(1),
        None => replay::default_window_ms(logs.span_ms),
    };
    let r = replay::replay(
        &logs,
        &subject(&logged, &lp),
        &subject(&candidate, &cp),
        now.0,
        window_ms,
        args.time_scale,
    )
    .map_err(|e| anyhow!(e))?;
    if let Some(path) = &args.plot {
        let title = format!(
            "{}: {} requests replayed through {}",
            r.service,
            r.requests,
            args.policy.display()
        );
        let svg = understudy_compiler::replay::plot::render(&r, &title).map_err(|e| anyhow!(e))?;
        std::fs::write(path, svg).with_context(|| format!("cannot write {}", path.display()))?;
    }
    match args.format {
        Format::Human => print!("{}", report::human(&logs, &r)),
        Format::Json => println!(
            "{}",
            serde_json::to_string_pretty(&report::json(&logs, &r))?
        ),
    }
    Ok(Exit::Ok.into())
}

fn subject<'a>(o: &'a Owned, policy: &'a Policy) -> Subject<'a> {
    Subject {
        name: o.name.clone(),
        policy,
        catalog: o.catalog.as_ref(),
    }
}

/// A policy file loaded as of `now`; `None` (its problem printed) when it is invalid.
fn policy_file(path: &std::path::Path, now: Millis) -> Option<Owned> {
    let loaded = load_policy(path, now);
    match (&loaded.policy, loaded.has_errors()) {
        (Some(p), false) => Some(Owned {
            name: std::path::absolute(path)
                .unwrap_or_else(|_| path.to_path_buf())
                .display()
                .to_string(),
            policy: p.clone(),
            catalog: loaded.catalog.clone(),
        }),
        _ => {
            let mut sources = understudy_compiler::render::Sources::default();
            for (p, t) in &loaded.sources {
                sources.add(p, t);
            }
            let errors = loaded.diagnostics.iter().filter(|d| d.is_error());
            eprint!(
                "{}",
                super::render_all(&sources, errors, super::Stream::Stderr)
            );
            eprintln!(
                "error: {} is invalid as of the logs' time; run `understudy check {} --now …` (replay judges catalogs as of the first logged arrival, or --now)",
                path.display(),
                path.display()
            );
            None
        }
    }
}
