//! What a database error says about the rows it was raised for (pure): the server is
//! unavailable, the work may pass if tried again, or an INSERT says *this row can never be
//! stored*. Decided by the statement that failed, its SQLSTATE and the constraint it names.
//!
//! | raised by | SQLSTATE | class |
//! |---|---|---|
//! | anything | none (I/O, protocol, closed connection), class `08` connection exception, `57P01` admin shutdown, `57P02` crash shutdown, `57P03` cannot connect now, `53300` too many connections | unavailable |
//! | an INSERT of an event (inbox marker, history row, or both in a batch's one statement) | class `22` data exception (value too long, bad encoding, out of range) | row rejected |
//! | an INSERT of an event | class `23` integrity constraint violation (CHECK, NOT NULL, a foreign key, a unique or exclusion constraint a DBA added), except on the event id's own keys (`inbox_pkey`, `history_events_pkey`, `history_events_event_id_fkey`): the inbox decides those | row rejected |
//! | an INSERT of an event | class `54` program limit exceeded (an index row over the btree limit) | row rejected |
//! | an INSERT of an event | `P0001` raise exception, `P0004` assert failure (a trigger refusing the row) | row rejected |
//! | BEGIN, COMMIT, ROLLBACK, storing a dead letter, anything else | any other | transient |
//!
//! Transient includes, on purpose: `40001` serialization failure and `40P01` deadlock, class
//! `53` insufficient resources, `55P03` lock not available, `57014` query canceled (statement
//! timeout), class `42` (a missing table or column, a privilege: a bad migration, which must
//! block, not dead-letter), class `25` transaction state, `58` system and `XX` internal errors.
//! A COMMIT's error is never a row's rejection: its outcome is unknown (`docs/contract.md`), and
//! a deferred constraint that fails there keeps the record Unknown for an operator to look at.

use strum::IntoStaticStr;

/// A statement of the inbox transaction or its batched form, named in errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub enum Step {
    Begin,
    /// SPEC §3 step 1 (one marker, or many).
    InsertMarker,
    /// SPEC §3 step 2 (one history row, or many).
    InsertHistory,
    /// SPEC §3 steps 1 and 2 in one statement: a batch's markers and history rows.
    InsertEvents,
    /// A dead letter (or several) into `dead_letters`.
    InsertDeadLetter,
    Commit,
    Rollback,
}

impl Step {
    /// Whether the step inserts events: only their errors can reject a row.
    fn inserts_events(self) -> bool {
        matches!(
            self,
            Step::InsertMarker | Step::InsertHistory | Step::InsertEvents
        )
    }
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Step::Begin => "BEGIN",
            Step::InsertMarker => "inserting the inbox marker",
            Step::InsertHistory => "inserting the history row",
            Step::InsertEvents => "inserting the inbox markers and history rows",
            Step::InsertDeadLetter => "storing the dead letter",
            Step::Commit => "COMMIT",
            Step::Rollback => "ROLLBACK",
        })
    }
}

/// What an error says about the rows of the work that raised it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    /// The database could not be reached or is going away: the rows are not the cause.
    Unavailable,
    /// Refused, but not for good as far as anybody can tell: try again later.
    Transient,
    /// An INSERT said this row can never be stored; its transaction did not commit.
    RowRejected,
}

/// SQLSTATEs of a server that cannot serve anyone right now (besides class 08).
const UNAVAILABLE_STATES: [&str; 4] = [
    "57P01", // admin_shutdown
    "57P02", // crash_shutdown
    "57P03", // cannot_connect_now
    "53300", // too_many_connections
];

/// SQLSTATE classes whose errors, raised by an event's INSERT, reject the row for good.
const ROW_REJECTING_CLASSES: [&str; 3] = [
    "22", // data_exception
    "23", // integrity_constraint_violation
    "54", // program_limit_exceeded
];

/// Single SQLSTATEs that reject the row: a trigger refusing it.
const ROW_REJECTING_STATES: [&str; 2] = [
    "P0001", // raise_exception
    "P0004", // assert_failure
];

/// The constraints on the event id itself: the inbox is the arbiter of "already seen", so a
/// violation of these says something about concurrency, never that the row is bad.
const EVENT_ID_CONSTRAINTS: [&str; 3] = [
    "inbox_pkey",
    "history_events_pkey",
    "history_events_event_id_fkey",
];

