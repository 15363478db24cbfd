//! Reading the service's metrics as Prometheus scrapes them (`/metrics`, or the in-process
//! `app.handle.metrics.render()`): the value of a series from the exposition's text.

use crate::support::app::TestApp;

/// The value of `series` (a metric name with its labels as the exposition writes them, e.g.
/// `history_guard_engaged{partition="0"}`, or a name alone for a series without labels).
pub fn value(exposition: &str, series: &str) -> Option<f64> {
    exposition
        .lines()
        .find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
}

/// The values of the lines that start with `prefix` (a metric name, or a name and `{`) and
/// hold each of `labels` (`name="value"`), in exposition order.
pub fn values<'a>(
    exposition: &'a str,
    prefix: &'a str,
    labels: &'a [&str],
) -> impl Iterator<Item = f64> + 'a {
    exposition
        .lines()
        .filter(move |line| line.starts_with(prefix))
        .filter(move |line| labels.iter().all(|label| line.contains(label)))
        .map(|line| {
            let value = line.rsplit(' ').next().unwrap();
            value
                .parse::<f64>()
                .unwrap_or_else(|_| panic!("a metric line ending in a value: {line}"))
        })
}

/// The sum of [`values`]: a counter over all its series of those labels.
pub fn sum(exposition: &str, prefix: &str, labels: &[&str]) -> f64 {
    values(exposition, prefix, labels).sum()
}

/// The value of `series` as the in-process service `app` exports it.
pub fn of(app: &TestApp, series: &str) -> Option<f64> {
    value(&app.handle.metrics.render(), series)
}
