//! A one-line progress bar on stderr while `verify` reads, drawn only on a terminal.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

const REDRAW: Duration = Duration::from_millis(200);
const WIDTH: usize = 30;

/// Draws [`bar`] at most every 200 ms, and only when stderr is a terminal.
pub struct Progress {
    visible: bool,
    started: Instant,
    drawn: Option<Instant>,
}

impl Progress {
    /// Visible when stderr is a terminal: logs and pipes get no carriage returns.
    pub fn on_terminal() -> Progress {
        Progress {
            visible: std::io::stderr().is_terminal(),
            started: Instant::now(),
            drawn: None,
        }
    }

    pub fn show(&mut self, done: i64, total: i64, missing: u64) {
        if !self.visible || self.drawn.is_some_and(|at| at.elapsed() < REDRAW) {
            return;
        }
        self.drawn = Some(Instant::now());
        eprint!("\r{}", bar(done, total, missing, self.started.elapsed()));
        let _ = std::io::stderr().flush();
    }

    pub fn finish(&mut self, done: i64, total: i64, missing: u64) {
        if self.visible {
            eprintln!("\r{}", bar(done, total, missing, self.started.elapsed()));
        }
    }
}

/// `[#########---------------------]  31%  4500/14500 offsets  2250/s  missing 12` (pure).
pub fn bar(done: i64, total: i64, missing: u64, elapsed: Duration) -> String {
    let share = if total > 0 {
        (done as f64 / total as f64).clamp(0.0, 1.0)
    } else {
        1.0
    };
    let filled = (share * WIDTH as f64).round() as usize;
    let rate = done.max(0) as f64 / elapsed.as_secs_f64().max(1e-3);
    format!(
        "[{}{}] {:>3.0}%  {done}/{total} offsets  {rate:.0}/s  missing {missing}",
        "#".repeat(filled),
        "-".repeat(WIDTH - filled),
        share * 100.0,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bar_fills_with_the_offsets_read_and_never_overflows() {
        let half = bar(50, 100, 3, Duration::from_secs(1));
        assert!(half.starts_with(&format!("[{}{}]", "#".repeat(15), "-".repeat(15))));
        assert!(
            half.contains(" 50%  50/100 offsets  50/s  missing 3"),
            "{half}"
        );
        let over = bar(150, 100, 0, Duration::from_secs(1));
        assert!(
            over.starts_with(&format!("[{}]", "#".repeat(WIDTH))),
            "{over}"
        );
        let empty_topic = bar(0, 0, 0, Duration::ZERO);
        assert!(empty_topic.contains("100%"), "{empty_topic}");
    }
}
