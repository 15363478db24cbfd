//! The report's pictures: which numbers each plot shows, as [`Chart`] values (pure), and the
//! files they are written to next to `BENCHMARKS.md`.

use super::plot::{Chart, Reference, Series};
use super::report::{CaseResult, Report, rows};
use super::targets::{INBOX_GROWTH, P99_OVER_COMMIT_MS, PARTITION_GROWTH, p99_goal_ms};

/// A chart and the file name it is written under.
pub struct Figure {
    pub file: &'static str,
    pub alt: String,
    pub chart: Chart,
}

/// Every figure the report has data for.
pub fn figures(report: &Report) -> Vec<Figure> {
    let mut figures = Vec::new();
    let anchor_rate = report.anchor().map(|a| a.run.rate);
    let inbox = report.by_inbox();
    if inbox.len() > 1 {
        figures.push(Figure {
            file: "inbox-size.svg",
            alt: "events/s against rows already in the inbox".into(),
            chart: throughput_chart(
                "Events/s as the inbox grows",
                "rows already in the inbox and history tables",
                &inbox,
                |c| {
                    if c.case.inbox_rows == 0 {
                        "empty".into()
                    } else {
                        rows(c.case.inbox_rows)
                    }
                },
                anchor_rate.map(|r| Reference {
                    name: format!("target: {INBOX_GROWTH} × empty"),
                    value: r * INBOX_GROWTH,
                }),
            ),
        });
    }
    if let Some(chart) = ids_chart(report) {
        figures.push(Figure {
            file: "inbox-ids.svg",
            alt: "events/s against rows already in the inbox, ordered and random (UUIDv4) ids"
                .into(),
            chart,
        });
    }
    let partitions = report.by_partitions();
    if partitions.len() > 1 {
        figures.push(Figure {
            file: "partitions.svg",
            alt: "events/s against partitions on one member".into(),
            chart: throughput_chart(
                "Events/s by partitions on one member",
                "partitions assigned to the member",
                &partitions,
                |c| c.case.partitions.to_string(),
                anchor_rate.map(|r| Reference {
                    name: format!(
                        "target: {PARTITION_GROWTH} × {} partitions",
                        report.setup.partitions
                    ),
                    value: r * PARTITION_GROWTH,
                }),
            ),
        });
    }
    let mut duplicates = report.by_duplicates();
    if let Some(replay) = report.replay() {
        duplicates.push(replay);
    }
    if duplicates.len() > 1 {
        figures.push(Figure {
            file: "duplicates.svg",
            alt: "events/s against the share of duplicates".into(),
            chart: throughput_chart(
                "Events/s by share of duplicates",
                "share of records that are duplicates",
                &duplicates,
                |c| {
                    if c.case.replay {
                        "100 % (replay)".into()
                    } else {
                        format!("{:.0} %", c.case.duplicates * 100.0)
                    }
                },
                None,
            ),
        });
    }
    if let Some(latency) = &report.latency {
        let points = latency.latency.points();
        figures.push(Figure {
            file: "latency.svg",
            alt: "produce-to-commit latency percentiles".into(),
            chart: Chart {
                title: format!(
                    "Produce-to-commit latency at {} events/s",
                    super::report::whole(latency.latency.offered_rate)
                ),
                x_label: "percentile".into(),
                y_label: "milliseconds".into(),
                categories: points
                    .iter()
                    .map(|(label, _)| (*label).to_owned())
                    .collect(),
                series: vec![Series {
                    name: "produce to commit".into(),
                    values: points
                        .iter()
                        .map(|(_, d)| Some(d.as_secs_f64() * 1000.0))
                        .collect(),
                }],
                references: vec![Reference {
                    name: format!(
                        "target for p99: commit interval ({} ms) + {} ms",
                        report.setup.commit_interval.as_millis(),
                        P99_OVER_COMMIT_MS
                    ),
                    value: p99_goal_ms(report),
                }],
            },
        });
    }
    figures
}

