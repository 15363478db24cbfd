//! An offset out of range (to be written).

use super::*;
use crate::kafka::queue::QueueError;

impl Driver {
    pub(super) fn offset_out_of_range(&mut self, assignment: Assignment, error: QueueError) {
        self.hold(
            assignment,
            Held {
                offset: error.offset,
                cause: crate::domain::HeldCause::Stopped,
                detail: error.text,
                since: chrono::Utc::now(),
            },
        );
    }
}
