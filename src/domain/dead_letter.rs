//! A record that can never succeed, on its way to the `dead_letters` table.

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
