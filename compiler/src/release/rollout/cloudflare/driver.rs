//! Runs what [`super`] builds: wrangler (`$WRANGLER`, else `npx wrangler`) in a release's
//! directory, and the Analytics Engine SQL API over HTTPS with the account and token wrangler
//! uses. `--dry-run` passes `--dry-run` to every wrangler command, so a rollout can be
//! rehearsed without deploying.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{bail, Context as _, Result};

use super::{counts_sql, deploy_args, latency_sql, read_figures, upload_args, API_BASE};
use crate::release::registry::Registry;
use crate::release::rollout::run::Driver;
use crate::release::rollout::Figures;
use crate::release::versions::{self, Uploaded};

/// How long one wrangler command may take.
const WRANGLER_TIMEOUT: Duration = Duration::from_secs(600);
/// How long one SQL query may take.
const SQL_TIMEOUT: Duration = Duration::from_secs(30);

/// The wrangler command.
pub struct Wrangler {
    program: Vec<String>,
}

impl Wrangler {
    /// `$WRANGLER` (split on spaces, as deploy.sh runs it), else `npx wrangler`.
    pub fn from_env() -> Wrangler {
        let program = std::env::var("WRANGLER")
            .ok()
            .filter(|w| !w.trim().is_empty())
            .map(|w| w.split_whitespace().map(String::from).collect())
            .unwrap_or_else(|| vec!["npx".into(), "wrangler".into()]);
        Wrangler { program }
    }

    /// Runs `wrangler ARGS` in `dir`; its output (stdout and stderr) when it exits 0.
    pub fn run(&self, dir: &Path, args: &[String]) -> Result<String> {
        self.run_split(dir, args)
            .map(|(out, err)| format!("{out}{err}"))
    }

    /// [`Self::run`], with stdout and stderr apart (for output that is parsed).
    pub fn run_split(&self, dir: &Path, args: &[String]) -> Result<(String, String)> {
        let shown = format!("{} {}", self.program.join(" "), args.join(" "));
        let mut child = Command::new(&self.program[0])
            .args(&self.program[1..])
            .args(args)
            .current_dir(dir)
            .env("WRANGLER_SEND_METRICS", "false")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| {
                format!("cannot run `{shown}` (set WRANGLER to the wrangler command)")
            })?;
        // Drained on threads, so a chatty wrangler never blocks on a full pipe; a hung one is
        // killed after WRANGLER_TIMEOUT rather than holding the rollout (and its lock).
        let drain = |r: Option<Box<dyn std::io::Read + Send>>| {
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                if let Some(mut r) = r {
                    let _ = r.read_to_end(&mut buf);
                }
                buf
            })
        };
        let so = drain(
            child
                .stdout
                .take()
                .map(|r| Box::new(r) as Box<dyn std::io::Read + Send>),
        );
        let se = drain(
            child
                .stderr
                .take()
                .map(|r| Box::new(r) as Box<dyn std::io::Read + Send>),
        );
        let deadline = std::time::Instant::now() + WRANGLER_TIMEOUT;
        let status = loop {
            if let Some(st) = child.try_wait()? {
                break st;
            }
            if std::time::Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                bail!(
                    "`{shown}` in {} did not finish within {} s; it was stopped",
                    dir.display(),
                    WRANGLER_TIMEOUT.as_secs()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let out = std::process::Output {
            status,
            stdout: so.join().unwrap_or_default(),
            stderr: se.join().unwrap_or_default(),
        };
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        );
        if !out.status.success() {
            bail!(
                "`{shown}` in {} failed ({}):\n{}{}",
                dir.display(),
                out.status,
                stdout,
                stderr.trim_end()
            );
        }
        Ok((stdout, stderr))
    }
}

/// The Analytics Engine SQL API.
pub struct Api {
    base: String,
    account: String,
    token: String,
}

