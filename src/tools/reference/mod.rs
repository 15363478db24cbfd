//! The reference pages of `docs/` that are generated from the code, so that they cannot drift
//! from it: `docs/configuration.md` from the command line's definitions and `docs/metrics.md`
//! from the metrics registry and the alert rules. The hidden command `docs <page>` prints one;
//! `scripts/docs-generate` writes both, and `tests/it/reference.rs` fails while a page differs.

pub mod alert_rules;
pub mod configuration;
pub mod metrics;

use clap::{Args, ValueEnum};

/// Options of the hidden `docs` command.
#[derive(Debug, Clone, Args)]
pub struct DocsArgs {
    /// The page to print.
    #[arg(value_enum)]
    pub page: Page,
}

/// A generated page of `docs/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Page {
    /// `docs/configuration.md`: every flag and environment variable of every command.
    Configuration,
    /// `docs/metrics.md`: every metric and alert rule.
    Metrics,
}

impl Page {
    /// Where the page lives in the repository.
    pub fn path(self) -> &'static str {
        match self {
            Page::Configuration => "docs/configuration.md",
            Page::Metrics => "docs/metrics.md",
        }
    }

    /// The page's text as it must be in the repository.
    pub fn render(self) -> Result<String, alert_rules::RulesError> {
        match self {
            Page::Configuration => Ok(configuration::page()),
            Page::Metrics => metrics::page(),
        }
    }
}

/// Text for a cell of a markdown table: one line, `|` escaped.
pub(crate) fn cell(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}

#[cfg(test)]
mod tests {
    use super::cell;

    #[test]
    fn a_cell_is_one_line_with_its_bars_escaped() {
        assert_eq!(cell("a\n  b | c"), "a b \\| c");
    }
}
