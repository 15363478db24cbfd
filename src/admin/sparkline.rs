//! A tiny inline SVG of a partition's recent lag and throughput (pure; no script needed).

use std::fmt::Write;

use crate::actors::monitor::TrendPoint;

const WIDTH: f64 = 120.0;
const HEIGHT: f64 = 28.0;

/// An SVG with two lines: lag (red) and records per second (blue), each scaled to its own max.
/// Only numbers we computed go into it, so it is safe to embed unescaped.
pub fn render(points: &[TrendPoint]) -> String {
    let mut svg = format!(
        r#"<svg class="spark" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="lag and throughput trend">"#
    );
    if points.len() >= 2 {
        let lag: Vec<f64> = points.iter().map(|p| p.lag as f64).collect();
        let rate: Vec<f64> = points.iter().map(|p| p.per_second).collect();
        let _ = write!(
            svg,
            r##"<polyline fill="none" stroke="#2563eb" stroke-width="1.5" points="{}"/>"##,
            polyline(&rate)
        );
        let _ = write!(
            svg,
            r##"<polyline fill="none" stroke="#dc2626" stroke-width="1.5" points="{}"/>"##,
            polyline(&lag)
        );
    }
    svg.push_str("</svg>");
    svg
}

fn polyline(values: &[f64]) -> String {
    let max = values.iter().copied().fold(0.0_f64, f64::max);
    let step = WIDTH / (values.len().saturating_sub(1).max(1)) as f64;
    values
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let y = if max > 0.0 {
                HEIGHT - 1.0 - (v / max) * (HEIGHT - 2.0)
            } else {
                HEIGHT - 1.0
            };
            format!("{:.1},{:.1}", i as f64 * step, y)
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(lag: i64, per_second: f64) -> TrendPoint {
        TrendPoint {
            at: chrono::Utc::now(),
            lag,
            per_second,
        }
    }

    #[test]
    fn a_single_point_draws_an_empty_frame() {
        let svg = render(&[point(3, 1.0)]);
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
        assert!(!svg.contains("polyline"));
    }

    #[test]
    fn the_lines_span_the_width_and_stay_inside_the_height() {
        let svg = render(&[point(0, 0.0), point(10, 5.0), point(5, 10.0)]);
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains("0.0,27.0"), "{svg}");
        assert!(svg.contains("120.0,"), "{svg}");
        assert!(
            !svg.contains("NaN") && !svg.contains(",-") && !svg.contains(" -"),
            "{svg}"
        );
    }
}