impl Api {
    /// From `CLOUDFLARE_ACCOUNT_ID`, `CLOUDFLARE_API_TOKEN` and `CLOUDFLARE_API_BASE_URL`
    /// (default the public API), as wrangler reads them.
    pub fn from_env() -> Result<Api> {
        let var = |name: &str| {
            std::env::var(name)
                .ok()
                .filter(|v| !v.trim().is_empty())
                .with_context(|| format!("{name} is not set: the rollout reads each version's figures from the Analytics Engine SQL API with the account and token wrangler uses"))
        };
        Ok(Api {
            base: std::env::var("CLOUDFLARE_API_BASE_URL")
                .ok()
                .filter(|v| !v.trim().is_empty())
                .unwrap_or_else(|| API_BASE.into())
                .trim_end_matches('/')
                .to_string(),
            account: var("CLOUDFLARE_ACCOUNT_ID")?,
            token: var("CLOUDFLARE_API_TOKEN")?,
        })
    }

    /// `GET {base}{path}` of the account's API: the answer's `result`.
    pub fn get(&self, path: &str) -> Result<serde_json::Value> {
        let url = format!("{}/accounts/{}{path}", self.base, self.account);
        let res = ureq::get(&url)
            .timeout(SQL_TIMEOUT)
            .set("Authorization", &format!("Bearer {}", self.token))
            .call();
        let text = match res {
            Ok(r) => r
                .into_string()
                .with_context(|| format!("reading the answer of {url}"))?,
            Err(ureq::Error::Status(code, r)) => {
                let body = r.into_string().unwrap_or_default();
                bail!(
                    "the API ({url}) answered {code}: {}",
                    body.chars().take(500).collect::<String>()
                )
            }
            Err(e) => {
                return Err(anyhow::Error::new(e)).with_context(|| format!("the API ({url})"))
            }
        };
        let v: serde_json::Value = serde_json::from_str(&text)
            .with_context(|| format!("the API ({url}) answered no JSON"))?;
        Ok(v.get("result").cloned().unwrap_or(serde_json::Value::Null))
    }

    pub fn sql(&self, query: &str) -> Result<String> {
        let url = format!(
            "{}/accounts/{}/analytics_engine/sql",
            self.base, self.account
        );
        let res = ureq::post(&url)
            .timeout(SQL_TIMEOUT)
            .set("Authorization", &format!("Bearer {}", self.token))
            .set("Content-Type", "text/plain")
            .send_string(query);
        match res {
            Ok(r) => r
                .into_string()
                .with_context(|| format!("reading the answer of {url}")),
            Err(ureq::Error::Status(code, r)) => {
                let body = r.into_string().unwrap_or_default();
                bail!(
                    "the SQL API ({url}) answered {code}: {}",
                    body.chars().take(500).collect::<String>()
                )
            }
            Err(e) => Err(anyhow::Error::new(e)).with_context(|| format!("the SQL API ({url})")),
        }
    }
}

