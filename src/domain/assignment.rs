//! Which assignment of a partition a message, a watermark or a commit is about.

use serde::Serialize;

/// One assignment of a partition to this member. The generation grows with every assignment
/// this member receives, so a partition revoked and assigned back gets a new one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Assignment {
    pub partition: i32,
    pub generation: u64,
}

/// A position to commit for an assignment: the next offset to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct CommitPosition {
    pub assignment: Assignment,
    pub offset: i64,
}
