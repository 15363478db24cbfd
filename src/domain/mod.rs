//! Domain values with no I/O: the ticket status event and the outcome of processing one.

pub mod event;
pub mod outcome;
pub mod story;

pub use event::{MAX_EVENT_ID_CHARS, RejectReason, Rejection, TicketEvent};
pub use outcome::Outcome;
