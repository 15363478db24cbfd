//! The one renderer of errors, used at the edges (logs, stored messages, pages, the binary).
//!
//! The convention inside this crate: an error's `Display` says what failed at its own level and
//! never repeats its cause; the cause is its `source()`. This module joins the chain into one
//! line: `what failed: why: why of that`. Some foreign errors also print their cause in their
//! own `Display` (rdkafka's, io wrappers); a cause whose text the line already ends with is
//! therefore not repeated.

use std::error::Error;
use std::fmt;

/// `error: cause: cause-of-cause`, on one line.
pub fn chain(error: &(dyn Error + 'static)) -> String {
    Chain(error).to_string()
}

/// Displays an error with its causes (see [`chain`]); for `tracing` fields: `error = %Chain(&e)`.
pub struct Chain<'a>(pub &'a (dyn Error + 'static));

impl fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut text = self.0.to_string();
        let mut source = self.0.source();
        while let Some(cause) = source {
            let cause_text = cause.to_string();
            if !text.ends_with(&cause_text) {
                text.push_str(": ");
                text.push_str(&cause_text);
            }
            source = cause.source();
        }
        f.write_str(&text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer(#[source] std::io::Error);

    #[derive(Debug, thiserror::Error)]
    #[error("top")]
    struct Top(#[source] Outer);

    /// A foreign error that prints its cause itself, as tokio-postgres does.
    #[derive(Debug)]
    struct Chatty(std::io::Error);

    impl fmt::Display for Chatty {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "chatty: {}", self.0)
        }
    }

    impl Error for Chatty {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn the_chain_names_every_cause_once() {
        let error = Top(Outer(std::io::Error::other("disk on fire")));
        assert_eq!(chain(&error), "top: outer: disk on fire");
        let chatty = Chatty(std::io::Error::other("disk on fire"));
        assert_eq!(chain(&chatty), "chatty: disk on fire");
        assert_eq!(Chain(&chatty).to_string(), "chatty: disk on fire");
    }
}
