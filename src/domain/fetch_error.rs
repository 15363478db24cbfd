//! Errors librdkafka reports on a partition's queue, and what the service does about each
//! (pure). The rule is the inbox contract's: the committed offset never passes a record that
//! was neither stored nor dead-lettered, so a record librdkafka cannot hand over holds its
//! partition, in plain sight, until an operator acts (see `docs/contract.md`, "Records
//! librdkafka cannot read").
//!
//! What librdkafka 2.12 does after each (`rdkafka_msgset_reader.c`, `rdkafka_fetcher.c`):
//! - a batch whose CRC does not match (`check.crcs=true`, `_BAD_MSG`, at the batch's first
//!   offset): it means to skip the batch and go on, but loses its place doing so (it skips by
//!   the batch's length from the start of the fetch response, reads record bytes as the next
//!   batch's header, and moves its fetch position to an "offset" read from them);
//! - a batch it cannot decompress (`_BAD_COMPRESSION`, or `_NOT_IMPLEMENTED` for a codec it was
//!   built without): reported at the batch's first offset, fetched again and again, never
//!   passed;
//! - a batch of a message format it does not know (`_NOT_IMPLEMENTED`, "Unsupported
//!   Message(Set) MagicByte"): reported once, and the fetch position moves one past it;
//! - a broker error for the partition (`MSG_SIZE_TOO_LARGE`, `TOPIC_AUTHORIZATION_FAILED`,
//!   ...): reported at the fetch position and fetched again after a backoff, nothing passed;
//! - an offset out of range with `auto.offset.reset=error` (`_AUTO_OFFSET_RESET`): reported at
//!   the position asked for, and the partition is no longer fetched until it is assigned again.

use chrono::{DateTime, Utc};
use rdkafka::error::RDKafkaErrorCode;
use serde::Serialize;

/// Why records of a partition cannot be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, strum::IntoStaticStr)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Unreadable {
    /// A batch's bytes do not match its CRC: damaged on the broker or on the way.
    Crc,
    /// A batch could not be decompressed (damaged, or a codec this build lacks).
    Compression,
    /// A batch of a message format this client does not know.
    Format,
}

impl Unreadable {
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// What an operator can do, in words.
    pub fn remedy(self) -> &'static str {
        match self {
            Unreadable::Crc => {
                "the batch's bytes are damaged: repair or restore the broker's log, or restart \
                 with --kafka-option check.crcs=false to read them as they are (records that \
                 no longer parse are dead-lettered as malformed)"
            }
            Unreadable::Compression => {
                "run a build whose librdkafka has the batch's codec, or have the producer fix \
                 its batches; the records are kept on the broker"
            }
            Unreadable::Format => {
                "run a client that knows the batch's message format; the records are kept on \
                 the broker"
            }
        }
    }
}

/// What the driver does with an error from a partition's queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FetchError {
    /// Nothing here: a connection error (the consumer's context reports those, once per change
    /// of the connection's health) or the end of the partition.
    Ignored,
    /// Records at the error's offset cannot be read: the partition is held there.
    Unreadable(Unreadable),
    /// The consumer's position is not in the partition's log.
    OffsetOutOfRange,
    /// Fetching failed at the error's offset; librdkafka tries again after a backoff and passes
    /// nothing meanwhile. Shown with the partition until a record arrives.
    FetchFailed,
}

/// Classifies an error librdkafka put on a partition's queue, with its text.
pub fn classify(code: RDKafkaErrorCode, text: &str) -> FetchError {
    use RDKafkaErrorCode as C;
    match code {
        C::BadMessage => FetchError::Unreadable(Unreadable::Crc),
        C::BadCompression => FetchError::Unreadable(Unreadable::Compression),
        // "Not implemented" by this client: a codec left out of the build (refetched forever),
        // or a message format librdkafka does not know (passed over). Both hold.
        C::NotImplemented if text.starts_with("Decompression") => {
            FetchError::Unreadable(Unreadable::Compression)
        }
        C::NotImplemented => FetchError::Unreadable(Unreadable::Format),
        C::AutoOffsetReset => FetchError::OffsetOutOfRange,
        C::PartitionEOF => FetchError::Ignored,
        code if super::connection::is_connection_error(code) => FetchError::Ignored,
        _ => FetchError::FetchFailed,
    }
}

/// Why a partition is held: nothing at or after `offset` is handed to its actor, so nothing
/// past it is committed, until an operator acts or the partition is assigned again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Held {
    /// Where reading stopped (`None`: librdkafka named no offset).
    pub offset: Option<i64>,
    pub cause: HeldCause,
    /// librdkafka's words, or the service's.
    pub detail: String,
    pub since: DateTime<Utc>,
}

