//! The source document's two events of ticket-42, used by the demo and by tests.

use chrono::{TimeZone, Utc};

use super::TicketEvent;

/// `event-ticket-900`: ticket-42 open → resolved at 2026-10-03T08:00:00Z (published twice in
/// the story).
pub fn event_900() -> TicketEvent {
    TicketEvent::new(
        "event-ticket-900",
        "ticket-42",
        "open",
        "resolved",
        Utc.with_ymd_and_hms(2026, 10, 3, 8, 0, 0).unwrap(),
    )
}

/// `event-ticket-901`: ticket-42 resolved → closed at 08:01, a second row of the same ticket.
pub fn event_901() -> TicketEvent {
    TicketEvent::new(
        "event-ticket-901",
        "ticket-42",
        "resolved",
        "closed",
        Utc.with_ymd_and_hms(2026, 10, 3, 8, 1, 0).unwrap(),
    )
}
