//! [B-DRILL] `understudy drill`: a scenario played against the real edge — the built Worker
//! in workerd — and the simulated origin, with a bounded load driver on loopback.
//!
//! Why drill when `simulate` already replays the decision core? Simulation proves the
//! logic; only the real runtime shows what the logic costs and whether the adapter does what
//! the core decided: that an abandoned fetch frees its slot, that KV answers within its read
//! timeout, that every header reaches the client, that the breaker sees the outcomes. So the
//! drill prints the very table `simulate` prints (one `Summary`, built from what the client
//! received), then checks the invariants ([`check`]) and writes a report: `drill.json`
//! (figures, verdicts, every request) and `timeline.svg` ([`plot`]).
//!
//! Steps: copy the policy with a fresh inventory stamp (the catalog must validate today, and
//! the edge refuses stubs validated too long ago) → bake it (with `--time-scale`, the
//! breaker's clocks shrink too: [`script::scale_policy`]) → start the origin following the
//! scenario's model ([`script::origin_script`]) → start the edge, KV seeded from `[[kv]]` →
//! calibrate the transport slack → drive the arrivals → probe the user tier with the model
//! cut → table, verdicts, report.

mod assemble;
pub mod check;
pub mod compare;
pub mod compare_fleet;
pub mod driver;
pub mod edge;
pub mod figures;
pub mod limits;
pub mod observe;
mod play;
pub mod plot;
pub mod prepare;
pub mod rate;
mod regions;
pub mod script;
pub(crate) mod setup;
pub mod stall;
pub mod status;

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, Result};
use serde_json::Value;

pub use self::prepare::{epoch_ms, plan_request, stamp_policy};

/// Requests sent with no I/O behind them to measure the transport's own latency.
pub(crate) const CALIBRATION_REQUESTS: usize = 50;
/// Added to the calibrated p99: the load driver, workerd and the origin share two cores, so
/// a request may wait a scheduler slice or two that the quiet calibration never sees.
pub const SLACK_MARGIN_MS: f64 = 10.0;
/// The drill's clock runs this much slower than the scenario's. `simulate` records a
/// failure at the instant its request arrives; a real isolate records it a few ms later
/// (the origin's round trip), so an arrival that `simulate` places exactly at the end of a
/// cool-down (seed 002: request 18, 4 s after the failure of request 14) would come a few ms
/// early on the real edge and be refused. Stretching the schedule by 1% turns every such
/// tie into a 1% margin (40 ms on a 4 s cool-down) and moves nothing that is not a tie by
/// more than 1%.
pub const TIE_STRETCH: f64 = 1.01;
/// The status endpoint the drill adds to a policy that has none (instrumentation only).
pub const DRILL_STATUS_PATH: &str = "/__understudy/status";
pub const DRILL_ADMIN_SECRET: &str = "ADMIN_TOKEN";
/// Users probed for fresh user-tier entries after the run.
pub(crate) const USER_PROBES: usize = 5;
/// How often the admin status endpoint is read during a run.
pub(crate) const STATUS_EVERY: Duration = Duration::from_millis(200);

#[derive(Clone)]
pub struct Options {
    pub policy: PathBuf,
    pub scenario: PathBuf,
    pub report: Option<PathBuf>,
    pub time_scale: f64,
    pub concurrency: usize,
    /// Arrivals per second instead of the scenario's (the request count follows, so the
    /// run keeps its duration).
    pub rate: Option<f64>,
    /// Prebuilt edge directory (default: the checkout's `edge/worker/build`).
    pub edge: Option<PathBuf>,
    pub timeout: Duration,
    /// Replay the scenario through `simulate` too and require every request to agree.
    pub compare_simulate: bool,
    /// [F-SCOPE] Copies of the Worker, each its own isolate, the load spread uniformly over
    /// them (1: one Worker, as before).
    pub isolates: usize,
    /// [F-SCOPE] The isolates spread round robin over this many regions (1: all in one),
    /// each isolate's requests carrying its region's `cf`.
    pub regions: usize,
    /// Run the breaker in this scope whatever the policy says (`Some(true)`: fleet).
    pub fleet_scope: Option<bool>,
    /// `--inject-stall`: stop the edge's runtime at these moments ([`stall`]).
    pub inject_stalls: Vec<stall::Planned>,
    /// Write the edge's log lines here (NDJSON: what `understudy replay` reads).
    pub logs: Option<PathBuf>,
}

/// Everything a drill produced; `drill.json` is its serialisation.
pub struct Outcome {
    pub table: String,
    pub verdicts: Vec<check::Verdict>,
    pub alerts: Vec<String>,
    pub json: Value,
    pub svg: Option<String>,
    /// `--compare-simulate`: the first disagreements, one line each.
    pub disagreements: Vec<String>,
}

impl Outcome {
    /// The checks the edge is blamed for breaking.
    pub fn broken(&self) -> Vec<&check::Verdict> {
        self.verdicts.iter().filter(|v| v.broken()).collect()
    }

    /// The checks broken only by answers that stalls of the host explain.
    pub fn inconclusive(&self) -> Vec<&check::Verdict> {
        self.verdicts.iter().filter(|v| v.inconclusive()).collect()
    }

    /// One line on what the witness saw of the host.
    pub fn witness_line(&self) -> String {
        let s = &self.json["witness"]["summary"];
        let n = |k: &str| s[k].as_f64().unwrap_or(0.0);
        format!(
            "Host witness: {} wakes of 1 ms, {} late (worst {:.1} ms); {} stalls, {:.0} ms in all (longest {:.1} ms); CPU steal {}",
            n("wakes"),
            n("late_wakes"),
            n("worst_late_ms"),
            n("stalls"),
            n("stalled_ms"),
            n("longest_stall_ms"),
            s["steal_ms"]
                .as_f64()
                .map_or("not readable".to_string(), |v| format!("{v:.0} ms per CPU"))
        )
    }
}

/// Runs a drill; the caller prints and chooses the exit code (`None`: the policy is
/// invalid, its diagnostics printed).
pub fn run(opts: &Options) -> Result<Option<Outcome>> {
    let Some(prep) = setup::prepare(opts)? else {
        return Ok(None);
    };
    let played = play::play(&prep, opts)?;
    Ok(Some(assemble::outcome(prep, played, opts)))
}

/// Writes `drill.json` and `timeline.svg` into `dir`.
pub fn write_report(dir: &Path, o: &Outcome) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    std::fs::write(dir.join("drill.json"), serde_json::to_vec_pretty(&o.json)?)?;
    if let Some(svg) = &o.svg {
        std::fs::write(dir.join("timeline.svg"), svg)?;
    }
    Ok(())
}
