//! [R-GRADUAL] `[rollout]` as a whole: the steps a rollout moves through, and whether the
//! minimum of answers lets a faultless release advance (docs/adr/012-rollout-on-workers-versions.md).

use super::model::Model;
use super::Ctx;
use crate::codes::Code;
use crate::slo::answers_to_advance;

pub fn check(ctx: &mut Ctx, m: &Model<'_>) {
    let Some(Some((slo, raw))) = m.rollout.read() else {
        return;
    };
    let span = raw.steps.as_ref().map_or(raw.span, |s| s.span);
    // The ranges were checked as the keys were read; the steps' order is checked by the
    // rule every path to a rollout shares (`Slo::problems`).
    for p in slo.problems() {
        if p.code != Code::RolloutSteps {
            continue;
        }
        ctx.push(
            ctx.diag(
                p.code,
                format!("`rollout.steps` is {:?}: {}", slo.steps, p.message),
            )
            .at(span, "steps, in percent")
            .help(p.help),
        );
    }
    for (key, margin, value_span) in [
        (
            "degraded_margin",
            slo.degraded_margin,
            raw.degraded_margin.map(|x| x.span),
        ),
        (
            "unavailable_margin",
            slo.unavailable_margin,
            raw.unavailable_margin.map(|x| x.span),
        ),
    ] {
        let need = answers_to_advance(margin);
        let short = match need {
            None => true,
            Some(n) => slo.min_answers < n,
        };
        if !short {
            continue;
        }
        let at = raw
            .min_answers
            .map(|x| x.span)
            .or(value_span)
            .unwrap_or(raw.span);
        let message = match need {
            None => format!("`rollout.{key}` is 0: no release can ever be shown within it, so every rollout rolls back"),
            Some(n) => format!(
                "`rollout.min_answers` is {} but a faultless release needs {n} answers to show its {} within {}",
                slo.min_answers,
                if key == "degraded_margin" { "degraded share" } else { "no-tier 5xx share" },
                margin
            ),
        };
        ctx.push(
            ctx.diag(Code::RolloutMinAnswers, message)
                .at(at, "judged on this many answers")
                .note("until then every judgement holds; after `max_holds` holds the rollout rolls back")
                .help(match need {
                    Some(n) => format!("raise `rollout.min_answers` to at least {n}, or widen `rollout.{key}`"),
                    None => format!("set `rollout.{key}` above 0"),
                }),
        );
    }
}