/// Uploads `release` as a Workers version (once: a recorded version is returned as it is;
/// a lost result is found by its tag). With `dry_run`, wrangler checks the upload and
/// nothing is recorded (`None`).
pub fn upload(
    reg: &Registry,
    release: &str,
    wrangler: &Wrangler,
    dry_run: bool,
    now_ms: u64,
) -> Result<Option<Uploaded>> {
    let _lock = reg.lock()?;
    let id = reg.resolve(release)?;
    let rel = reg.load(&id)?;
    let args = upload_args(
        &id,
        &rel.record.policy.version,
        rel.record.catalog.as_ref().map(|c| c.sha256.as_str()),
    );
    if dry_run {
        let mut a = args;
        a.extend(["--dry-run".into(), "--outdir".into()]);
        let out = tempfile::tempdir()?;
        a.push(out.path().display().to_string());
        wrangler.run(&rel.dir, &a)?;
        return Ok(None);
    }
    let worker = crate::dist::wrangler::worker_name(&rel.record.service);
    let recorded = versions::read(reg, &id)?;
    if let Some(u) = recorded.as_ref().filter(|u| u.version_id.is_some()) {
        return Ok(Some(u.clone()));
    }
    let intent = Uploaded {
        format: versions::FORMAT,
        release: id.clone(),
        worker,
        version_id: None,
        message: args[5].clone(),
        intended_at_ms: now_ms,
        uploaded_at_ms: None,
    };
    // A version with the release's tag may be there already: an upload whose result was lost
    // (intended, not recorded done), or the release deployed at 100% by its deploy.sh (which
    // tags the version the same way). Found, it is recorded, not uploaded again.
    // Listing must work to find a lost upload; a Worker with no version yet may fail it.
    let listed = match wrangler.run_split(
        &rel.dir,
        &["versions".into(), "list".into(), "--json".into()],
    ) {
        Ok((listed, _)) => listed,
        Err(e) if recorded.is_some() => return Err(e),
        Err(_) => String::new(),
    };
    if let Some(v) = find_by_tag(&listed, &id) {
        let done = Uploaded {
            version_id: Some(v),
            uploaded_at_ms: Some(now_ms),
            ..recorded.unwrap_or(intent)
        };
        versions::write(reg, &done)?;
        return Ok(Some(done));
    }
    versions::write(reg, &intent)?;
    let out = wrangler.run(&rel.dir, &args).map_err(|e| {
        if format!("{e:#}").contains("[code: 10211]") {
            return e.context(migration_pending(&rel.dir, &id));
        }
        e
    })?;
    let Some(v) = super::parse_version_id(&out) else {
        bail!("`wrangler versions upload` printed no `Worker Version ID:` line; the upload is recorded as intended, and the next `releases upload` looks for it by its tag:\n{}", out.trim_end());
    };
    let done = Uploaded {
        version_id: Some(v),
        uploaded_at_ms: Some(now_ms),
        ..intent
    };
    versions::write(reg, &done)?;
    Ok(Some(done))
}

/// Why a version upload was refused with Cloudflare's error 10211, and the way through: the
/// release declares a Durable Object class (its `[[migrations]]`: the breaker's coordinator,
/// the events outbox) the deployed Worker has not got yet, and Workers applies a migration
/// only in a deployment at 100% (`wrangler deploy`), never in a version a rollout splits.
pub fn migration_pending(dir: &std::path::Path, release: &str) -> String {
    format!(
        "release {release} declares a Durable Object class the deployed Worker has not got yet \
         (its wrangler.toml's [[migrations]]), and Workers refuses a version that carries a \
         migration (API error 10211): a migration is applied only by a deployment at 100%. \
         Deploy this release at once with {}, then `understudy releases promote {release}` \
         and roll later releases out gradually (they carry the same migrations, already \
         applied); the upload is recorded as intended and the next `releases upload` finds \
         it by its tag",
        dir.join("deploy.sh").display()
    )
}

/// The ID of the version tagged `release` in `wrangler versions list --json`'s output.
pub fn find_by_tag(listed: &str, release: &str) -> Option<String> {
    let start = listed.find('[')?;
    let v: serde_json::Value = serde_json::from_str(&listed[start..]).ok()?;
    v.as_array()?.iter().find_map(|ver| {
        (ver.pointer("/annotations/workers~1tag")?.as_str()? == release)
            .then(|| ver.get("id")?.as_str().map(String::from))
            .flatten()
    })
}

/// The driver of a rollout on Cloudflare.
pub struct Cloudflare {
    pub wrangler: Wrangler,
    pub api: Api,
    /// The new release's directory: its `wrangler.toml` names the Worker.
    pub dir: PathBuf,
    pub service: String,
    pub old: (String, String),
    pub new: (String, String),
    pub dry_run: bool,
}

impl Cloudflare {
    /// The driver for rolling `new` out from `old`, both uploaded.
    pub fn new(reg: &Registry, old: &str, new: &str, dry_run: bool) -> Result<Cloudflare> {
        let (old, new) = (reg.resolve(old)?, reg.resolve(new)?);
        let rel = reg.load(&new)?;
        // The versions first: a missing upload is the likelier thing to fix.
        let old = (old.clone(), versions::version_of(reg, &old)?);
        let new = (new.clone(), versions::version_of(reg, &new)?);
        Ok(Cloudflare {
            wrangler: Wrangler::from_env(),
            api: Api::from_env()?,
            dir: rel.dir.clone(),
            service: rel.record.service.clone(),
            old,
            new,
            dry_run,
        })
    }
}

