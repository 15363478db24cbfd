//! Rewinds in the audit trail (`admin_actions`), from the `rewind` command and from the admin
//! alike: one row per partition, saying where it was, where it went and why.

use chrono::{DateTime, SecondsFormat, Utc};
use deadpool_postgres::Pool;

use crate::domain::rewind::Decision;
use crate::inbox::PgInboxError;
use crate::inbox::audit_trail::{self, Action};

/// The action's name in the audit trail.
pub const ACTION: &str = "rewind";

/// A partition's line in the audit trail (pure): `ok: 120 -> 80 (40 offsets replayed), to
/// 2026-12-02T10:00:00.000Z`, `kept at 40: already at or before that time, ...`, `pending:
/// 120 -> 80 ...; why` when the rewound position is not committed yet, or the error (after the
/// decision, if there was one).
pub fn result_text(
    decision: Option<&Decision>,
    to: DateTime<Utc>,
    error: Option<&str>,
    pending: Option<&str>,
) -> String {
    let at = to.to_rfc3339_opts(SecondsFormat::Millis, true);
    let offset = |o: Option<i64>| o.map_or_else(|| "none".to_owned(), |o| o.to_string());
    let state = match (error, pending) {
        (Some(_), _) => "failed",
        (None, Some(_)) => "pending",
        (None, None) => "ok",
    };
    let decided = match decision {
        Some(decision @ Decision::Rewind { from, to: target }) => format!(
            "{state}: {from} -> {target} ({} offsets replayed), to {at}",
            decision.replayed()
        ),
        Some(Decision::PastGap { from, to: target }) => format!(
            "{state}: {from} -> {target} past a recorded offset reset (nothing replayed), to {at}"
        ),
        Some(Decision::Keep { position, reason }) => format!(
            "kept at {}: {}, to {at}",
            offset(*position),
            reason.describe()
        ),
        None => format!("failed, to {at}"),
    };
    match (error, pending) {
        (Some(error), _) => format!("{decided}; {error}"),
        (None, Some(pending)) => format!("{decided}; {pending}"),
        (None, None) => decided,
    }
}

/// Records one rewind: a row per partition with its [`result_text`], in one statement.
pub async fn record(pool: &Pool, actor: &str, rows: &[(i32, String)]) -> Result<(), PgInboxError> {
    let actions: Vec<Action<'_>> = rows
        .iter()
        .map(|(partition, result)| Action {
            partition: Some(*partition),
            offset: None,
            action: ACTION,
            actor,
            result,
            detail: None,
        })
        .collect();
    audit_trail::record_all(pool, &actions).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::rewind::Keep;

    #[test]
    fn the_audit_line_says_where_from_where_to_and_when() {
        let to = DateTime::parse_from_rfc3339("2026-12-02T10:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let moved = Decision::Rewind { from: 120, to: 80 };
        assert_eq!(
            result_text(Some(&moved), to, None, None),
            "ok: 120 -> 80 (40 offsets replayed), to 2026-12-02T10:00:00.000Z"
        );
        let kept = Decision::Keep {
            position: Some(40),
            reason: Keep::NotPastTarget,
        };
        assert_eq!(
            result_text(Some(&kept), to, None, None),
            "kept at 40: already at or before that time, to 2026-12-02T10:00:00.000Z"
        );
        assert_eq!(
            result_text(None, to, Some("seek failed"), None),
            "failed, to 2026-12-02T10:00:00.000Z; seek failed"
        );
        assert_eq!(
            result_text(Some(&moved), to, None, Some("commit not answered yet")),
            "pending: 120 -> 80 (40 offsets replayed), to 2026-12-02T10:00:00.000Z; commit not \
             answered yet",
            "a rewound position not committed yet is not reported as done"
        );
        assert_eq!(
            result_text(Some(&moved), to, Some("restart failed"), None),
            "failed: 120 -> 80 (40 offsets replayed), to 2026-12-02T10:00:00.000Z; restart failed"
        );
    }
}
