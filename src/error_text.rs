//! Renders an error with its whole `source()` chain on one line, for logs, the admin page and
//! stored messages (`tokio_postgres::Error` alone displays only "db error").

use std::error::Error;
use std::fmt::Write;

/// `error: cause: cause-of-cause`, skipping a cause whose text the previous one already ends with.
pub fn chain(error: &(dyn Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.ends_with(&cause_text) {
            let _ = write!(text, ": {cause_text}");
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn the_chain_names_every_cause() {
        let error = Outer(std::io::Error::other("disk on fire"));
        assert_eq!(chain(&error), "outer: disk on fire");
    }
}
