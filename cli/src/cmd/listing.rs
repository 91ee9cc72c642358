//! `understudy releases list`: every release of a registry — a table within 100 columns
//! (ID, kind, policy version, the catalog's age, the first expiry of what it answers from,
//! its last rollout), every column with `--wide`, every field with `--format json`.

use std::collections::BTreeMap;
use std::process::ExitCode;

use anyhow::Result;
use serde_json::json;

use crate::args::{Format, ListArgs};
use crate::exit::Exit;
use understudy_compiler::release::freshness::{self, Freshness};
use understudy_compiler::release::record::rfc3339;
use understudy_compiler::release::registry::Registry;
use understudy_compiler::release::registry::Release;
use understudy_compiler::release::rollout::record::{self as rollout_record, RolloutRecord};

/// The widest line of the default table.
pub const COLUMNS: usize = 100;

struct Listing {
    active: Option<String>,
    rows: Vec<Release>,
    damaged: Vec<(String, String)>,
    /// Each release's last rollout.
    rollouts: BTreeMap<String, RolloutRecord>,
}

pub fn list(args: &ListArgs) -> Result<ExitCode> {
    let now = super::parse_now(args.now.as_deref())?;
    let reg = Registry::open(&args.registry.registry)?;
    let mut l = Listing {
        active: reg.active()?,
        rows: Vec::new(),
        damaged: Vec::new(),
        rollouts: rollout_record::all(&reg)?
            .into_iter()
            .map(|r| (r.new.clone(), r))
            .collect(),
    };
    for id in reg.ids()? {
        match reg.load(&id) {
            Ok(r) => l.rows.push(r),
            Err(e) => l.damaged.push((id, format!("{e:#}"))),
        }
    }
    l.rows.sort_by(|a, b| {
        (a.record.created_at_ms, &a.record.id).cmp(&(b.record.created_at_ms, &b.record.id))
    });
    // Each release's Workers version (`releases upload`), when it has one.
    let version_of = |id: &str| {
        understudy_compiler::release::versions::read(&reg, id)
            .ok()
            .flatten()
            .and_then(|u| u.version_id)
    };
    match args.format {
        Format::Json => println!("{}", json_doc(&l, now, &version_of)?),
        Format::Human => {
            println!(
                "registry {}: {} release(s), active: {}",
                reg.root.display(),
                l.rows.len() + l.damaged.len(),
                l.active.as_deref().unwrap_or("none")
            );
            let lines = if args.wide {
                wide(&l, now, &version_of)
            } else {
                narrow(&l, now)
            };
            for line in lines {
                println!("{line}");
            }
        }
    }
    Ok(Exit::Ok.into())
}

impl Listing {
    fn mark(&self, id: &str) -> &'static str {
        if self.active.as_deref() == Some(id) {
            "*"
        } else {
            " "
        }
    }
}

fn json_doc(
    l: &Listing,
    now: understudy_core::Millis,
    version_of: &dyn Fn(&str) -> Option<String>,
) -> Result<String> {
    let releases: Vec<_> = l
        .rows
        .iter()
        .map(|r| {
            let f = Freshness::of(&r.record, now);
            json!({
                "id": r.record.id,
                "active": l.active.as_deref() == Some(r.id()),
                "kind": r.record.kind,
                "service": r.record.service,
                "policy": r.record.policy,
                "created_at": r.record.created_at,
                "validated_at": r.record.validated_at,
                "catalog": r.record.catalog,
                "catalog_age_ms": f.map(|f| f.snapshot_age_ms),
                "catalog_stale": f.map(|f| f.stale()),
                "stubs_expire_at": Freshness::stubs_expire_at_ms(&r.record).map(rfc3339),
                "stubs_expire_at_ms": Freshness::stubs_expire_at_ms(&r.record),
                "published": r.record.published,
                "module": r.record.module,
                "parent": r.record.parent,
                "note": r.record.note,
                "rollout": l.rollouts.get(r.id()).map(RolloutRecord::summary),
                "version_id": version_of(r.id()),
            })
        })
        .collect();
    let damaged: Vec<_> = l
        .damaged
        .iter()
        .map(|(id, e)| json!({"id": id, "error": e}))
        .collect();
    let doc = json!({"active": l.active, "releases": releases, "damaged": damaged});
    Ok(serde_json::to_string_pretty(&doc)?)
}

