//! The drill's timeline picture (`timeline.svg`): every request as a dot at (arrival,
//! latency) coloured by what answered it, the fault window shaded, the budget as a line,
//! the breaker's mode as a band along the top, the host's stalls the witness saw as dark
//! bars rising from the axis (a bar's height is the stall's length on the latency scale, so
//! an answer it made late stands beside a bar of its lateness), and every answer a check
//! blames ringed. SVG only, text laid out by plotters' built-in estimate: no system fonts,
//! nothing to install.

use plotters::prelude::*;

use super::observe::{mode_kind, Observed, SeenTransition};
use crate::witness::Stall;
use understudy_core::breaker::Mode;

const ORIGIN: RGBColor = RGBColor(46, 139, 87);
const ERROR: RGBColor = RGBColor(200, 30, 30);
const TIERS: [RGBColor; 5] = [
    RGBColor(30, 110, 200),
    RGBColor(230, 140, 20),
    RGBColor(140, 70, 170),
    RGBColor(0, 160, 170),
    RGBColor(120, 120, 120),
];
const FAULT: RGBColor = RGBColor(255, 215, 215);
const STALL: RGBColor = RGBColor(60, 60, 60);
/// Roughly the most dots drawn (see the stride below).
const MAX_POINTS: usize = 6000;

fn group_of(o: &Observed) -> String {
    if o.is_live() {
        "origin (live)".to_string()
    } else if o.status == 200 && o.is_degraded() {
        o.headers.tier.clone().unwrap_or_default()
    } else {
        "error / no answer".to_string()
    }
}

fn mode_color(m: Option<Mode>) -> RGBColor {
    match m {
        Some(Mode::Healthy) => RGBColor(160, 215, 160),
        Some(Mode::Open) => RGBColor(235, 120, 120),
        Some(Mode::Probing) => RGBColor(245, 200, 90),
        None => RGBColor(210, 210, 210),
    }
}

pub struct Picture<'a> {
    pub title: String,
    pub obs: &'a [Observed],
    /// Tier names in cascade order (colours follow it).
    pub tiers: Vec<String>,
    /// The windows in which the model misbehaves, ms (shaded).
    pub faults: Vec<(f64, f64)>,
    pub transitions: &'a [SeenTransition],
    /// The mode before the first transition (`None`: not exposed).
    pub initial_mode: Option<&'static str>,
    pub budget_ms: f64,
    /// The host's stalls the witness saw.
    pub stalls: &'a [Stall],
    /// The requests a check blames on the edge.
    pub blamed: Vec<u64>,
}

