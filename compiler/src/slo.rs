//! [R-GRADUAL] A rollout's SLO and pace (docs/adr/012-rollout-on-workers-versions.md): what the
//! policy's `[rollout]` table and `releases rollout`'s flags set, and what the controller
//! (`release::rollout`) judges with. A leaf module: the policy reader and the release code
//! both use it.

use serde::{Deserialize, Serialize};
use understudy_core::breaker::rate::wilson;

/// The SLO a rollout holds the new version to, against the old, and its pace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Slo {
    /// Percentages of traffic for the new version, increasing, ending at 100.
    pub steps: Vec<u8>,
    /// Least time at each step before a judgement.
    pub dwell_ms: u64,
    /// Least answers from each version in a step's window before a judgement.
    pub min_answers: u64,
    /// How much worse the new version's degraded share may be (absolute).
    pub degraded_margin: f64,
    /// … its no-tier 5xx share (absolute).
    pub unavailable_margin: f64,
    /// … its p95 latency (relative: 0.2 is 20%).
    pub p95_margin: f64,
    /// Holds in one step before the rollout gives up and rolls back.
    pub max_holds: u32,
}

impl Default for Slo {
    fn default() -> Self {
        Slo {
            steps: vec![1, 10, 50, 100],
            dwell_ms: 5 * 60_000,
            // Zero failures in 1,200 answers put the 99% upper bound at 0.45%: under the
            // default no-tier 5xx margin, so a faultless new version can advance at once.
            min_answers: 1_200,
            degraded_margin: 0.02,
            unavailable_margin: 0.005,
            p95_margin: 0.2,
            max_holds: 6,
        }
    }
}

/// The valid range of each rollout setting, declared once: the policy's `[rollout]` keys
/// (`parse::rollout`), `releases rollout`'s flags, its `--dry-run` and `drill --rollout`
/// are all checked against these, with the same codes ([`Slo::problems`]).
pub mod range {
    /// A step's share of traffic, in percent.
    pub const STEP_PERCENT: (u64, u64) = (1, 100);
    /// The dwell: at least the SQL API's freshness, at most a day.
    pub const DWELL_MS: (u64, u64) = (1_000, 86_400_000);
    pub const MIN_ANSWERS: (u64, u64) = (1, 1_000_000_000);
    pub const MAX_HOLDS: (u64, u64) = (0, 1_000);
    /// Every margin, absolute or relative.
    pub const MARGIN: (f64, f64) = (0.0, 1.0);
}

/// One rollout setting refused: its code, the setting (the policy key's name: `dwell`), the
/// value as given, and the message and fix with `{key}` standing for how the setting was
/// given (`--dwell`, `rollout.dwell`).
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    pub code: crate::codes::Code,
    pub key: &'static str,
    pub value: String,
    pub message: String,
    pub help: String,
}

impl Problem {
    /// The message, the setting named as `named(key)` says (`--dwell`, `rollout.dwell`).
    pub fn message_for(&self, named: &dyn Fn(&str) -> String) -> String {
        let name = named(self.key);
        if self.message.contains("{key}") {
            self.message.replace("{key}", &name)
        } else {
            format!("`{name}` is {}: {}", self.value, self.message)
        }
    }

    /// The problem as the command line shows it: code, message with the value, the fix.
    pub fn render(&self, named: &dyn Fn(&str) -> String) -> String {
        format!(
            "error[{}]: {}\n  = help: {}",
            self.code.as_str(),
            self.message_for(named),
            self.help.replace("{key}", &named(self.key))
        )
    }
}

/// What a zero would switch off, for each setting that has one (the policy's diagnostics
/// say the same: `parse::problem`).
pub fn switched_off(key: &str) -> &'static str {
    match key {
        "dwell" => "every step would be judged at once, on answers that have not come yet",
        "min_answers" => "a step could be judged on no answers at all",
        "steps" => "the new version would get no traffic to be judged on",
        _ => "it switches its mechanism off",
    }
}

fn out_of_range(key: &'static str, shown: String, zero: bool, range: String) -> Problem {
    let message = if zero {
        format!(
            "`{{key}}` is {shown}: {} (valid: {range})",
            switched_off(key)
        )
    } else {
        format!("`{{key}}` is {shown}, outside its valid range {range}")
    };
    Problem {
        code: crate::codes::Code::OutOfRange,
        key,
        value: shown,
        message,
        help: format!("use a value in {range}; docs/policy.md gives each key's range and why"),
    }
}

