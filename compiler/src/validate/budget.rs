//! [C-BUDGET] [C-SLACK] [C-RANGE] The time arithmetic: the worst-case path fits the total
//! budget, every tier that can run after the deadline has room to run (with an explicit
//! slack per timed step), the deadline fits the budget, and the backoff's base does not
//! exceed its maximum.
//!
//! Why slack: a tier runs only when its whole timeout fits what is left of the budget.
//! Inside a Worker the clock advances only across I/O and a timer fires at its time or
//! later, so each timed step — the race, each read — may end a little after its nominal
//! end. A path that closes exactly leaves the last tier a millisecond short at runtime.
//! `budget.slack` (default 1ms, Workers' clock resolution) is kept per timed step.

use understudy_core::policy::{Budget, Origin};
use understudy_core::time::format_duration as fmt;

use super::model::Model;
use super::Ctx;
use crate::codes::Code;

/// The origin phase's worst case: the race deadline, or every attempt plus its backoff
/// when that is shorter.
pub fn origin_worst_case(o: &Origin, b: &Budget) -> (u64, String) {
    let attempts = o.attempts.max(1) as u64;
    let all_attempts = attempts * o.attempt_timeout_ms + (attempts - 1) * o.backoff_max_ms;
    let worst = all_attempts.min(b.deadline_ms);
    let how = if attempts == 1 {
        format!(
            "min(deadline {}, 1 attempt × {}) = {}",
            fmt(b.deadline_ms),
            fmt(o.attempt_timeout_ms),
            fmt(worst)
        )
    } else {
        format!(
            "min(deadline {}, {attempts} attempts × {} + {} backoffs × {}) = {}",
            fmt(b.deadline_ms),
            fmt(o.attempt_timeout_ms),
            attempts - 1,
            fmt(o.backoff_max_ms),
            fmt(worst)
        )
    };
    (worst, how)
}

pub fn check(ctx: &mut Ctx, m: &Model<'_>) {
    deadline_fits(ctx, m);
    backoff(ctx, m);
    let (Some((budget, raw_budget)), Some((origin, _)), Some(tiers)) =
        (&m.budget, &m.origin, m.all_tiers())
    else {
        return;
    };
    let (race, how) = origin_worst_case(origin, budget);
    let mut notes = vec![format!("origin race: {how}")];
    let mut total = race;
    for t in &tiers {
        let ms = t.model.kind.timeout_ms();
        let what = t.model.kind.timeout_label();
        notes.push(format!("+ tier `{}` ({what}): {}", t.model.name, fmt(ms)));
        total += ms;
    }
    notes.push(format!(
        "worst case: {} against budget.total {}",
        fmt(total),
        fmt(budget.total_ms)
    ));
    if total > budget.total_ms {
        let over = total - budget.total_ms;
        ctx.push(
            ctx.diag(
                Code::BudgetExceeded,
                format!(
                    "the worst-case path takes {}, over the {} budget by {}",
                    fmt(total),
                    fmt(budget.total_ms),
                    fmt(over)
                ),
            )
            .at(raw_budget.total.span, "the total budget")
            .notes(notes)
            .help(format!("lower `budget.deadline` or a tier timeout by {} in total, or raise `budget.total` if the SLA allows", fmt(over))),
        );
        return;
    }
    // [C-SLACK] Each I/O tier starts after the race and the tiers before it, each of which
    // may end one slack late; it needs its whole timeout from there.
    let slack = raw_budget.slack_ms();
    let mut start = race + slack;
    let mut steps = vec![format!(
        "origin race ends by {} + {} slack = {}",
        fmt(race),
        fmt(slack),
        fmt(start)
    )];
    for t in &tiers {
        let ms = t.model.kind.timeout_ms();
        if ms == 0 {
            continue;
        }
        let end = start + ms;
        steps.push(format!(
            "tier `{}` needs {} from {}: until {}",
            t.model.name,
            fmt(ms),
            fmt(start),
            fmt(end)
        ));
        if end > budget.total_ms {
            let short = end - budget.total_ms;
            steps.push(format!(
                "budget.total is {}: {} short",
                fmt(budget.total_ms),
                fmt(short)
            ));
            ctx.push(
                ctx.diag(
                    Code::NoSlack,
                    format!(
                        "tier `{}` can never run after the deadline: the budget leaves it {} less than its {} timeout plus slack",
                        t.model.name,
                        fmt(short),
                        fmt(ms)
                    ),
                )
                .at(raw_budget.total.span, "no room after the deadline")
                .also(t.raw.name().span, "this tier")
                .notes(steps)
                .note(format!(
                    "slack: {} per timed step (`budget.slack`): a Worker's timer fires at its time or later",
                    fmt(slack)
                ))
                .help(format!(
                    "lower `budget.deadline` (or the tier's timeout) by {} so the tier runs when the origin times out",
                    fmt(short)
                )),
            );
            return;
        }
        start = end + slack;
    }
}

fn deadline_fits(ctx: &mut Ctx, m: &Model<'_>) {
    let Some((b, raw)) = &m.budget else { return };
    if b.deadline_ms > b.total_ms {
        ctx.push(
            ctx.diag(
                Code::BudgetExceeded,
                format!(
                    "the origin deadline {} is longer than the total budget {}",
                    fmt(b.deadline_ms),
                    fmt(b.total_ms)
                ),
            )
            .at(raw.deadline.span, "deadline over budget")
            .help("the deadline must leave time for the fallback tiers: lower it below `budget.total`"),
        );
    }
}

/// [C-RANGE] A backoff whose base is above its maximum never grows: every wait is capped
/// at `max`, so `base` is not what it says.
fn backoff(ctx: &mut Ctx, m: &Model<'_>) {
    let Some((o, raw)) = &m.origin else { return };
    if o.backoff_base_ms <= o.backoff_max_ms {
        return;
    }
    let span = raw
        .backoff
        .as_ref()
        .map(|b| {
            b.value
                .max
                .map(|s| s.span)
                .or(b.value.base.map(|s| s.span))
                .unwrap_or(b.span)
        })
        .unwrap_or(raw.span);
    ctx.push(
        ctx.diag(
            Code::OutOfRange,
            format!(
                "`origin.backoff.base` ({}) is above `origin.backoff.max` ({}): the backoff could never grow",
                fmt(o.backoff_base_ms),
                fmt(o.backoff_max_ms)
            ),
        )
        .at(span, "below the base")
        .help("make `max` at least `base` (the default `max` is 8 × base)"),
    );
}
