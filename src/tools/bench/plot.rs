//! Line charts as standalone SVG, written by the benchmark next to `BENCHMARKS.md` so that a
//! reader sees the curve: evenly spaced categories on x (inbox sizes, partition counts,
//! percentiles), one line per series, dashed horizontal lines for targets. Pure: a [`Chart`]
//! in, the SVG text out.

use std::fmt::Write as _;

const WIDTH: f64 = 640.0;
const HEIGHT: f64 = 360.0;
const LEFT: f64 = 78.0;
const RIGHT: f64 = 24.0;
const TOP: f64 = 44.0;
const BOTTOM: f64 = 92.0;
/// Series colours, in order (colour-blind safe: Okabe–Ito).
const COLOURS: [&str; 4] = ["#0072B2", "#E69F00", "#009E73", "#CC79A7"];
const REFERENCE_COLOUR: &str = "#D55E00";

/// One line of a chart: a value per category, `None` where nothing was measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub name: String,
    pub values: Vec<Option<f64>>,
}

/// A dashed horizontal line across the chart (a target).
#[derive(Debug, Clone, PartialEq)]
pub struct Reference {
    pub name: String,
    pub value: f64,
}

/// A line chart over categories.
#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub categories: Vec<String>,
    pub series: Vec<Series>,
    pub references: Vec<Reference>,
}

impl Chart {
    /// The largest value drawn, series and references alike.
    fn max_value(&self) -> f64 {
        self.series
            .iter()
            .flat_map(|s| s.values.iter().flatten())
            .chain(self.references.iter().map(|r| &r.value))
            .copied()
            .filter(|v| v.is_finite())
            .fold(0.0, f64::max)
    }
}

/// A round upper bound for the y axis and the step between its ticks (1, 2 or 5 × 10ⁿ,
/// four to eight steps).
pub fn nice_scale(max: f64) -> (f64, f64) {
    if max <= 0.0 || !max.is_finite() {
        return (1.0, 0.25);
    }
    let rough = max / 5.0;
    let magnitude = 10f64.powf(rough.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * magnitude)
        .find(|step| max / step <= 8.0)
        .unwrap_or(10.0 * magnitude);
    ((max / step).ceil() * step, step)
}

/// A tick label: thousands as "k", millions as "M", small values with the decimals they need.
pub fn tick_label(value: f64) -> String {
    let trim = |text: String| {
        if text.contains('.') {
            text.trim_end_matches('0').trim_end_matches('.').to_owned()
        } else {
            text
        }
    };
    if value.abs() >= 1_000_000.0 {
        format!("{}M", trim(format!("{:.1}", value / 1_000_000.0)))
    } else if value.abs() >= 1_000.0 {
        format!("{}k", trim(format!("{:.1}", value / 1_000.0)))
    } else if value.fract() == 0.0 {
        format!("{value:.0}")
    } else {
        trim(format!("{value:.2}"))
    }
}

/// Text safe inside SVG elements and attributes.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Where category `index` of `count` sits on x.
fn x_of(index: usize, count: usize) -> f64 {
    let plot = WIDTH - LEFT - RIGHT;
    if count <= 1 {
        LEFT + plot / 2.0
    } else {
        LEFT + plot * 0.06 + plot * 0.88 * index as f64 / (count - 1) as f64
    }
}

/// Where `value` sits on y, for an axis from 0 to `top`.
fn y_of(value: f64, top: f64) -> f64 {
    let plot = HEIGHT - TOP - BOTTOM;
    TOP + plot * (1.0 - (value / top).clamp(0.0, 1.0))
}

