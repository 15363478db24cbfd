//! Errors librdkafka puts on a partition's queue, carried out by the driver thread: a record
//! it cannot read holds the partition where it is (nothing after it is read, so nothing past
//! it is committed), a fetch failure it retries is shown until a record comes, and an offset
//! out of range goes to [`super::reset`]. What each error means is decided in
//! [`crate::domain::fetch_error`].

use rdkafka::consumer::Consumer;

use super::Driver;
use crate::actors::messages::driver::FetchTrouble;
use crate::domain::Trouble;
use crate::domain::fetch_error::{FetchError, classify};
use crate::domain::{Assignment, Held};
use crate::domain::{FetchFailure, HeldCause};
use crate::kafka::queue::QueueError;

impl Driver {
    /// Deals with an error read from `assignment`'s queue.
    pub(super) fn on_queue_error(&mut self, assignment: Assignment, error: QueueError) {
        let partition = assignment.partition;
        match classify(error.code, &error.text) {
            FetchError::Ignored => {
                tracing::debug!(partition, error = %error.text, "kafka partition error ignored");
            }
            FetchError::Unreadable(unreadable) => {
                self.consumer.context().metrics.observe_kafka_error();
                self.hold(
                    assignment,
                    Held {
                        offset: error.offset,
                        cause: HeldCause::Unreadable { unreadable },
                        detail: error.text,
                        since: chrono::Utc::now(),
                    },
                );
            }
            FetchError::OffsetOutOfRange => self.offset_out_of_range(assignment, error),
            FetchError::FetchFailed => {
                self.consumer.context().metrics.observe_kafka_error();
                let Some(reader) = self.reader_of(assignment) else {
                    return;
                };
                // Logged once until a record comes: librdkafka retries every backoff.
                if !std::mem::replace(&mut reader.failing, true) {
                    tracing::warn!(
                        partition,
                        offset = error.offset,
                        error = %error.text,
                        "fetching the partition fails; librdkafka retries"
                    );
                }
                self.ports.fetch.do_send(FetchTrouble {
                    assignment,
                    trouble: Some(Trouble::Failing(FetchFailure {
                        offset: error.offset,
                        detail: error.text,
                        since: chrono::Utc::now(),
                    })),
                });
            }
        }
    }

    /// Stops reading `assignment`'s partition: its actor resolves what it was handed, the
    /// watermark stops at the held record, and the partition shows why until an operator
    /// rewinds it or it is assigned again. Only the first cause counts: what librdkafka
    /// reports after it (a CRC failure is followed by errors about the bytes it misread) is
    /// about records the partition no longer reads.
    pub(super) fn hold(&mut self, assignment: Assignment, held: Held) {
        let partition = assignment.partition;
        let Some(reader) = self.reader_of(assignment) else {
            return;
        };
        if reader.held.is_some() {
            return;
        }
        tracing::error!(
            partition,
            offset = held.offset,
            cause = ?held.cause,
            error = %held.detail,
            remedy = held.remedy(),
            "partition held: nothing after this offset is read or committed"
        );
        reader.held = Some(held.clone());
        reader.failing = false;
        self.ports.fetch.do_send(FetchTrouble {
            assignment,
            trouble: Some(Trouble::Held(held)),
        });
    }
}