impl Slo {
    /// Every setting that is refused, with the policy's codes: `ERR_OUT_OF_RANGE` for a value
    /// outside [`range`], `ERR_ROLLOUT_STEPS` for steps that do not increase to 100.
    pub fn problems(&self) -> Vec<Problem> {
        use understudy_core::time::format_duration as dur;
        let mut out = Vec::new();
        let steps = self
            .steps
            .iter()
            .map(u8::to_string)
            .collect::<Vec<_>>()
            .join(",");
        let (lo, hi) = range::STEP_PERCENT;
        if let Some(bad) = self
            .steps
            .iter()
            .find(|p| !(lo..=hi).contains(&u64::from(**p)))
        {
            out.push(out_of_range(
                "steps",
                format!("{steps} (a step of {bad}%)"),
                *bad == 0,
                format!("{lo}..={hi} for each step"),
            ));
        } else if let Some(why) = self.steps_fault() {
            out.push(Problem {
                code: crate::codes::Code::RolloutSteps,
                key: "steps",
                value: steps.clone(),
                message: format!("they do not increase to 100 ({why})"),
                help: "list increasing percentages ending at 100, e.g. [1, 10, 50, 100]".into(),
            });
        }
        let (lo, hi) = range::DWELL_MS;
        if !(lo..=hi).contains(&self.dwell_ms) {
            out.push(out_of_range(
                "dwell",
                if self.dwell_ms == 0 {
                    "0s".into()
                } else {
                    dur(self.dwell_ms)
                },
                self.dwell_ms == 0,
                format!("{}..={}", dur(lo), dur(hi)),
            ));
        }
        for (key, v, (lo, hi)) in [
            ("min_answers", self.min_answers, range::MIN_ANSWERS),
            ("max_holds", u64::from(self.max_holds), range::MAX_HOLDS),
        ] {
            if !(lo..=hi).contains(&v) {
                out.push(out_of_range(
                    key,
                    v.to_string(),
                    v == 0,
                    format!("{lo}..={hi}"),
                ));
            }
        }
        let (lo, hi) = range::MARGIN;
        for (key, m) in [
            ("degraded_margin", self.degraded_margin),
            ("unavailable_margin", self.unavailable_margin),
            ("p95_margin", self.p95_margin),
        ] {
            if !(m.is_finite() && (lo..=hi).contains(&m)) {
                out.push(out_of_range(
                    key,
                    m.to_string(),
                    false,
                    format!("{lo}..={hi}"),
                ));
            }
        }
        out
    }

    /// Why the steps do not increase to 100, if they do not: the first step not above the
    /// one before it, or the last step short of 100.
    fn steps_fault(&self) -> Option<String> {
        if let Some(w) = self.steps.windows(2).find(|w| w[0] >= w[1]) {
            return Some(if w[0] == w[1] {
                format!("{}% twice", w[0])
            } else {
                format!("{}% comes after {}%", w[1], w[0])
            });
        }
        match self.steps.last() {
            None => Some("there are none".into()),
            Some(&100) => None,
            Some(last) => Some(format!("the last is {last}%")),
        }
    }

    /// The longest a bad release is seen at `rate_rps` in all, with 99% probability: at the
    /// first step's share, until the first judgement with `min_answers` from it. Each
    /// request goes to the new version independently, so the answers it gathers in a time are
    /// a Poisson count: by the time `min + 2.33·√min + 1` are expected, `min` have come with
    /// 99% probability. Judgements come a dwell apart (a thin window holds and is judged
    /// again a dwell later), so that time rounds up to whole dwells.
    pub fn exposure_ms(&self, rate_rps: f64) -> f64 {
        let share = f64::from(self.steps.first().copied().unwrap_or(100)) / 100.0;
        let min = self.min_answers as f64;
        let needed = min + 2.326 * min.sqrt() + 1.0;
        let gather = needed / (rate_rps * share).max(f64::MIN_POSITIVE) * 1000.0;
        let dwell = (self.dwell_ms as f64).max(1.0);
        (gather / dwell).ceil().max(1.0) * dwell
    }
}

/// How many answers with no failure at all a version needs for its share's one-sided 99%
/// upper bound to reach `margin` — the least `min_answers` that lets a faultless release
/// advance at its first judgement; `None` when no number does (a margin of 0).
pub fn answers_to_advance(margin: f64) -> Option<u64> {
    if margin.is_nan() || margin <= 0.0 {
        return None;
    }
    // Zero failures in n: the upper bound is 1 - wilson_lower(n, n); search the least n.
    let (mut lo, mut hi) = (1u64, u64::from(u32::MAX));
    let within = |n: u64| wilson(0, n.min(u64::from(u32::MAX)) as u32).1 <= margin;
    if !within(hi) {
        return None;
    }
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if within(mid) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    Some(lo)
}
