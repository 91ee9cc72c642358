//! Validate and bake, for `understudy bake` and the registry: the same checks as `check`
//! ([C-STUBS] listing every offending SKU), then `dist::assemble` into a module that is
//! already built — a byte splice, never a Rust compile — then the size budget.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use understudy_core::catalog::Catalog;
use understudy_core::policy::Policy;
use understudy_core::Millis;

use super::record::{self, CatalogInfo, Kind, ModuleInfo, PolicyInfo, Record, SourcesInfo};
use super::registry::{is_inner_path, Staged};
use super::{size, Invalid, DEPLOY_SCRIPT, SOURCES};
use crate::dist::{self, edge::Edge, Built};
use crate::load::{load_policy, Loaded};
use crate::render::{self, Sources};
use crate::validate::explicit;
use crate::validate::CatalogFiles;

/// Where the policy comes from.
pub enum PolicySource {
    /// A policy file on disk; its catalog is the one it names (unless overridden).
    File(PathBuf),
    /// Policy text, as if read from `path` (diagnostics point into it): a release's source.
    Text { path: PathBuf, text: String },
    /// A policy decoded from a built module's bake: no text, so only the catalog is checked
    /// (the policy was validated when it was built).
    Baked {
        policy: Box<Policy>,
        policy_hash: String,
        file: String,
    },
}

pub struct Request<'a> {
    pub policy: PolicySource,
    /// The catalog and inventory to validate and bake instead of the policy's own.
    pub catalog: Option<CatalogFiles<'a>>,
    pub edge: &'a Edge,
    /// Validation time: freshness is judged as of now, and it is recorded in the bake.
    pub now: Millis,
    /// What the module may weigh.
    pub budget: size::Budget,
    /// KV tiers to publish with the release: (tier name, lists file), validated against the
    /// same inventory snapshot as the stubs.
    pub publish: &'a [(String, PathBuf)],
}

/// A KV tier published with a release.
pub struct PublishedTier {
    pub tier: String,
    pub lists_path: PathBuf,
    pub lists_text: String,
    pub published: crate::publish::Published,
}

/// A validated bake, in memory.
pub struct Baked {
    pub built: Built,
    pub policy: Policy,
    pub catalog: Option<Catalog>,
    /// The policy file's name.
    pub policy_file: String,
    /// The exact policy text validated (absent for `Baked`).
    pub policy_text: Option<String>,
    /// Where the validated catalog and inventory were read (their texts are not kept: a
    /// release reads them again, and checks they still hash to what was baked).
    pub catalog_path: Option<PathBuf>,
    pub inventory_path: Option<PathBuf>,
    /// Warnings, rendered like `check` renders them.
    pub warnings: String,
    pub validated_at_ms: u64,
    /// The module's gzipped size, measured when a gzip budget was given.
    pub gzip_bytes: Option<u64>,
    /// The stub catalog's own hash (the manifest's `catalog.sha256` also covers the lists).
    pub stubs_hash: String,
    pub published: Vec<PublishedTier>,
}

fn render_all(loaded: &Loaded) -> String {
    let sources = Sources::for_diagnostics(&loaded.sources, &loaded.diagnostics);
    loaded
        .diagnostics
        .iter()
        .map(|d| render::human(&sources, d))
        .collect()
}

/// Takes the text read from `path` out of `sources` (catalogs are megabytes: no copy).
fn take_source(sources: &mut [(PathBuf, String)], path: &Path) -> Option<String> {
    sources
        .iter_mut()
        .find(|(p, _)| p == path)
        .map(|(_, t)| std::mem::take(t))
}