/// Renders the SVG text.
pub fn render(p: &Picture<'_>) -> Result<String, String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (1100, 560)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let end_s = p
            .obs
            .iter()
            .map(|o| (o.sent_ms + o.latency_ms) / 1000.0)
            .fold(1.0, f64::max)
            * 1.01;
        let mut lat: Vec<f64> = p
            .obs
            .iter()
            .filter(|o| o.status != 0)
            .map(|o| o.latency_ms)
            .collect();
        lat.sort_by(f64::total_cmp);
        let p999 = super::check::percentile(&lat, 0.999);
        let y_max = (p999.max(p.budget_ms) * 1.25).max(10.0);
        let band = y_max * 0.94;
        let mut chart = ChartBuilder::on(&root)
            .caption(&p.title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(56)
            .build_cartesian_2d(0.0..end_s, 0.0..y_max)
            .map_err(|e| e.to_string())?;
        chart
            .configure_mesh()
            .x_desc("time since the first request (s)")
            .y_desc("latency (ms)")
            .light_line_style(WHITE)
            .draw()
            .map_err(|e| e.to_string())?;
        if !p.faults.is_empty() {
            chart
                .draw_series(p.faults.iter().map(|(a, b)| {
                    Rectangle::new([(a / 1000.0, 0.0), (b / 1000.0, band)], FAULT.filled())
                }))
                .map_err(|e| e.to_string())?
                .label("model faulty")
                .legend(|(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], FAULT.filled()));
        }
        // The breaker's mode, one segment per transition.
        let mut segments = Vec::new();
        let mut from_s = 0.0;
        let mut mode = p.initial_mode.and_then(mode_kind);
        let known = p.initial_mode.is_some() || !p.transitions.is_empty();
        for t in p.transitions {
            if mode.is_none() && known {
                mode = mode_kind(t.from);
            }
            segments.push((from_s, t.at_ms / 1000.0, mode));
            from_s = t.at_ms / 1000.0;
            mode = mode_kind(t.to);
        }
        segments.push((from_s, end_s, mode));
        chart
            .draw_series(segments.iter().map(|(a, b, m)| {
                Rectangle::new([(*a, band), (*b, y_max)], mode_color(*m).filled())
            }))
            .map_err(|e| e.to_string())?;
        for (label, m) in [
            ("breaker healthy", Some(Mode::Healthy)),
            ("breaker degraded", Some(Mode::Open)),
            ("breaker probing", Some(Mode::Probing)),
        ] {
            chart
                .draw_series(std::iter::empty::<Rectangle<(f64, f64)>>())
                .map_err(|e| e.to_string())?
                .label(label)
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 12, y + 5)], mode_color(m).filled())
                });
        }
        if !known {
            chart
                .draw_series(std::iter::once(Text::new(
                    "breaker mode: not exposed by the edge",
                    (end_s * 0.01, y_max * 0.985),
                    ("sans-serif", 12),
                )))
                .map_err(|e| e.to_string())?;
        }
        chart
            .draw_series(LineSeries::new(
                [(0.0, p.budget_ms), (end_s, p.budget_ms)],
                BLACK.stroke_width(1),
            ))
            .map_err(|e| e.to_string())?
            .label(format!("budget {} ms", p.budget_ms))
            .legend(|(x, y)| PathElement::new([(x, y), (x + 12, y)], BLACK));
        let mut groups: Vec<(String, RGBColor)> = vec![("origin (live)".into(), ORIGIN)];
        for (n, t) in p.tiers.iter().enumerate() {
            groups.push((t.clone(), TIERS[n % TIERS.len()]));
        }
        groups.push(("error / no answer".into(), ERROR));
        for (name, color) in groups {
            // Large runs keep every live answer, error and answer over budget, and a
            // sample of the ordinary degraded ones, so the picture stays a few hundred kB.
            let stride = (p.obs.len() / MAX_POINTS).max(1);
            let points: Vec<(f64, f64)> = p
                .obs
                .iter()
                .filter(|o| {
                    (o.index as usize).is_multiple_of(stride)
                        || o.is_live()
                        || o.status != 200
                        || o.latency_ms > p.budget_ms
                })
                .filter(|o| group_of(o) == name)
                .map(|o| (o.sent_ms / 1000.0, o.latency_ms.min(band)))
                .collect();
            if points.is_empty() {
                continue;
            }
            let count = p.obs.iter().filter(|o| group_of(o) == name).count();
            chart
                .draw_series(
                    points
                        .into_iter()
                        .map(|xy| Circle::new(xy, 2, color.filled())),
                )
                .map_err(|e| e.to_string())?
                .label(format!("{name} ({count})"))
                .legend(move |(x, y)| Circle::new((x + 6, y), 4, color.filled()));
        }
        // The witness: one bar per stall, at least a pixel wide.
        let px_s = end_s / 1000.0;
        chart
            .draw_series(p.stalls.iter().map(|st| {
                let (a, b) = (
                    st.from_ms / 1000.0,
                    (st.to_ms / 1000.0).max(st.from_ms / 1000.0 + px_s),
                );
                Rectangle::new([(a, 0.0), (b, st.ms().min(band))], STALL.filled())
            }))
            .map_err(|e| e.to_string())?
            .label(format!(
                "host stalls seen by the witness ({}, height = ms held)",
                p.stalls.len()
            ))
            .legend(|(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], STALL.filled()));
        let blamed: Vec<(f64, f64)> = p
            .obs
            .iter()
            .filter(|o| p.blamed.contains(&o.index))
            .map(|o| (o.sent_ms / 1000.0, o.latency_ms.min(band)))
            .collect();
        if !blamed.is_empty() {
            let n = blamed.len();
            chart
                .draw_series(
                    blamed
                        .into_iter()
                        .map(|xy| Circle::new(xy, 5, BLACK.stroke_width(1))),
                )
                .map_err(|e| e.to_string())?
                .label(format!("blamed on the edge ({n})"))
                .legend(|(x, y)| Circle::new((x + 6, y), 5, BLACK.stroke_width(1)));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font(("sans-serif", 12))
            .draw()
            .map_err(|e| e.to_string())?;
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::super::observe::Disclosed;
    use super::*;

    #[test]
    fn the_timeline_is_an_svg_with_its_legend() {
        let obs: Vec<Observed> = (0..20u64)
            .map(|i| Observed {
                index: i,
                sent_ms: i as f64 * 100.0,
                scheduled_ms: i as f64 * 100.0,
                latency_ms: if i < 10 { 20.0 } else { 47.0 },
                status: 200,
                headers: Disclosed {
                    source: Some(if i < 10 { "origin" } else { "fallback" }.into()),
                    degraded: Some((i >= 10).to_string()),
                    tier: (i >= 10).then(|| "curated".into()),
                    ..Disclosed::default()
                },
                ..Observed::default()
            })
            .collect();
        let tr = [SeenTransition {
            at_ms: 1000.0,
            from: "PRIMARY_HEALTHY",
            to: "DEGRADED_FALLBACK",
            evidence: None,
        }];
        let svg = render(&Picture {
            title: "drill".into(),
            obs: &obs,
            tiers: vec!["user".into(), "curated".into()],
            faults: vec![(950.0, 2000.0)],
            transitions: &tr,
            initial_mode: Some("PRIMARY_HEALTHY"),
            budget_ms: 60.0,
            stalls: &[Stall {
                from_ms: 1200.0,
                to_ms: 1350.0,
                seen_by: vec!["workerd stopped".into()],
            }],
            blamed: vec![12],
        })
        .expect("renders");
        assert!(svg.starts_with("<svg"), "{}", &svg[..40]);
        for label in [
            "origin (live) (10)",
            "curated (10)",
            "model faulty",
            "breaker degraded",
            "budget 60 ms",
            "host stalls seen by the witness (1, height = ms held)",
            "blamed on the edge (1)",
        ] {
            assert!(svg.contains(label), "missing {label}");
        }
    }
}