/// Classifies an error raised by `step` (`None`: a statement outside the inbox transaction)
/// with `sqlstate` (`None`: no answer from the server) naming `constraint`.
pub fn classify(
    step: Option<Step>,
    sqlstate: Option<&str>,
    constraint: Option<&str>,
) -> ErrorClass {
    let Some(state) = sqlstate else {
        return ErrorClass::Unavailable;
    };
    if state.starts_with("08") || UNAVAILABLE_STATES.contains(&state) {
        return ErrorClass::Unavailable;
    }
    if !step.is_some_and(Step::inserts_events) {
        return ErrorClass::Transient;
    }
    let class = state.get(..2).unwrap_or_default();
    let on_event_id = constraint.is_some_and(|c| EVENT_ID_CONSTRAINTS.contains(&c));
    let rejecting = ROW_REJECTING_STATES.contains(&state)
        || (ROW_REJECTING_CLASSES.contains(&class) && !(class == "23" && on_event_id));
    if rejecting {
        ErrorClass::RowRejected
    } else {
        ErrorClass::Transient
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const INSERTS: [Step; 2] = [Step::InsertMarker, Step::InsertHistory];
    const OTHER_STEPS: [Step; 4] = [
        Step::Begin,
        Step::Commit,
        Step::Rollback,
        Step::InsertDeadLetter,
    ];

    #[test]
    fn data_integrity_and_limit_errors_of_an_events_insert_reject_the_row() {
        let cases = [
            ("54000", None, "index row size exceeds the btree maximum"),
            ("22001", None, "value too long for type character varying"),
            ("22021", None, "invalid byte sequence for the encoding"),
            ("22P05", None, "untranslatable character"),
            ("22008", None, "datetime field overflow"),
            (
                "23514",
                Some("history_events_ticket_check"),
                "check violation",
            ),
            (
                "23502",
                Some("history_events_ticket_id_not_null"),
                "not null violation",
            ),
            (
                "23505",
                Some("history_by_ticket_and_time"),
                "a unique index a DBA added",
            ),
            ("23P01", Some("no_overlap"), "exclusion violation"),
            ("P0001", None, "a trigger's RAISE EXCEPTION"),
            ("P0004", None, "a trigger's ASSERT"),
        ];
        for step in INSERTS {
            for (state, constraint, what) in cases {
                assert_eq!(
                    classify(Some(step), Some(state), constraint),
                    ErrorClass::RowRejected,
                    "{what} ({state}) at {step}"
                );
            }
        }
    }

    #[test]
    fn a_violation_of_the_event_ids_own_keys_is_never_the_rows_fault() {
        for constraint in EVENT_ID_CONSTRAINTS {
            for state in ["23505", "23503"] {
                assert_eq!(
                    classify(Some(Step::InsertHistory), Some(state), Some(constraint)),
                    ErrorClass::Transient,
                    "{state} on {constraint}"
                );
            }
        }
    }

    #[test]
    fn the_same_errors_at_begin_commit_rollback_or_a_dead_letter_reject_nothing() {
        for step in OTHER_STEPS {
            for state in ["54000", "22001", "23514", "P0001"] {
                assert_eq!(
                    classify(Some(step), Some(state), None),
                    ErrorClass::Transient,
                    "{state} at {step}"
                );
            }
        }
        assert_eq!(
            classify(None, Some("23514"), None),
            ErrorClass::Transient,
            "outside the inbox transaction"
        );
    }

    #[test]
    fn connection_timeout_serialization_deadlock_resource_and_shutdown_errors_never_reject_a_row() {
        let transient = [
            ("40001", "serialization failure"),
            ("40P01", "deadlock"),
            ("53100", "disk full"),
            ("53200", "out of memory"),
            ("55P03", "lock not available"),
            ("57014", "statement timeout"),
            ("42P01", "undefined table: a bad migration"),
            ("42703", "undefined column"),
            ("42501", "insufficient privilege"),
            ("25P02", "in failed transaction"),
            ("58030", "io error"),
            ("XX000", "internal error"),
        ];
        let unavailable = [
            ("08006", "connection failure"),
            ("08003", "connection does not exist"),
            ("57P01", "admin shutdown"),
            ("57P02", "crash shutdown"),
            ("57P03", "cannot connect now"),
            ("53300", "too many connections"),
        ];
        for step in INSERTS.into_iter().chain(OTHER_STEPS) {
            for (state, what) in transient {
                assert_eq!(
                    classify(Some(step), Some(state), None),
                    ErrorClass::Transient,
                    "{what} at {step}"
                );
            }
            for (state, what) in unavailable {
                assert_eq!(
                    classify(Some(step), Some(state), None),
                    ErrorClass::Unavailable,
                    "{what} at {step}"
                );
            }
            assert_eq!(
                classify(Some(step), None, None),
                ErrorClass::Unavailable,
                "no SQLSTATE: the connection, not a statement, at {step}"
            );
        }
    }
}
