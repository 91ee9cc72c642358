//! `[breaker]`: the circuit breaker's mode and numbers [P-BREAKER].

use understudy_core::policy::*;

use super::node::{as_choice, Ctx, Table};
use crate::codes;

use super::MAX_COUNT;

pub(super) fn breaker(ctx: &mut Ctx, mut t: Table) -> Option<Breaker> {
    #[derive(Clone, Copy)]
    enum Mode {
        Off,
        Consecutive,
        Rate,
    }
    let mode = match t.req(ctx, "mode", "\"rate\"") {
        Some(n) => as_choice(
            ctx,
            "breaker.mode",
            n,
            &[
                ("off", Mode::Off),
                ("consecutive", Mode::Consecutive),
                ("rate", Mode::Rate),
            ],
        ),
        None => None,
    };
    let out = match mode? {
        Mode::Off => Some(Breaker::Off),
        Mode::Consecutive => {
            let failures = t.req_uint(ctx, "failures", 1000, "3");
            let cooldown = t.req_duration(ctx, "cooldown", "\"30s\"");
            if failures == Some(0) {
                let span = ctx.span_of("breaker.failures").unwrap_or(t.span);
                ctx.error(
                    codes::INVALID_VALUE,
                    span,
                    "`breaker.failures` is 0: the breaker would open on no failure",
                    "at least 1",
                    "set the number of consecutive failures that opens it, e.g. 3",
                );
            }
            match (failures, cooldown) {
                (Some(f), Some(c)) => Some(Breaker::Consecutive {
                    failures: f as u32,
                    cooldown_ms: c,
                }),
                _ => None,
            }
        }
        Mode::Rate => {
            let window_ms = t.req_duration(ctx, "window", "\"30s\"");
            let failure_ratio = t.opt_ratio(ctx, "failure_ratio").unwrap_or(0.15);
            let min_calls = t.opt_uint(ctx, "min_calls", MAX_COUNT).unwrap_or(20) as u32;
            let slow_call_p95_ms = t.req_duration(ctx, "slow_call_p95", "\"45ms\"");
            let hold_down_ms = t.req_duration(ctx, "hold_down", "\"30s\"");
            let probe_fraction = t.opt_ratio(ctx, "probe_fraction").unwrap_or(0.02);
            let probe_min_calls =
                t.opt_uint(ctx, "probe_min_calls", MAX_COUNT).unwrap_or(20) as u32;
            let probe_success_ratio = t.opt_ratio(ctx, "probe_success_ratio").unwrap_or(0.995);
            let probe_p95_ms = t.req_duration(ctx, "probe_p95", "\"40ms\"");
            let failed_probe_hold_ms = t.opt_duration(ctx, "failed_probe_hold").unwrap_or(60_000);
            for key in ["failure_ratio", "probe_fraction"] {
                if let Some(span) = ctx.span_of(&format!("breaker.{key}")) {
                    let v = if key == "failure_ratio" {
                        failure_ratio
                    } else {
                        probe_fraction
                    };
                    if v == 0.0 {
                        ctx.error(
                            codes::INVALID_VALUE,
                            span,
                            format!("`breaker.{key}` is 0"),
                            "must be above 0",
                            "use a positive ratio, e.g. 0.15 or 0.02",
                        );
                    }
                }
            }
            (|| {
                Some(Breaker::Rate(RateBreaker {
                    window_ms: window_ms?,
                    failure_ratio,
                    min_calls,
                    slow_call_p95_ms: slow_call_p95_ms?,
                    hold_down_ms: hold_down_ms?,
                    probe_fraction,
                    probe_min_calls,
                    probe_success_ratio,
                    probe_p95_ms: probe_p95_ms?,
                    failed_probe_hold_ms,
                }))
            })()
        }
    };
    t.finish(ctx);
    out
}
