//! A rollout's timeline picture (`rollout.svg`, written by `releases rollout --report DIR`
//! and `drill --rollout --report DIR`): above, the new version's share of traffic over time,
//! step by step, from the deployments the record keeps; below, at each judgement, the old and
//! the new version's degraded share over the window judged, marked with the verdict; for
//! `drill --rollout`, the host's stalls its witness saw as a dark band along the share's axis
//! (docs/scenarios.md, "Verdicts that say why"). SVG through plotters, as the drill's
//! timeline is drawn: no fonts or tools to install.

use plotters::prelude::*;
use understudy_compiler::release::rollout::record::RolloutRecord;
use understudy_compiler::release::rollout::Judgement;

use crate::witness::Stall;

const NEW: RGBColor = RGBColor(30, 110, 200);
const OLD: RGBColor = RGBColor(120, 120, 120);
const ADVANCE: RGBColor = RGBColor(46, 139, 87);
const HOLD: RGBColor = RGBColor(230, 140, 20);
const BACK: RGBColor = RGBColor(200, 30, 30);
const STALL: RGBColor = RGBColor(60, 60, 60);

/// What a drill's witness saw: its stalls, on the clock of traffic that started at
/// `traffic_started_at_ms` (ms since the epoch).
pub struct Host<'a> {
    pub traffic_started_at_ms: u64,
    pub stalls: &'a [Stall],
}

fn share(k: u64, n: u64) -> f64 {
    if n == 0 {
        0.0
    } else {
        100.0 * k as f64 / n as f64
    }
}

/// Renders the SVG text; `host`: a drill's witness (none for a real rollout).
pub fn render(rec: &RolloutRecord, host: Option<&Host<'_>>) -> Result<String, String> {
    let e = |e: &dyn std::fmt::Display| e.to_string();
    let t0 = rec.started_at_ms;
    let s = |ms: u64| ms.saturating_sub(t0) as f64 / 1000.0;
    let end_ms = rec
        .state
        .deployed
        .iter()
        .map(|d| d.at)
        .chain(rec.state.log.iter().map(|l| l.at))
        .chain([rec.updated_at_ms])
        .max()
        .unwrap_or(t0);
    let end_s = (s(end_ms) * 1.05).max(1.0);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (1000, 620)).into_drawing_area();
        root.fill(&WHITE).map_err(|x| e(&x))?;
        let (top, bottom) = root.split_vertically(290);
        let title = format!("rollout of {} from {}: {}", rec.new, rec.old, rec.summary());
        let mut chart = ChartBuilder::on(&top)
            .caption(&title, ("sans-serif", 16))
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(56)
            .build_cartesian_2d(0.0..end_s, 0.0..105.0)
            .map_err(|x| e(&x))?;
        chart
            .configure_mesh()
            .y_desc("new version's share (%)")
            .light_line_style(WHITE)
            .draw()
            .map_err(|x| e(&x))?;
        // The share as a step line: each deployment holds until the next.
        let mut points = vec![(0.0, 0.0)];
        let mut last = 0.0;
        for d in &rec.state.deployed {
            let x = s(d.at);
            points.push((x, last));
            last = f64::from(d.new_percent);
            points.push((x, last));
        }
        points.push((s(end_ms), last));
        chart
            .draw_series(LineSeries::new(points, NEW.stroke_width(2)))
            .map_err(|x| e(&x))?
            .label("new version's share")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 14, y)], NEW.stroke_width(2)));
        if let Some(h) = host {
            // One bar per stall along the axis, at least a pixel wide.
            let px_s = end_s / 1000.0;
            let at = |ms: f64| (h.traffic_started_at_ms as f64 + ms - t0 as f64) / 1000.0;
            chart
                .draw_series(h.stalls.iter().map(|st| {
                    let (a, b) = (at(st.from_ms), at(st.to_ms).max(at(st.from_ms) + px_s));
                    Rectangle::new([(a, 0.0), (b, 4.0)], STALL.filled())
                }))
                .map_err(|x| e(&x))?
                .label(format!(
                    "host stalls seen by the witness ({})",
                    h.stalls.len()
                ))
                .legend(|(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], STALL.filled()));
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(|x| e(&x))?;

        let y_max = rec
            .state
            .log
            .iter()
            .flat_map(|l| {
                [
                    share(l.evidence.old.degraded, l.evidence.old.answers),
                    share(l.evidence.new.degraded, l.evidence.new.answers),
                ]
            })
            .fold(1.0, f64::max)
            * 1.2;
        let mut chart = ChartBuilder::on(&bottom)
            .margin(10)
            .x_label_area_size(36)
            .y_label_area_size(56)
            .build_cartesian_2d(0.0..end_s, 0.0..y_max)
            .map_err(|x| e(&x))?;
        chart
            .configure_mesh()
            .x_desc("time since the rollout started (s)")
            .y_desc("degraded share judged (%)")
            .light_line_style(WHITE)
            .draw()
            .map_err(|x| e(&x))?;
        let old: Vec<_> = rec
            .state
            .log
            .iter()
            .map(|l| {
                (
                    s(l.at),
                    share(l.evidence.old.degraded, l.evidence.old.answers),
                )
            })
            .collect();
        chart
            .draw_series(old.iter().map(|p| Circle::new(*p, 4, OLD.filled())))
            .map_err(|x| e(&x))?
            .label("old version")
            .legend(|(x, y)| Circle::new((x + 6, y), 4, OLD.filled()));
        chart
            .draw_series(rec.state.log.iter().map(|l| {
                let color = match l.judgement {
                    Judgement::Advance { .. } => ADVANCE,
                    Judgement::Hold { .. } => HOLD,
                    Judgement::RollBack { .. } => BACK,
                };
                let at = (
                    s(l.at),
                    share(l.evidence.new.degraded, l.evidence.new.answers),
                );
                TriangleMarker::new(at, 7, color.filled())
            }))
            .map_err(|x| e(&x))?
            .label("new version (green advanced, orange held, red rolled back)")
            .legend(|(x, y)| TriangleMarker::new((x + 6, y), 6, NEW.filled()));
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(|x| e(&x))?;
        root.present().map_err(|x| e(&x))?;
    }
    Ok(svg)
}
