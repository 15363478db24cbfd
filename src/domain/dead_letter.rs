//! A record that can never succeed, on its way to the `dead_letters` table, and what became of
//! it there.

use super::Rejection;

/// A malformed record on its way to the table.
#[derive(Debug, Clone)]
pub struct DeadLetter {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub key: Option<Vec<u8>>,
    pub payload: Option<Vec<u8>>,
    pub rejection: Rejection,
}

/// What became of a dead letter (migration V6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[derive(strum::IntoStaticStr, strum::EnumString, strum::Display, strum::VariantArray)]
#[strum(serialize_all = "snake_case")]
pub enum LetterState {
    /// Stored and not replayed yet.
    New,
    /// Replayed through the inbox transaction: the event is stored (by the replay, or before).
    Applied,
    /// Replayed, and still not an event the database takes.
    StillRejected,
}

impl LetterState {
    /// Every state, in a stable order (for filters).
    pub const ALL: &'static [LetterState] = <Self as strum::VariantArray>::VARIANTS;

    /// The name stored in `dead_letters.state`.
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// The state named by [`LetterState::as_str`], if any.
    pub fn from_name(name: &str) -> Option<Self> {
        name.parse().ok()
    }
}
