//! Which dead letters an operator means: the filter of the dead-letter list, of its count and
//! of "replay the matching letters", written once as SQL conditions and their parameters.

use chrono::{DateTime, Utc};
use tokio_postgres::types::ToSql;

use crate::domain::LetterState;

/// Which dead letters: every `None` matches all.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selection {
    pub partition: Option<i32>,
    pub reason: Option<String>,
    pub state: Option<LetterState>,
    /// Stored at or after.
    pub since: Option<DateTime<Utc>>,
    /// Stored before.
    pub until: Option<DateTime<Utc>>,
}

/// The conditions on `dead_letters` that select a [`Selection`]'s letters, over the parameters
/// `$1` to `$5` of [`Bound::params`] (a macro, so that statements can `concat!` it).
macro_rules! selected_letters {
    () => {
        "($1::int IS NULL OR kafka_partition = $1) \
         AND ($2::text IS NULL OR reason = $2) \
         AND ($3::text IS NULL OR state = $3) \
         AND ($4::timestamptz IS NULL OR dead_lettered_at >= $4) \
         AND ($5::timestamptz IS NULL OR dead_lettered_at < $5)"
    };
}
pub(crate) use selected_letters;

impl Selection {
    /// The selection ready to be bound to a statement's first five parameters.
    pub fn bound(&self) -> Bound<'_> {
        Bound {
            selection: self,
            state: self.state.map(LetterState::as_str),
        }
    }
}

/// A [`Selection`] with its state as the text the table stores.
pub struct Bound<'a> {
    selection: &'a Selection,
    state: Option<&'static str>,
}

impl Bound<'_> {
    /// The parameters `$1` to `$5` of [`selected_letters!`].
    pub fn params(&self) -> [&(dyn ToSql + Sync); 5] {
        [
            &self.selection.partition,
            &self.selection.reason,
            &self.state,
            &self.selection.since,
            &self.selection.until,
        ]
    }
}
