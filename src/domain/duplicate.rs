//! Why a delivery was a duplicate: told apart after the inbox said `AlreadyApplied`.

use serde::Serialize;

/// Why a record is a duplicate (classified after the inbox said `AlreadyApplied`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
#[derive(strum::IntoStaticStr, strum::VariantArray)]
#[strum(serialize_all = "snake_case")]
pub enum DuplicateCause {
    /// The same partition and offset again: the consumer replayed it.
    Redelivery,
    /// The same event at another offset with the same payload: the producer published twice.
    Republish,
    /// The same event id at another offset with a different payload: a producer bug.
    Conflicting,
    /// The classification query failed; the outcome stands.
    Unclassified,
}

impl DuplicateCause {
    /// A stable snake_case name, used as a metrics label.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}