/// What holds a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum HeldCause {
    /// Records librdkafka cannot read.
    Unreadable { unreadable: Unreadable },
    /// The position is not in the partition's log any more (`--offset-reset-policy hold`, or a
    /// log that ends before the position); the gap is recorded in `offset_resets`.
    OffsetOutOfRange {
        log_start: Option<i64>,
        log_end: Option<i64>,
    },
    /// Fetching cannot go on for another reason the detail names.
    Stopped,
}

impl Held {
    /// For people: what holds the partition and where.
    pub fn describe(&self) -> String {
        let at = self
            .offset
            .map_or_else(|| "its position".to_owned(), |o| format!("offset {o}"));
        match self.cause {
            HeldCause::Unreadable { unreadable } => format!(
                "held at {at}: records there cannot be read ({}): {}",
                match unreadable {
                    Unreadable::Crc => "a batch fails its CRC check",
                    Unreadable::Compression => "a batch cannot be decompressed",
                    Unreadable::Format => "a batch of an unknown message format",
                },
                self.detail
            ),
            HeldCause::OffsetOutOfRange { log_start, log_end } => format!(
                "held at {at}: the offset is not in the partition's log any more (it holds {} to \
                 {}); the gap is recorded: {}",
                log_start.map_or_else(|| "?".to_owned(), |o| o.to_string()),
                log_end.map_or_else(|| "?".to_owned(), |o| o.to_string()),
                self.detail
            ),
            HeldCause::Stopped => format!("held at {at}: {}", self.detail),
        }
    }

    /// What an operator can do, in words.
    pub fn remedy(&self) -> &'static str {
        match self.cause {
            HeldCause::Unreadable { unreadable } => unreadable.remedy(),
            HeldCause::OffsetOutOfRange { .. } => {
                "a live rewind of the partition (to any time) goes on from the start of its log, \
                 completing the recorded gap; or restart with --offset-reset-policy continue"
            }
            HeldCause::Stopped => "a live rewind of the partition, or a restart, reads it again",
        }
    }
}

/// A fetch failure librdkafka retries by itself, shown until a record arrives.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FetchFailure {
    pub offset: Option<i64>,
    pub detail: String,
    pub since: DateTime<Utc>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_librdkafka_cannot_read_hold_their_partition() {
        assert_eq!(
            classify(
                RDKafkaErrorCode::BadMessage,
                "MessageSet at offset 3 failed CRC32C check"
            ),
            FetchError::Unreadable(Unreadable::Crc)
        );
        assert_eq!(
            classify(
                RDKafkaErrorCode::BadCompression,
                "Decompression (codec 0x1) failed"
            ),
            FetchError::Unreadable(Unreadable::Compression)
        );
        assert_eq!(
            classify(
                RDKafkaErrorCode::NotImplemented,
                "Decompression (codec 0x4) of message at 3 of 24 bytes failed: Local: Not implemented"
            ),
            FetchError::Unreadable(Unreadable::Compression),
            "a codec left out of the build"
        );
        assert_eq!(
            classify(
                RDKafkaErrorCode::NotImplemented,
                "Unsupported Message(Set) MagicByte 3 at offset 7"
            ),
            FetchError::Unreadable(Unreadable::Format)
        );
    }

    #[test]
    fn an_offset_reset_is_told_apart_from_failures_librdkafka_retries() {
        assert_eq!(
            classify(RDKafkaErrorCode::AutoOffsetReset, ""),
            FetchError::OffsetOutOfRange
        );
        for code in [
            RDKafkaErrorCode::MessageSizeTooLarge,
            RDKafkaErrorCode::TopicAuthorizationFailed,
            RDKafkaErrorCode::Unknown,
        ] {
            assert_eq!(classify(code, ""), FetchError::FetchFailed, "{code:?}");
        }
    }

    #[test]
    fn connection_errors_and_the_end_of_a_partition_are_not_the_partitions_concern() {
        for code in [
            RDKafkaErrorCode::PartitionEOF,
            RDKafkaErrorCode::BrokerTransportFailure,
            RDKafkaErrorCode::AllBrokersDown,
        ] {
            assert_eq!(classify(code, ""), FetchError::Ignored, "{code:?}");
        }
    }
}

/// What reading a partition ran into.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Trouble {
    /// Nothing at or after the offset is read.
    Held(Held),
    /// Fetching fails and librdkafka retries by itself.
    Failing(FetchFailure),
}
