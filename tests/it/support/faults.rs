//! Database faults on demand: a trigger (and its function, of the same name) that a test puts
//! on a table to make the database refuse rows, or fail at commit, and takes off again. Every
//! test that injects a fault through a trigger builds it here.

use crate::support::helpers::TestDb;

/// A row trigger of a test's own. Built with [`Trigger::before`] or [`Trigger::at_commit`],
/// given what it does with [`Trigger::refusing`] (or [`Trigger::running`]), then
/// [`Trigger::install`]ed and [`Trigger::remove`]d.
pub struct Trigger {
    name: String,
    table: String,
    /// The trigger's firing, as `CREATE … TRIGGER name <firing> ON table` takes it.
    firing: String,
    /// A constraint trigger (deferred to the commit), which `CREATE OR REPLACE` cannot replace.
    constraint: bool,
    /// The PL/pgSQL statements its function runs for each row before `RETURN NEW`.
    body: String,
}

impl Trigger {
    /// A trigger `name` fired before each row of `events` (`INSERT`, `INSERT OR UPDATE`) on
    /// `table`: what it raises fails the statement.
    pub fn before(name: &str, events: &str, table: &str) -> Trigger {
        Trigger {
            name: name.to_owned(),
            table: table.to_owned(),
            firing: format!("BEFORE {events}"),
            constraint: false,
            body: String::new(),
        }
    }

    /// A constraint trigger `name` fired after each row inserted into `table`, deferred to the
    /// commit: what it raises fails the `COMMIT` itself.
    pub fn at_commit(name: &str, table: &str) -> Trigger {
        Trigger {
            name: name.to_owned(),
            table: table.to_owned(),
            firing: "AFTER INSERT".to_owned(),
            constraint: true,
            body: String::new(),
        }
    }

    /// Raises `raise` (what follows `RAISE EXCEPTION`: the message, its arguments, a `USING`
    /// clause) for the rows `condition` (SQL over `NEW`; `true` for every row) matches.
    pub fn refusing(self, condition: &str, raise: &str) -> Trigger {
        self.running(&format!(
            "IF {condition} THEN RAISE EXCEPTION {raise}; END IF;"
        ))
    }

    /// Runs the PL/pgSQL statements `body` for each row (before `RETURN NEW`).
    pub fn running(mut self, body: &str) -> Trigger {
        self.body = body.to_owned();
        self
    }

    /// Creates (or replaces) the function and the trigger.
    pub async fn install(&self, db: &TestDb) {
        let Trigger {
            name,
            table,
            firing,
            constraint,
            body,
        } = self;
        let trigger = if *constraint {
            format!(
                "CREATE CONSTRAINT TRIGGER {name} {firing} ON {table} \
                   DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION {name}();"
            )
        } else {
            format!(
                "CREATE OR REPLACE TRIGGER {name} {firing} ON {table} \
                   FOR EACH ROW EXECUTE FUNCTION {name}();"
            )
        };
        let sql = format!(
            "CREATE OR REPLACE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$ \
             BEGIN {body} RETURN NEW; END $$; {trigger}"
        );
        let client = db.pool.get().await.expect("a connection");
        client
            .batch_execute(&sql)
            .await
            .unwrap_or_else(|error| panic!("installing trigger {name}: {error}"));
    }

    /// Drops the trigger: the table takes every row again.
    pub async fn remove(&self, db: &TestDb) {
        let Trigger { name, table, .. } = self;
        let client = db.pool.get().await.expect("a connection");
        client
            .batch_execute(&format!("DROP TRIGGER {name} ON {table}"))
            .await
            .unwrap_or_else(|error| panic!("dropping trigger {name}: {error}"));
    }
}

/// Refuses for good (SQLSTATE P0001, a rejection of the row) the rows of `history_events`
/// that `condition` (SQL over `NEW`) matches; installed again, it replaces the condition.
pub fn refused_rows(condition: &str) -> Trigger {
    Trigger::before("refuse_rows", "INSERT", "history_events")
        .refusing(condition, "'ticket % is refused', NEW.ticket_id")
}

/// Installs [`refused_rows`].
pub async fn refuse_rows(db: &TestDb, condition: &str) {
    refused_rows(condition).install(db).await;
}

/// Takes [`refused_rows`] off.
pub async fn stop_refusing(db: &TestDb) {
    refused_rows("true").remove(db).await;
}

/// Refuses ticket `poison` with an error that may pass (a lock, `lock_not_available`): the
/// record is held Unknown and blocks its partition, and only an operator can set it aside.
pub fn held_poison() -> Trigger {
    Trigger::before("hold_poison", "INSERT", "history_events").refusing(
        "NEW.ticket_id = 'poison'",
        "'ticket poison is locked' USING ERRCODE = 'lock_not_available'",
    )
}

/// Makes the inserts into the inbox that `condition` (SQL over `NEW`) matches fail with a
/// transient error (SQLSTATE 40001, serialization_failure).
pub fn inbox_fault(condition: &str) -> Trigger {
    Trigger::before("injected_inbox_fault", "INSERT", "inbox").refusing(
        condition,
        "'injected fault' USING ERRCODE = 'serialization_failure'",
    )
}