/// Validates and bakes. An invalid policy or catalog, or a module over the size limit, is
/// an [`Invalid`] error carrying the rendered diagnostics; nothing is written anywhere.
pub fn bake(req: &Request<'_>) -> Result<Baked> {
    crate::timing::mark("start");
    let (mut loaded, policy_file, display_path) = match &req.policy {
        PolicySource::File(path) => {
            let loaded = match req.catalog {
                None => load_policy(path, req.now),
                Some(files) => {
                    let text = crate::validate::read_text(path, crate::validate::MAX_POLICY_BYTES)
                        .map_err(anyhow::Error::msg)?;
                    explicit::load_text_with_catalog(path, text, req.now, files)
                }
            };
            (loaded, dist::file_name(path), path.clone())
        }
        PolicySource::Text { path, text } => {
            let loaded = match req.catalog {
                None => crate::validate::load_text(path, text.clone(), req.now),
                Some(files) => explicit::load_text_with_catalog(path, text.clone(), req.now, files),
            };
            (loaded, dist::file_name(path), path.clone())
        }
        PolicySource::Baked {
            policy,
            policy_hash,
            file,
        } => {
            let files = req.catalog.context(
                "a re-bake of a built module needs the new catalog: pass --catalog and --inventory",
            )?;
            let path = PathBuf::from(file);
            let loaded = explicit::check_policy_catalog(policy, &path, policy_hash, req.now, files);
            (loaded, file.clone(), path)
        }
    };
    let rendered = render_all(&loaded);
    let Some(policy) = loaded.policy.clone().filter(|_| !loaded.has_errors()) else {
        let errors = loaded.diagnostics.iter().filter(|d| d.is_error()).count();
        return Err(anyhow::Error::new(Invalid {
            message: format!(
                "{} is invalid with this catalog ({errors} error(s)); nothing was baked",
                display_path.display()
            ),
            rendered,
        }));
    };

    // The exact texts that were validated (the catalog pair only when the policy has one).
    let (catalog_path, inventory_path) = match (req.catalog, policy.catalog.as_ref()) {
        (_, None) => (None, None),
        (Some(f), Some(_)) => (Some(f.stubs.to_path_buf()), Some(f.inventory.to_path_buf())),
        (None, Some(rules)) => {
            let base = display_path.parent().unwrap_or(Path::new("."));
            (
                Some(base.join(&rules.stubs)),
                Some(base.join(&rules.inventory)),
            )
        }
    };
    // KV tiers published with the release: validated against the same snapshot, now.
    let mut published = Vec::new();
    if !req.publish.is_empty() {
        let Some(inv_path) = inventory_path.as_deref() else {
            return Err(crate::release::invalid(
                "publishing KV tiers needs the policy's [catalog]: its inventory snapshot and rule",
            ));
        };
        let inv_text =
            crate::validate::read_text(inv_path, crate::validate::stubs::MAX_CATALOG_BYTES)
                .map_err(anyhow::Error::msg)?;
        let mut rendered = String::new();
        for (tier, lists_path) in req.publish {
            let lists_text = crate::validate::read_text(
                lists_path,
                crate::validate::stubs::MAX_CATALOG_BYTES,
            )
            .map_err(|e| anyhow::anyhow!("--publish {tier}={}: {e}", lists_path.display()))?;
            match crate::publish::publish(&crate::publish::Request {
                policy: &policy,
                tier,
                lists_path,
                lists_text: &lists_text,
                inventory_path: inv_path,
                inventory_text: &inv_text,
                now: req.now,
                drop_invalid: false,
            }) {
                Ok(p) => published.push(PublishedTier {
                    tier: tier.clone(),
                    lists_path: lists_path.clone(),
                    lists_text,
                    published: p,
                }),
                Err(diags) => {
                    let files = vec![(lists_path.clone(), lists_text.clone())];
                    let sources = Sources::for_diagnostics(&files, &diags);
                    for d in &diags {
                        rendered.push_str(&render::human(&sources, d));
                    }
                }
            }
        }
        if !rendered.is_empty() {
            return Err(anyhow::Error::new(Invalid {
                message: format!(
                    "a KV tier to publish with {} is invalid; nothing was baked",
                    display_path.display()
                ),
                rendered,
            }));
        }
    }
    let stubs_hash = loaded.catalog_hash.clone();
    let lists: std::collections::BTreeMap<String, String> = published
        .iter()
        .map(|p| (p.tier.clone(), dist::sha256_hex(p.lists_text.as_bytes())))
        .collect();
    loaded.catalog_hash = crate::publish::curated_hash(&stubs_hash, &lists);
    let mut sources = std::mem::take(&mut loaded.sources);
    let policy_text = match &req.policy {
        PolicySource::Baked { .. } => None,
        _ => take_source(&mut sources, &display_path),
    };

    let inputs = dist::Inputs::new(&loaded, &policy, &policy_file, req.now);
    let built = dist::assemble(&inputs, req.edge)?;
    let items = loaded.catalog.as_ref().map_or(0, |c| c.items.len());
    let about = catalog_path.clone().unwrap_or_else(|| display_path.clone());
    let gzip_bytes = req
        .budget
        .gzip
        .map(|_| dist::gzip_len(&built.files[dist::edge::MODULE]));
    if let Some(d) = size::check(
        &built.manifest.module,
        gzip_bytes,
        items,
        req.budget,
        &about,
    ) {
        return Err(anyhow::Error::new(Invalid {
            message: format!(
                "the module for {} is over the size limit; nothing was baked",
                display_path.display()
            ),
            rendered: render::human(&Sources::default(), &d),
        }));
    }
    Ok(Baked {
        built,
        policy,
        catalog: loaded.catalog,
        policy_file,
        policy_text,
        catalog_path: catalog_path.clone(),
        inventory_path,
        warnings: rendered,
        validated_at_ms: req.now.0,
        gzip_bytes,
        stubs_hash,
        published,
    })
}

/// Where a source file goes inside `sources/`: the policy's own relative path when it is a
/// plain one (so `understudy check sources/POLICY` works as it is), else `fallback`.
fn source_slot(declared: &str, fallback: &str) -> String {
    if is_inner_path(declared) {
        format!("{SOURCES}/{declared}")
    } else {
        format!("{SOURCES}/{fallback}")
    }
}

