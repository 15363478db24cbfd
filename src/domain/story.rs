//! The source document's two events of ticket-42, used by the demo and by tests.

use chrono::{TimeZone, Utc};

use super::TicketEvent;

/// `event-ticket-900`: ticket-42 open → resolved at 2026-10-03T08:00:00Z (published twice in
/// the story).
pub fn event_900() -> TicketEvent {
    TicketEvent {
        event_id: "event-ticket-900".into(),
        ticket_id: "ticket-42".into(),
        from_status: "open".into(),
        to_status: "resolved".into(),
        changed_at: Utc.with_ymd_and_hms(2026, 10, 3, 8, 0, 0).unwrap(),
    }
}

/// `event-ticket-901`: ticket-42 resolved → closed at 08:01, a second row of the same ticket.
pub fn event_901() -> TicketEvent {
    TicketEvent {
        event_id: "event-ticket-901".into(),
        ticket_id: "ticket-42".into(),
        from_status: "resolved".into(),
        to_status: "closed".into(),
        changed_at: Utc.with_ymd_and_hms(2026, 10, 3, 8, 1, 0).unwrap(),
    }
}
