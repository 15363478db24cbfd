//! Validation matches the schema: any event that parses is stored by the real PostgreSQL schema,
//! through the one-event transaction and through a batch, with every text field generated up to
//! its bound in characters of up to four bytes and timestamps at the ends of RFC 3339's range.

use history_consumer::domain::{
    MAX_EVENT_ID_CHARS, MAX_STATUS_CHARS, MAX_TICKET_ID_CHARS, Outcome, TicketEvent,
};
use history_consumer::inbox::batch::{BatchItem, BatchOutcome, process_batch};
use history_consumer::inbox::{Origin, PgInbox, process_history_once};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

use crate::support::helpers::{TestDb, test_database};

const MAX_PAYLOAD: usize = 256 * 1024;

/// Text of `1..=max` characters, most often exactly `max`, from all of Unicode but NUL. Most
/// characters are random ones of four bytes in UTF-8: the longest text the bound allows, and one
/// PostgreSQL cannot compress below its limits.
fn text(max: usize) -> impl Strategy<Value = String> {
    let length = prop_oneof![3 => Just(max), 1 => Just(max - 1), 1 => 1..=max];
    let four_bytes = (0x1_0000u32..=0x10_FFFF).prop_filter_map("a scalar value", char::from_u32);
    let character = prop_oneof![
        6 => four_bytes,
        2 => any::<char>(),
        1 => prop::sample::select(vec!['é', '\u{1}', '"', '\\', ' ', '\u{FFFF}']),
    ]
    .prop_filter("PostgreSQL text holds no NUL", |c| *c != '\0');
    length.prop_flat_map(move |n| {
        prop::collection::vec(character.clone(), n).prop_map(|chars| chars.into_iter().collect())
    })
}

/// An RFC 3339 timestamp anywhere in years 0000–9999, with nanoseconds and any offset.
fn timestamp() -> impl Strategy<Value = String> {
    let year = prop_oneof![Just(0), Just(9999), 0..=9999u32];
    let offset = prop_oneof![
        Just(None),
        Just(Some(-1439)),
        Just(Some(1439)),
        (-1439..=1439i32).prop_map(Some)
    ];
    (
        year,
        1..=12u32,
        1..=28u32,
        0..24u32,
        0..60u32,
        0..60u32,
        0..1_000_000_000u32,
        offset,
    )
        .prop_map(|(year, month, day, hour, minute, second, nanos, offset)| {
            let zone = match offset {
                None => "Z".to_owned(),
                Some(minutes) => {
                    let sign = if minutes < 0 { '-' } else { '+' };
                    let m = minutes.unsigned_abs();
                    format!("{sign}{:02}:{:02}", m / 60, m % 60)
                }
            };
            format!(
                "{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}.{nanos:09}{zone}"
            )
        })
}

/// The bytes a producer could send, at the bounds of every field.
fn payload() -> impl Strategy<Value = Vec<u8>> {
    (
        text(MAX_EVENT_ID_CHARS),
        text(MAX_TICKET_ID_CHARS),
        text(MAX_STATUS_CHARS),
        text(MAX_STATUS_CHARS),
        timestamp(),
    )
        .prop_map(|(event_id, ticket_id, from, to, changed_at)| {
            serde_json::json!({
                "event_id": event_id,
                "ticket_id": ticket_id,
                "from_status": from,
                "to_status": to,
                "changed_at": changed_at,
            })
            .to_string()
            .into_bytes()
        })
}

/// Parses, or skips the case: only events that parse are claimed to be storable.
fn parsed(bytes: &[u8]) -> Result<TicketEvent, TestCaseError> {
    TicketEvent::parse(bytes, MAX_PAYLOAD)
        .map_err(|rejection| TestCaseError::reject(rejection.to_string()))
}

async fn stored_texts(db: &TestDb, event_id: &str) -> Option<(String, String, String)> {
    let client = db.pool.get().await.unwrap();
    client
        .query_opt(
            "SELECT ticket_id, from_status, to_status FROM history_events WHERE event_id = $1",
            &[&event_id],
        )
        .await
        .unwrap()
        .map(|row| (row.get(0), row.get(1), row.get(2)))
}

#[test]
fn any_event_that_parses_is_stored_by_the_real_schema_alone_and_in_a_batch() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let db = runtime.block_on(test_database());
    let mut runner = TestRunner::new(Config {
        cases: 96,
        ..Config::default()
    });
    let next_offset = std::sync::atomic::AtomicI64::new(0);
    let strategy = (payload(), prop::collection::vec(payload(), 2..6));
    runner
        .run(&strategy, |(one, many)| {
            let offset = next_offset.fetch_add(100, std::sync::atomic::Ordering::Relaxed);
            let event = parsed(&one)?;
            let events = many
                .iter()
                .map(|bytes| parsed(bytes))
                .collect::<Result<Vec<_>, _>>()?;
            runtime.block_on(async {
                let mut repo = PgInbox::new(db.pool.clone());
                let origin = Origin {
                    partition: 0,
                    offset,
                };
                let processed = process_history_once(&mut repo, &event, origin).await;
                prop_assert_ne!(
                    processed.outcome(),
                    Outcome::Unknown,
                    "{:?}",
                    processed
                        .error()
                        .map(|e| history_consumer::error_text::chain(e))
                );
                let (ticket, from, to) = stored_texts(&db, event.event_id())
                    .await
                    .expect("a history row");
                if processed.outcome() == Outcome::Applied {
                    prop_assert_eq!(
                        (ticket, from, to),
                        (
                            event.ticket_id().to_string(),
                            event.from_status().to_string(),
                            event.to_status().to_string()
                        )
                    );
                }

                let items: Vec<BatchItem<'_>> = events
                    .iter()
                    .enumerate()
                    .map(|(i, event)| BatchItem::Event {
                        event,
                        origin: Origin {
                            partition: 1,
                            offset: offset + i as i64,
                        },
                    })
                    .collect();
                let outcomes = process_batch(&db.pool, &items)
                    .await
                    .map_err(|e| TestCaseError::fail(history_consumer::error_text::chain(&e)))?;
                prop_assert_eq!(outcomes.len(), events.len());
                for (event, outcome) in events.iter().zip(outcomes) {
                    let resolved = matches!(
                        outcome,
                        BatchOutcome::Applied | BatchOutcome::AlreadyApplied
                    );
                    prop_assert!(resolved, "{:?}", outcome);
                    prop_assert!(stored_texts(&db, event.event_id()).await.is_some());
                }
                Ok(())
            })
        })
        .unwrap_or_else(|failure| panic!("{failure}"));
}