/// The release directory's files and record for `baked`. The policy text must be known.
pub fn stage(
    baked: &Baked,
    kind: Kind,
    parent: Option<&str>,
    note: &str,
    created_at_ms: u64,
) -> Result<Staged> {
    let id = baked.built.release_id.clone();
    let policy_text = baked.policy_text.as_deref().context(
        "the policy's source is not known (a plain build output was given); publish the \
         policy with `understudy releases add POLICY --registry R` first",
    )?;
    let mut files: BTreeMap<String, Vec<u8>> = baked.built.files.clone();
    let m = &baked.built.manifest;
    files.insert(
        DEPLOY_SCRIPT.into(),
        super::deploy_script(&id, &m.policy.service, &m.policy.version).into_bytes(),
    );
    let policy_slot = source_slot(&baked.policy_file, "policy.toml");
    files.insert(policy_slot.clone(), policy_text.as_bytes().to_vec());
    let mut sources = SourcesInfo {
        catalog: None,
        inventory: None,
        lists: BTreeMap::new(),
        policy: policy_slot,
    };
    let mut catalog_info = None;
    if let (Some(rules), Some(cat)) = (baked.policy.catalog.as_ref(), baked.catalog.as_ref()) {
        let (Some(cp), Some(ip)) = (&baked.catalog_path, &baked.inventory_path) else {
            anyhow::bail!("the catalog's source paths were not kept; this is a bug in understudy");
        };
        let read =
            |p: &Path| std::fs::read(p).with_context(|| format!("cannot read {}", p.display()));
        let (ct, it) = (read(cp)?, read(ip)?);
        if crate::validate::stubs::catalog_hash(&ct, &it) != baked.stubs_hash {
            anyhow::bail!(
                "{} or {} changed while it was being baked; run the command again",
                cp.display(),
                ip.display()
            );
        }
        let c_slot = source_slot(&rules.stubs, "catalog.json");
        let mut i_slot = source_slot(&rules.inventory, "inventory.json");
        if i_slot == c_slot || i_slot == sources.policy {
            i_slot = format!("{SOURCES}/inventory.json");
        }
        files.insert(c_slot.clone(), ct);
        files.insert(i_slot.clone(), it);
        sources.catalog = Some(c_slot);
        sources.inventory = Some(i_slot);
        catalog_info = Some(CatalogInfo {
            items: cat.items.len() as u64,
            max_age_ms: rules.max_age_ms,
            on_expired: format!("{:?}", rules.on_expired).to_lowercase(),
            sha256: m
                .catalog
                .as_ref()
                .map(|c| c.sha256.clone())
                .unwrap_or_default(),
            snapshot_at: record::rfc3339(cat.snapshot_at_ms),
            snapshot_at_ms: cat.snapshot_at_ms,
        });
    }
    // Published KV tiers: the bulk file wrangler loads, and the lists it was made from.
    let mut published = Vec::new();
    for p in &baked.published {
        let binding = super::shell_word(&p.published.binding);
        let file = format!("{}/{binding}.json", super::KV_DIR);
        let ext = p
            .lists_path
            .extension()
            .map(|e| e.to_string_lossy().to_ascii_lowercase())
            .filter(|e| e == "csv")
            .unwrap_or_else(|| "json".into());
        let lists = format!("{SOURCES}/lists/{}.{ext}", super::shell_word(&p.tier));
        files.insert(file.clone(), p.published.bulk.clone().into_bytes());
        files.insert(lists.clone(), p.lists_text.clone().into_bytes());
        sources.lists.insert(p.tier.clone(), lists.clone());
        published.push(record::PublishedInfo {
            binding: p.published.binding.clone(),
            expires_at: record::rfc3339(p.published.expires_at_ms),
            expires_at_ms: p.published.expires_at_ms,
            file,
            items: p.published.items as u64,
            keys: p.published.keys as u64,
            snapshot_at_ms: p.published.snapshot_at_ms,
            tier: p.tier.clone(),
            validated_at_ms: p.published.validated_at_ms,
        });
    }
    if !published.is_empty() {
        let kv: Vec<(String, String)> = published
            .iter()
            .map(|p| (super::shell_word(&p.binding), p.file.clone()))
            .collect();
        files.insert(
            DEPLOY_SCRIPT.into(),
            super::deploy_script_with_kv(&id, &m.policy.service, &m.policy.version, &kv)
                .into_bytes(),
        );
    }
    let record = Record {
        catalog: catalog_info,
        created_at: record::rfc3339(created_at_ms),
        created_at_ms,
        files: BTreeMap::new(),
        format: record::FORMAT,
        id,
        kind,
        module: ModuleInfo {
            bytes: m.module.bytes,
            gzip_bytes: baked.gzip_bytes,
            sha256: m.module.sha256.clone(),
        },
        note: note.to_string(),
        parent: parent.map(str::to_string),
        published,
        policy: PolicyInfo {
            file: baked.policy_file.clone(),
            sha256: m.policy.sha256.clone(),
            version: m.policy.version.clone(),
        },
        service: m.policy.service.clone(),
        sources,
        validated_at: record::rfc3339(baked.validated_at_ms),
        validated_at_ms: baked.validated_at_ms,
    };
    Ok(Staged { record, files })
}