/// The chart as a standalone SVG document.
pub fn svg(chart: &Chart) -> String {
    let (top, step) = nice_scale(chart.max_value());
    let count = chart.categories.len();
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(out, "<title>{}</title>", escape(&chart.title));
    let _ = writeln!(
        out,
        r##"<rect width="{WIDTH}" height="{HEIGHT}" fill="#ffffff"/>"##
    );
    let _ = writeln!(
        out,
        r#"<text x="{}" y="22" text-anchor="middle" font-size="14" font-weight="bold">{}</text>"#,
        WIDTH / 2.0,
        escape(&chart.title)
    );

    // Grid and y ticks.
    let ticks = (top / step).round() as usize;
    for i in 0..=ticks {
        let value = step * i as f64;
        let y = y_of(value, top);
        let _ = writeln!(
            out,
            r##"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#dddddd"/>"##,
            WIDTH - RIGHT
        );
        let _ = writeln!(
            out,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
            LEFT - 6.0,
            y + 4.0,
            escape(&tick_label(value))
        );
    }
    let bottom = HEIGHT - BOTTOM;
    let _ = writeln!(
        out,
        r##"<line x1="{LEFT}" y1="{bottom}" x2="{:.1}" y2="{bottom}" stroke="#333333"/>"##,
        WIDTH - RIGHT
    );
    let _ = writeln!(
        out,
        r##"<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{bottom}" stroke="#333333"/>"##
    );
    for (i, category) in chart.categories.iter().enumerate() {
        let _ = writeln!(
            out,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            x_of(i, count),
            bottom + 18.0,
            escape(category)
        );
    }
    let _ = writeln!(
        out,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
        LEFT + (WIDTH - LEFT - RIGHT) / 2.0,
        bottom + 38.0,
        escape(&chart.x_label)
    );
    let _ = writeln!(
        out,
        r#"<text transform="translate(16 {:.1}) rotate(-90)" text-anchor="middle">{}</text>"#,
        TOP + (bottom - TOP) / 2.0,
        escape(&chart.y_label)
    );

    for reference in &chart.references {
        let y = y_of(reference.value, top);
        let _ = writeln!(
            out,
            r#"<line class="reference" x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="{REFERENCE_COLOUR}" stroke-dasharray="6 4"/>"#,
            WIDTH - RIGHT
        );
    }

    for (series, colour) in chart.series.iter().zip(COLOURS.iter().cycle()) {
        let points: Vec<(f64, f64)> = series
            .values
            .iter()
            .enumerate()
            .filter_map(|(i, v)| {
                v.filter(|v| v.is_finite())
                    .map(|v| (x_of(i, count), y_of(v, top)))
            })
            .collect();
        if points.len() > 1 {
            let path: Vec<String> = points
                .iter()
                .map(|(x, y)| format!("{x:.1},{y:.1}"))
                .collect();
            let _ = writeln!(
                out,
                r#"<polyline class="series" points="{}" fill="none" stroke="{colour}" stroke-width="2.5"/>"#,
                path.join(" ")
            );
        }
        for (x, y) in &points {
            let _ = writeln!(
                out,
                r#"<circle cx="{x:.1}" cy="{y:.1}" r="4" fill="{colour}"/>"#
            );
        }
    }

    // Legend under the axis label: series first, then references.
    let entries: Vec<(&str, &str, bool)> = chart
        .series
        .iter()
        .zip(COLOURS.iter().cycle())
        .map(|(s, c)| (s.name.as_str(), *c, false))
        .chain(
            chart
                .references
                .iter()
                .map(|r| (r.name.as_str(), REFERENCE_COLOUR, true)),
        )
        .collect();
    let mut x = LEFT;
    let y = HEIGHT - 18.0;
    for (name, colour, dashed) in entries {
        let dash = if dashed {
            r#" stroke-dasharray="6 4""#
        } else {
            ""
        };
        let _ = writeln!(
            out,
            r#"<line x1="{x:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="{colour}" stroke-width="2.5"{dash}/>"#,
            y - 4.0,
            x + 22.0,
            y - 4.0
        );
        let _ = writeln!(
            out,
            r#"<text x="{:.1}" y="{y:.1}">{}</text>"#,
            x + 28.0,
            escape(name)
        );
        x += 40.0 + 6.5 * name.chars().count() as f64;
    }
    out.push_str("</svg>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chart() -> Chart {
        Chart {
            title: "Events/s by inbox size".into(),
            x_label: "rows already in the inbox".into(),
            y_label: "events/s".into(),
            categories: vec!["empty".into(), "1 M".into(), "10 M".into()],
            series: vec![
                Series {
                    name: "end to end".into(),
                    values: vec![Some(80_000.0), Some(76_000.0), Some(61_000.0)],
                },
                Series {
                    name: "ceiling 2".into(),
                    values: vec![Some(95_000.0), None, Some(70_000.0)],
                },
            ],
            references: vec![Reference {
                name: "target: 0.7 × empty".into(),
                value: 56_000.0,
            }],
        }
    }

    #[test]
    fn the_scale_is_round_and_covers_the_largest_value() {
        assert_eq!(nice_scale(95_000.0), (100_000.0, 20_000.0));
        assert_eq!(nice_scale(7.3), (8.0, 1.0));
        assert_eq!(nice_scale(230.0), (250.0, 50.0));
        assert_eq!(nice_scale(0.0), (1.0, 0.25));
        for max in [0.3, 1.0, 9.9, 12.0, 999.0, 1e6, 3.3e7] {
            let (top, step) = nice_scale(max);
            assert!(
                top >= max && top / step <= 8.0 && top / step >= 2.0,
                "{max}"
            );
        }
    }

    #[test]
    fn tick_labels_are_short() {
        assert_eq!(tick_label(0.0), "0");
        assert_eq!(tick_label(250.0), "250");
        assert_eq!(tick_label(20_000.0), "20k");
        assert_eq!(tick_label(12_500.0), "12.5k");
        assert_eq!(tick_label(2_000_000.0), "2M");
        assert_eq!(tick_label(0.25), "0.25");
    }

    #[test]
    fn the_svg_has_a_line_per_series_a_point_per_value_and_the_target() {
        let text = svg(&chart());
        assert!(text.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
        assert!(text.trim_end().ends_with("</svg>"));
        assert_eq!(text.matches("class=\"series\"").count(), 2);
        // Five measured values; the missing one is skipped.
        assert_eq!(text.matches("<circle").count(), 5);
        assert_eq!(text.matches("class=\"reference\"").count(), 1);
        for label in [
            "empty",
            "1 M",
            "10 M",
            "end to end",
            "ceiling 2",
            "0.7 × empty",
        ] {
            assert!(text.contains(label), "{label} missing");
        }
    }

    #[test]
    fn values_map_onto_the_plot_area_with_zero_at_the_axis() {
        let top = 100_000.0;
        assert_eq!(y_of(0.0, top), HEIGHT - BOTTOM);
        assert_eq!(y_of(top, top), TOP);
        assert!(y_of(80_000.0, top) < y_of(60_000.0, top));
        assert!(x_of(0, 3) < x_of(1, 3) && x_of(1, 3) < x_of(2, 3));
        assert_eq!(x_of(0, 1), LEFT + (WIDTH - LEFT - RIGHT) / 2.0);
    }

    #[test]
    fn text_is_escaped() {
        let mut chart = chart();
        chart.title = "p99 < 200 ms & \"more\"".into();
        let text = svg(&chart);
        assert!(text.contains("p99 &lt; 200 ms &amp; &quot;more&quot;"));
        assert!(!text.contains("p99 < 200"));
    }

    #[test]
    fn a_chart_without_values_still_renders() {
        let chart = Chart {
            series: vec![Series {
                name: "nothing".into(),
                values: vec![None, None],
            }],
            references: Vec::new(),
            ..chart()
        };
        let text = svg(&chart);
        assert_eq!(text.matches("<circle").count(), 0);
        assert!(text.contains("</svg>"));
    }
}