impl Cloudflare {
    /// `releases rollout --dry-run`: every step's deployment (and the rollback's) run
    /// through `wrangler versions deploy --dry-run`, and both figure queries sent for the
    /// last dwell — the command lines, the versions and the credentials checked, nothing
    /// deployed and nothing recorded.
    pub fn rehearse(
        &mut self,
        slo: &crate::slo::Slo,
        now_ms: u64,
        out: &mut dyn std::io::Write,
    ) -> Result<()> {
        let mut steps = slo.steps.clone();
        steps.push(0);
        for p in steps {
            let message = format!("understudy rollout of {}: {p}%", self.new.0);
            let mut args = deploy_args(&self.old.1, &self.new.1, p, &message);
            args.push("--dry-run".into());
            self.wrangler.run(&self.dir, &args)?;
            let _ = writeln!(out, "ok: wrangler {}", args.join(" "));
        }
        let from = now_ms.saturating_sub(slo.dwell_ms);
        let (old, new) = self.figures(from, now_ms)?;
        let _ = writeln!(
            out,
            "ok: the SQL API answered for the last {} s: {} {} answers, {} {} answers",
            slo.dwell_ms / 1000,
            self.old.0,
            old.answers,
            self.new.0,
            new.answers
        );
        Ok(())
    }
}

impl Driver for Cloudflare {
    fn name(&self) -> String {
        if self.dry_run {
            "cloudflare (dry run)".into()
        } else {
            "cloudflare".into()
        }
    }

    fn check(&mut self, old: &str, new: &str) -> Result<()> {
        if self.old.0 != old || self.new.0 != new {
            bail!(
                "the driver was made for {} → {}, not {old} → {new}",
                self.old.0,
                self.new.0
            );
        }
        Ok(())
    }

    fn deploy(&mut self, new_percent: u8) -> Result<()> {
        let message = format!("understudy rollout of {}: {new_percent}%", self.new.0);
        let mut args = deploy_args(&self.old.1, &self.new.1, new_percent, &message);
        if self.dry_run {
            args.push("--dry-run".into());
        }
        self.wrangler.run(&self.dir, &args)?;
        Ok(())
    }

    fn current(&mut self) -> Result<Vec<(String, u8)>> {
        let worker = crate::dist::wrangler::worker_name(&self.service);
        let listed = self
            .api
            .get(&format!("/workers/scripts/{worker}/deployments"))?;
        let latest = listed
            .pointer("/deployments/0/versions")
            .and_then(|v| v.as_array())
            .cloned()
            .unwrap_or_default();
        latest
            .iter()
            .map(|v| {
                let id = v
                    .get("version_id")
                    .and_then(|x| x.as_str())
                    .context("a deployment's version without a version_id")?;
                let pct = v
                    .get("percentage")
                    .and_then(serde_json::Value::as_f64)
                    .context("a deployment's version without a percentage")?;
                let release = [&self.old, &self.new]
                    .into_iter()
                    .find(|(_, vid)| vid == id)
                    .map_or_else(|| format!("version {id}"), |(r, _)| r.clone());
                Ok((release, pct.round().clamp(0.0, 100.0) as u8))
            })
            .collect()
    }

    fn figures(&mut self, from: u64, to: u64) -> Result<(Figures, Figures)> {
        let (old, new) = (&self.old.0, &self.new.0);
        let counts = self
            .api
            .sql(&counts_sql(&self.service, old, new, from, to))?;
        let latency = self
            .api
            .sql(&latency_sql(&self.service, old, new, from, to))?;
        read_figures(&counts, &latency, old, new).map_err(anyhow::Error::msg)
    }
}
