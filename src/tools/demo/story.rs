//! The source document's story, played first: `event-ticket-900` published twice (an outbox
//! republish), `event-ticket-901` once; then what the projection holds for `ticket-42`.

use std::time::{Duration, Instant};

use crate::actors::messages::GetStatus;
use crate::domain::DuplicateCause;
use crate::domain::TicketEvent;
use crate::domain::story::{event_900, event_901};
use crate::startup::AppHandle;

use super::DemoError;
use super::database::count_rows;
use super::kafka::Publisher;
use super::report::Progress;
use super::traffic::PlannedRecord;
use crate::admin::queries::ticket_history;

/// How long the story may take, joining the consumer group included.
const DEADLINE: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(200);

/// The event ids of the story, which count among the run's events.
pub fn event_ids() -> [String; 2] {
    [
        event_900().event_id().to_string(),
        event_901().event_id().to_string(),
    ]
}

/// Publishes the story, waits until the consumer stored it, and prints the projection.
pub async fn play(publisher: &Publisher, app: &AppHandle) -> Result<(), DemoError> {
    println!("1. The source document's story");
    let (first, second) = (event_900(), event_901());
    publish(publisher, &first, false, "published").await?;
    publish(publisher, &first, true, "republished").await?;
    publish(publisher, &second, false, "published").await?;
    let progress = wait_until_stored(app).await?;
    println!("   history_events for ticket-42, by changed_at:");
    for row in ticket_history(&app.pool, first.ticket_id())
        .await
        .map_err(DemoError::Inbox)?
    {
        println!(
            "     {:<18} {:>8} -> {:<8} {}",
            row.event_id,
            row.from_status,
            row.to_status,
            row.changed_at
                .to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
        );
    }
    println!(
        "   3 deliveries, 2 rows: the second copy of event-ticket-900 was recognised as a \
         duplicate (republish={})",
        progress.duplicates_of(DuplicateCause::Republish)
    );
    println!();
    Ok(())
}

async fn publish(
    publisher: &Publisher,
    event: &TicketEvent,
    republish: bool,
    what: &str,
) -> Result<(), DemoError> {
    let record = PlannedRecord::event(event.clone(), republish);
    let landed = publisher.publish(std::slice::from_ref(&record)).await;
    let Some(Some(at)) = landed.first() else {
        return Err(DemoError::Publish(event.event_id().to_string()));
    };
    println!(
        "   {what:<11} {} ({} {} -> {} at {}): partition {}, offset {}",
        event.event_id(),
        event.ticket_id(),
        event.from_status(),
        event.to_status(),
        event.changed_at.format("%H:%M"),
        at.partition,
        at.offset
    );
    Ok(())
}

/// Waits until both events are rows and the republish was classified.
async fn wait_until_stored(app: &AppHandle) -> Result<Progress, DemoError> {
    let ids = event_ids();
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    let deadline = Instant::now() + DEADLINE;
    loop {
        // The database may refuse connections for a moment right after startup: keep polling.
        let rows = count_rows(&app.pool, None, &ids).await.unwrap_or(0);
        if rows == 2 {
            if let Ok(status) = app.supervisor.send(GetStatus).await {
                let progress = Progress::of(&status);
                if progress.duplicates_of(DuplicateCause::Republish) >= 1 {
                    return Ok(progress);
                }
            }
        }
        if Instant::now() >= deadline {
            return Err(DemoError::StoryTimeout(DEADLINE.as_secs()));
        }
        tokio::time::sleep(POLL).await;
    }
}
