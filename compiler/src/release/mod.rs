//! [B-BAKE] [B-RELEASE] Re-baking a catalog into a built edge, and the release registry.
//!
//! Why a registry and not just `dist/`: CDN ops must know which policy version serves and
//! roll a bad one back in one step — without rolling the stubs back to SKUs validated days
//! ago. So every release keeps what it was made from (policy, catalog, inventory snapshot)
//! next to the deployable directory, and a rollback re-pairs the old *policy* with the
//! *current* validated catalog instead of redeploying the old pair as it was.
//!
//! - [`pipeline`]: validate (exactly as `check`) and bake into a prebuilt or built module;
//! - [`registry`]: the directory of immutable, content-addressed releases and `ACTIVE`;
//! - [`record`]: the `release.json` of each release;
//! - [`freshness`]: how old a release's catalog is against its policy's ceiling;
//! - [`diff`]: a human-readable policy diff and the catalog delta between two releases;
//! - [`ops`]: publish, promote, rollback — the rules that keep `ACTIVE` safe;
//! - [`size`]: the module size budget.

pub mod diff;
pub mod freshness;
pub mod ops;
pub mod pipeline;
pub mod record;
pub mod records;
pub mod registry;
pub mod rollout;
pub mod size;
pub mod versions;

use std::fmt;

/// The deploy script in every release directory.
pub const DEPLOY_SCRIPT: &str = "deploy.sh";
/// Where a release keeps the files it was made from.
pub const SOURCES: &str = "sources";
/// Where a release keeps the `wrangler kv bulk put` files of its published KV tiers.
pub const KV_DIR: &str = "kv";

/// Input that was refused: an invalid policy or catalog, a module over the size limit, a
/// rollback target whose catalog is past its ceiling. Exit code 1. `rendered` holds the
/// diagnostics, rendered like `check` renders them.
#[derive(Debug)]
pub struct Invalid {
    pub message: String,
    pub rendered: String,
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Invalid {}

pub fn invalid(message: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(Invalid {
        message: message.into(),
        rendered: String::new(),
    })
}

/// A shell-safe word: keeps letters, digits and `._:-+`, replaces the rest with `_`.
pub(crate) fn shell_word(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._:-+".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// `deploy.sh` of a release that publishes KV tiers: each tier's file (`kv`: binding and
/// file, both shell-safe) is loaded into its namespace (`wrangler kv bulk put … --remote`)
/// before the Worker is deployed, so the new Worker never starts without its Tier 2; with
/// `--dry-run` the loads are printed, not run.
pub fn deploy_script_with_kv(
    id: &str,
    service: &str,
    policy_version: &str,
    kv: &[(String, String)],
) -> String {
    let base = deploy_script(id, service, policy_version);
    let mut loads = String::from(
        "# The KV tiers published with this release, loaded first (wrangler kv bulk put).\n\
         case \" $* \" in *\" --dry-run \"*) dry=1 ;; *) dry=0 ;; esac\n",
    );
    for (binding, file) in kv {
        loads.push_str(&format!(
            "if [ \"$dry\" = 1 ]; then echo \"would run: wrangler kv bulk put {file} --binding {binding} --remote\"; \
             else ${{WRANGLER:-npx wrangler}} kv bulk put {file} --binding {binding} --remote; fi\n"
        ));
    }
    base.replace(
        "exec ${WRANGLER:-npx wrangler} deploy",
        &format!("{loads}exec ${{WRANGLER:-npx wrangler}} deploy"),
    )
}

/// `deploy.sh`: `wrangler deploy` of the directory as it is, with the release ID as the
/// Worker version's tag and in its message. Extra arguments pass through (`--dry-run`).
pub fn deploy_script(id: &str, service: &str, policy_version: &str) -> String {
    let message = format!(
        "understudy release {id}: {} policy {}",
        shell_word(service),
        shell_word(policy_version)
    );
    format!(
        "#!/bin/sh\n\
         # Deploys Understudy release {id} as it is. The Worker version's tag is the release\n\
         # ID and its message names it, so `wrangler versions list` shows what serves; the\n\
         # responses carry it too (`X-Policy-Version: {id}`). Extra arguments are passed to\n\
         # wrangler, e.g. `./deploy.sh --dry-run --outdir /tmp/out`. WRANGLER overrides the\n\
         # command (default: `npx wrangler`).\n\
         set -eu\n\
         cd \"$(dirname \"$0\")\"\n\
         exec ${{WRANGLER:-npx wrangler}} deploy --tag {id} --message \"{message}\" \"$@\"\n"
    )
}
