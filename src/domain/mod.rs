//! Domain values with no I/O: the ticket status event, the record it arrives in, the outcome of
//! processing one, why a duplicate happened, a dead letter, a partition's offsets, a point in
//! time as an operator types it, where a rewind to it takes a partition, and why the Kafka
//! connection fails (its cause and the health state shared with the admin).

pub mod assignment;
pub mod connection;
pub mod connection_health;
pub mod dead_letter;
pub mod duplicate;
pub mod event;
pub mod fetch_error;
pub mod offset_reset;
pub mod offsets;
pub mod outcome;
pub mod point_in_time;
pub mod record;
pub mod rewind;
pub mod story;

pub use assignment::{Assignment, CommitPosition};
pub use connection::{CauseKind, ClientIdentity, ConnectionCause, Problem};
pub use connection_health::{ConnectionHealth, ConnectionStatus};
pub use dead_letter::{DeadLetter, LetterState};
pub use duplicate::DuplicateCause;
pub use event::{
    MAX_EVENT_ID_CHARS, MAX_STATUS_CHARS, MAX_TICKET_ID_CHARS, Parsed, RejectReason, Rejection,
    TicketEvent,
};
pub use fetch_error::{FetchFailure, Held, HeldCause, Trouble};
pub use offsets::ObservedOffsets;
pub use outcome::{Outcome, UnknownCause};
pub use point_in_time::{PointInTimeError, parse_point_in_time, parse_point_in_time_or_utc};
pub use record::{FetchedRecord, RecordKey};