/// `2026-12-01T02:00:00Z` as `2026-12-01 02:00`.
fn minute(ms: u64) -> String {
    rfc3339(ms)
        .chars()
        .take(16)
        .collect::<String>()
        .replace('T', " ")
}

/// Within [`COLUMNS`]: the catalog's age (`STALE` past its ceiling), the first moment the
/// edge stops answering from the release's stubs or a KV tier published with it, the last
/// rollout in short.
fn narrow(l: &Listing, now: understudy_core::Millis) -> Vec<String> {
    let mut out = vec![format!(
        "  {:<14}  {:<8}  {:<12}  {:<11}  {:<16}  {}",
        "ID", "KIND", "POLICY", "CATALOG AGE", "EXPIRES (UTC)", "ROLLOUT"
    )];
    for r in &l.rows {
        let rec = &r.record;
        let age = match Freshness::of(rec, now) {
            Some(f) if f.stale() => format!("STALE {}", freshness::age(f.snapshot_age_ms)),
            Some(f) => freshness::age(f.snapshot_age_ms),
            None => "no catalog".into(),
        };
        let expires = Freshness::stubs_expire_at_ms(rec)
            .into_iter()
            .chain(rec.published.iter().map(|p| p.expires_at_ms))
            .min()
            .map_or_else(|| "-".to_string(), minute);
        out.push(format!(
            "{} {:<14}  {:<8}  {:<12}  {:<11}  {:<16}  {}",
            l.mark(r.id()),
            rec.id,
            rec.kind.as_str(),
            rec.policy.version,
            age,
            expires,
            l.rollouts
                .get(r.id())
                .map_or_else(|| "-".to_string(), RolloutRecord::brief)
        ));
    }
    for (id, e) in &l.damaged {
        let head = format!("{} {id:<14}  DAMAGED: ", l.mark(id));
        let room = COLUMNS - head.chars().count();
        const MORE: &str = "… (--wide or verify says all)";
        let text = if e.chars().count() > room {
            let cut: String = e
                .chars()
                .take(room.saturating_sub(MORE.chars().count()))
                .collect();
            format!("{cut}{MORE}")
        } else {
            e.clone()
        };
        out.push(format!("{head}{text}"));
    }
    out
}

/// Every column, as wide as it takes.
fn wide(
    l: &Listing,
    now: understudy_core::Millis,
    version_of: &dyn Fn(&str) -> Option<String>,
) -> Vec<String> {
    let mut out = vec![format!(
        "  {:<14}  {:<8}  {:<16}  {:<20}  {:<20}  {:>6}  {:<34}  {:<20}  {:<32}  {:<8}  {:<22}  NOTE",
        "ID",
        "KIND",
        "POLICY",
        "CREATED",
        "VALIDATED",
        "ITEMS",
        "CATALOG (snapshot age)",
        "STUBS EXPIRE",
        "PUBLISHED KV EXPIRES",
        "VERSION",
        "ROLLOUT"
    )];
    for r in &l.rows {
        let rec = &r.record;
        let catalog = match Freshness::of(rec, now) {
            Some(f) if f.stale() => format!("STALE {}", f.describe()),
            Some(f) => f.describe(),
            None => "no catalog".into(),
        };
        let stubs = Freshness::stubs_expire_at_ms(rec).map_or("-".into(), rfc3339);
        let kv = if rec.published.is_empty() {
            "none with this release".to_string()
        } else {
            rec.published
                .iter()
                .map(|p| format!("{} {}", p.tier, p.expires_at))
                .collect::<Vec<_>>()
                .join(", ")
        };
        out.push(format!(
            "{} {:<14}  {:<8}  {:<16}  {:<20}  {:<20}  {:>6}  {:<34}  {:<20}  {:<32}  {:<8}  {:<22}  {}",
            l.mark(r.id()),
            rec.id,
            rec.kind.as_str(),
            rec.policy.version,
            rec.created_at,
            rec.validated_at,
            rec.catalog.as_ref().map_or(0, |c| c.items),
            catalog,
            stubs,
            kv,
            version_of(r.id()).map_or_else(|| "-".to_string(), |v| v.chars().take(8).collect()),
            l.rollouts
                .get(r.id())
                .map_or_else(|| "-".into(), RolloutRecord::summary),
            rec.note
        ));
    }
    for (id, e) in &l.damaged {
        out.push(format!("{} {id:<14}  DAMAGED: {e}", l.mark(id)));
    }
    out
}
