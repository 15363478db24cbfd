-- The ticket history page reads one ticket's transitions in time order.
CREATE INDEX history_events_ticket_idx ON history_events (ticket_id, changed_at);
