//! What an operator reads about a partition's state: the words of
//! [`StateReason`], on the pages and, as the same string, in the JSON API's `state_reason`.

use std::fmt;

use serde::{Serialize, Serializer};

use crate::actors::status::StateReason;

impl fmt::Display for StateReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StateReason::Stuck(explained) => f.write_str(explained),
            StateReason::PausedByOperator => f.write_str("paused by an operator"),
            StateReason::BacklogAtBound => {
                f.write_str("Unknown backlog at its bound: new records wait")
            }
        }
    }
}

/// The JSON API says what the pages say.
impl Serialize for StateReason {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_api_says_what_the_page_says() {
        for reason in [
            StateReason::Stuck("held at offset 7: nothing after it is read".into()),
            StateReason::PausedByOperator,
            StateReason::BacklogAtBound,
        ] {
            assert_eq!(
                serde_json::to_value(&reason).unwrap(),
                serde_json::Value::String(reason.to_string())
            );
        }
        assert_eq!(
            StateReason::PausedByOperator.to_string(),
            "paused by an operator"
        );
    }
}