/// Events/s against inbox rows, ordered ids beside random ones, each with its ceiling 2; when
/// random ids were measured.
fn ids_chart(report: &Report) -> Option<Chart> {
    let ordered = report.by_inbox();
    let random = report.by_inbox_random();
    if !random.iter().any(|c| c.case.inbox_rows > 0) {
        return None;
    }
    let mut sizes: Vec<u64> = ordered
        .iter()
        .chain(&random)
        .map(|c| c.case.inbox_rows)
        .collect();
    sizes.sort_unstable();
    sizes.dedup();
    let at = |cases: &[&CaseResult], value: &dyn Fn(&CaseResult) -> Option<f64>| {
        sizes
            .iter()
            .map(|size| {
                cases
                    .iter()
                    .find(|c| c.case.inbox_rows == *size)
                    .and_then(|c| value(c))
            })
            .collect::<Vec<_>>()
    };
    let run = |c: &CaseResult| Some(c.run.rate);
    let ceiling = |c: &CaseResult| c.ceiling_rate();
    Some(Chart {
        title: "Events/s as the inbox grows, ordered and random ids".into(),
        x_label: "rows already in the inbox and history tables".into(),
        y_label: "events/s".into(),
        categories: sizes
            .iter()
            .map(|s| if *s == 0 { "empty".into() } else { rows(*s) })
            .collect(),
        series: vec![
            Series {
                name: "ordered ids".into(),
                values: at(&ordered, &run),
            },
            Series {
                name: "ordered, ceiling 2".into(),
                values: at(&ordered, &ceiling),
            },
            Series {
                name: "UUIDv4 ids".into(),
                values: at(&random, &run),
            },
            Series {
                name: "UUIDv4, ceiling 2".into(),
                values: at(&random, &ceiling),
            },
        ],
        references: Vec::new(),
    })
}

fn throughput_chart(
    title: &str,
    x_label: &str,
    cases: &[&CaseResult],
    category: impl Fn(&CaseResult) -> String,
    target: Option<Reference>,
) -> Chart {
    Chart {
        title: title.into(),
        x_label: x_label.into(),
        y_label: "events/s".into(),
        categories: cases.iter().map(|c| category(c)).collect(),
        series: vec![
            Series {
                name: "end to end".into(),
                values: cases.iter().map(|c| Some(c.run.rate)).collect(),
            },
            Series {
                name: "ceiling 2 (database alone)".into(),
                values: cases.iter().map(|c| c.ceiling_rate()).collect(),
            },
        ],
        references: target.into_iter().collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::report::tests::report;
    use super::*;

    #[test]
    fn every_growth_dimension_and_the_latency_get_a_figure() {
        let figures = figures(&report());
        let files: Vec<&str> = figures.iter().map(|f| f.file).collect();
        assert_eq!(
            files,
            [
                "inbox-size.svg",
                "inbox-ids.svg",
                "partitions.svg",
                "duplicates.svg",
                "latency.svg"
            ]
        );
        let inbox = &figures[0].chart;
        assert_eq!(inbox.categories, ["empty", "1 M", "10 M"]);
        assert_eq!(
            inbox.series[0].values,
            [Some(90_000.0), Some(85_000.0), Some(70_000.0)]
        );
        assert_eq!(inbox.references[0].value, 90_000.0 * 0.7);
        let ids = &figures[1].chart;
        assert_eq!(ids.categories, ["empty", "1 M", "10 M"]);
        assert_eq!(ids.series[2].values, [Some(88_000.0), None, Some(60_000.0)]);
        assert_eq!(
            ids.series[1].values,
            [Some(100_000.0), Some(95_000.0), Some(80_000.0)]
        );
        let duplicates = &figures[3].chart;
        assert_eq!(
            duplicates.categories,
            ["0 %", "10 %", "50 %", "100 % (replay)"]
        );
        let latency = &figures[4].chart;
        assert_eq!(latency.categories, ["p50", "p90", "p99", "p99.9", "max"]);
        assert_eq!(latency.references[0].value, 150.0);
    }

    #[test]
    fn a_dimension_measured_at_one_point_only_has_no_figure() {
        let mut report = report();
        report.cases.retain(|c| c.case.inbox_rows == 0);
        report.latency = None;
        let files: Vec<&str> = figures(&report).iter().map(|f| f.file).collect();
        assert_eq!(files, ["partitions.svg", "duplicates.svg"]);
    }
}
