//! The outcome of processing one delivered record, and which outcomes count as resolved.

use serde::Serialize;

/// What became of one delivered record.
///
/// `Applied`, `AlreadyApplied` and `DeadLettered` are *resolved*: the Kafka offset may move past
/// the record (SPEC §5). `Unknown` is not: the pair may or may not be stored, so the record is
/// retried and blocks the committed offset until it resolves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[derive(strum::IntoStaticStr, strum::Display, strum::VariantArray)]
#[strum(serialize_all = "snake_case")]
pub enum Outcome {
    /// The inbox marker and the history row were committed by this delivery.
    Applied,
    /// The event id was already committed together with its history row.
    AlreadyApplied,
    /// The record can never succeed and was stored in `dead_letters`.
    DeadLettered,
    /// The outcome is not known: an error happened somewhere in the transaction.
    Unknown,
}

impl Outcome {
    /// Every outcome, in a stable order (for metrics and tables).
    pub const ALL: &'static [Outcome] = <Self as strum::VariantArray>::VARIANTS;

    /// Whether the committed offset may move past a record with this outcome.
    pub fn is_resolved(self) -> bool {
        !matches!(self, Outcome::Unknown)
    }

    /// A stable lowercase name, used as a metrics label and in the JSON API.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// Why a record's outcome is `Unknown`: how it is retried, and which remedy applies.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, strum::IntoStaticStr, strum::VariantArray,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum UnknownCause {
    /// The database could not be reached, the connection broke, or the work timed out: the
    /// records are not the cause, and they are retried together once it answers.
    Unavailable,
    /// The database refused the work with an error that may pass, or that a batch's other
    /// records may have caused (a lock, a missing table, a failed COMMIT): retried alone.
    Refused,
    /// The database rejected this record for good, and the guard against mass dead-lettering
    /// kept it here instead of in `dead_letters`: too many records in a row were rejected.
    Rejected,
}

impl UnknownCause {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_unknown_is_unresolved() {
        let unresolved: Vec<_> = Outcome::ALL
            .iter()
            .copied()
            .filter(|o| !o.is_resolved())
            .collect();
        assert_eq!(unresolved, vec![Outcome::Unknown]);
    }
}
