//! The replay's picture (`--plot FILE.svg`), in the manner of the drill's timeline: per time
//! window, the share of answers that were not live and the model calls a second, for each
//! column — as logged, the logged policy replayed, the candidate in its best and worst case
//! — with the incidents shaded. SVG only, text laid out by plotters' built-in estimate.

use plotters::prelude::*;

use super::figures::{Figures, Window};
use super::Replay;

const LOGGED: RGBColor = RGBColor(20, 20, 20);
const REPLAYED: RGBColor = RGBColor(30, 110, 200);
const BEST: RGBColor = RGBColor(230, 140, 20);
const WORST: RGBColor = RGBColor(200, 30, 30);
const INCIDENT: RGBColor = RGBColor(255, 215, 215);

fn not_live(w: &Window) -> f64 {
    if w.answers == 0 {
        0.0
    } else {
        (w.answers - w.live) as f64 * 100.0 / w.answers as f64
    }
}

/// Renders the SVG text.
pub fn render(r: &Replay, title: &str) -> Result<String, String> {
    let e = |e: &dyn std::fmt::Display| e.to_string();
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (1100, 700)).into_drawing_area();
        root.fill(&WHITE).map_err(|x| e(&x))?;
        let (top, bottom) = root.split_vertically(420);
        let end_s = (r.span_ms as f64 / 1000.0).max(1.0) * 1.01;
        let w_s = r.window_ms as f64 / 1000.0;
        let series: Vec<(String, RGBColor, &Figures)> = vec![
            ("as logged".into(), LOGGED, &r.as_logged),
            (
                format!("logged policy replayed ({})", name(&r.logged_policy.name)),
                REPLAYED,
                &r.logged_policy.worst,
            ),
            (
                format!("candidate, best case ({})", name(&r.candidate.name)),
                BEST,
                &r.candidate.best,
            ),
            (
                format!("candidate, worst case ({})", name(&r.candidate.name)),
                WORST,
                &r.candidate.worst,
            ),
        ];
        let calls_max = series
            .iter()
            .flat_map(|(_, _, f)| f.windows.iter().map(|w| w.model_calls as f64 / w_s))
            .fold(1.0, f64::max)
            * 1.15;
        for (area, y_max, y_desc, caption, calls) in [
            (&top, 105.0, "answers not live (%)", title, false),
            (&bottom, calls_max, "model calls / s", "", true),
        ] {
            let mut chart = ChartBuilder::on(area)
                .caption(caption, ("sans-serif", 18))
                .margin(12)
                .x_label_area_size(36)
                .y_label_area_size(56)
                .build_cartesian_2d(0.0..end_s, 0.0..y_max)
                .map_err(|x| e(&x))?;
            chart
                .configure_mesh()
                .x_desc("time since the first request (s)")
                .y_desc(y_desc)
                .light_line_style(WHITE)
                .draw()
                .map_err(|x| e(&x))?;
            chart
                .draw_series(r.incidents.iter().map(|i| {
                    let to = i.first_good_ms.unwrap_or(i.last_bad_ms).max(i.last_bad_ms);
                    Rectangle::new(
                        [
                            (i.onset_ms as f64 / 1000.0, 0.0),
                            (to as f64 / 1000.0, y_max),
                        ],
                        INCIDENT.filled(),
                    )
                }))
                .map_err(|x| e(&x))?
                .label("incident (until the first good call after it)")
                .legend(|(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], INCIDENT.filled()));
            for (label, color, f) in &series {
                let points: Vec<(f64, f64)> = f
                    .windows
                    .iter()
                    .map(|w| {
                        let y = if calls {
                            w.model_calls as f64 / w_s
                        } else {
                            not_live(w)
                        };
                        (w.from_ms as f64 / 1000.0 + w_s / 2.0, y)
                    })
                    .collect();
                let color = *color;
                chart
                    .draw_series(LineSeries::new(points, color.stroke_width(2)))
                    .map_err(|x| e(&x))?
                    .label(label.clone())
                    .legend(move |(x, y)| {
                        PathElement::new([(x, y), (x + 12, y)], color.stroke_width(2))
                    });
            }
            if !calls {
                chart
                    .configure_series_labels()
                    .position(SeriesLabelPosition::UpperRight)
                    .background_style(WHITE.mix(0.85))
                    .border_style(BLACK)
                    .label_font(("sans-serif", 12))
                    .draw()
                    .map_err(|x| e(&x))?;
            }
        }
        root.present().map_err(|x| e(&x))?;
    }
    Ok(svg)
}

fn name(path: &str) -> String {
    std::path::Path::new(path)
        .file_name()
        .map_or(path.to_string(), |f| f.to_string_lossy().into_owned())
}
