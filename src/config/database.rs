//! The database settings every command shares: the connection string (`--database-url`, read
//! as libpq reads it, TLS keys included) and the password apart from it
//! (`--database-password-file`), checked at start so that a mistake names its key.
//!
//! The password is given one way only: a password in the URL and a password file together are
//! refused, as the admin token and its file are (a stale password in a URL would otherwise be
//! silently overridden, or silently win).

use std::path::Path;

use super::{ConfigError, Secret, key, not_empty};
use crate::db::Database;
use crate::error_text::chain;

/// Where the service's own database is and how to log in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatabaseSettings {
    /// A `postgres://` URI or libpq's key=value string.
    pub url: Secret,
    /// The password, when it is not in the URL (`--database-password-file`).
    pub password: Option<Secret>,
}

impl DatabaseSettings {
    /// From the flags: the URL, and the password file's content when one is named (checked
    /// by [`DatabaseSettings::validate`]).
    pub fn from_flags(
        url: Secret,
        password_file: Option<&Path>,
    ) -> Result<DatabaseSettings, ConfigError> {
        let password = password_file.map(read_password_file).transpose()?;
        Ok(DatabaseSettings { url, password })
    }

    /// The database these settings name, checked: the URL parses, the files its TLS keys name
    /// (or libpq's defaults) exist and hold what they should, the password is given once.
    pub fn database(&self) -> Result<Database, ConfigError> {
        not_empty(self.url.expose(), key::DATABASE_URL)?;
        let parsed = crate::db::conninfo::parse(self.url.expose())
            .map_err(|e| ConfigError::at(key::DATABASE_URL, chain(&e)))?;
        if self.password.is_some() && parsed.has_password() {
            return Err(ConfigError::at(
                key::DATABASE_PASSWORD_FILE,
                format!(
                    "{} has a password too: give the password one way only",
                    key::DATABASE_URL
                ),
            ));
        }
        let password = self.password.as_ref().map(Secret::expose);
        Database::new(self.url.expose(), password)
            .map_err(|e| ConfigError::at(key::DATABASE_URL, chain(&e)))
    }

    /// Checks what [`DatabaseSettings::database`] checks.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.database().map(drop)
    }
}

impl From<&str> for DatabaseSettings {
    /// A URL that holds everything, password included.
    fn from(url: &str) -> DatabaseSettings {
        DatabaseSettings {
            url: url.into(),
            password: None,
        }
    }
}

impl From<String> for DatabaseSettings {
    fn from(url: String) -> DatabaseSettings {
        DatabaseSettings::from(url.as_str())
    }
}

/// The password in `path`, a trailing newline ignored (as `echo` and editors leave one).
fn read_password_file(path: &Path) -> Result<Secret, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|error| {
        ConfigError::at(
            key::DATABASE_PASSWORD_FILE,
            format!("cannot read {}: {error}", path.display()),
        )
    })?;
    let password = text
        .strip_suffix('\n')
        .map(|t| t.strip_suffix('\r').unwrap_or(t))
        .unwrap_or(&text);
    if password.is_empty() {
        return Err(ConfigError::at(
            key::DATABASE_PASSWORD_FILE,
            format!("{} is empty", path.display()),
        ));
    }
    Ok(Secret::new(password))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn password_file(content: &str) -> tempfile::NamedTempFile {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), content).unwrap();
        file
    }

    #[test]
    fn the_password_file_gives_the_password_without_its_trailing_newline() {
        let file = password_file("hunter2\n");
        let settings =
            DatabaseSettings::from_flags("postgres://u@h/db".into(), Some(file.path())).unwrap();
        assert_eq!(
            settings.password.as_ref().map(Secret::expose),
            Some("hunter2")
        );
        let database = settings.database().unwrap();
        assert_eq!(database.config().get_password(), Some(&b"hunter2"[..]));
        let crlf = password_file("hunter2\r\n");
        let settings =
            DatabaseSettings::from_flags("host=h user=u".into(), Some(crlf.path())).unwrap();
        assert_eq!(
            settings.password.as_ref().map(Secret::expose),
            Some("hunter2")
        );
        let inner = password_file("two\nlines\n");
        let settings = DatabaseSettings::from_flags("host=h".into(), Some(inner.path())).unwrap();
        assert_eq!(
            settings.password.as_ref().map(Secret::expose),
            Some("two\nlines")
        );
    }

    #[test]
    fn a_password_in_the_url_and_a_password_file_are_refused_together() {
        let file = password_file("hunter2\n");
        for url in ["postgres://u:other@h/db", "host=h password=other"] {
            let error = DatabaseSettings::from_flags(url.into(), Some(file.path()))
                .and_then(|settings| settings.validate())
                .unwrap_err()
                .to_string();
            assert!(
                error.contains("--database-password-file / HISTORY_DATABASE_PASSWORD_FILE"),
                "{error}"
            );
            assert!(error.contains("give the password one way only"), "{error}");
            assert!(
                !error.contains("hunter2") && !error.contains("other"),
                "{error}"
            );
        }
    }

    #[test]
    fn an_unreadable_or_empty_password_file_names_its_key() {
        for error in [
            DatabaseSettings::from_flags("host=h".into(), Some(Path::new("/nonexistent/pw"))),
            DatabaseSettings::from_flags("host=h".into(), Some(password_file("\n").path())),
        ] {
            let error = error.unwrap_err().to_string();
            assert!(error.contains("--database-password-file"), "{error}");
        }
    }

    #[test]
    fn a_tls_file_that_is_not_there_names_the_url_and_the_tls_key() {
        let error = DatabaseSettings::from(
            "postgres://u@h/db?sslmode=verify-full&sslrootcert=/nonexistent/ca.crt",
        )
        .validate()
        .unwrap_err()
        .to_string();
        assert_eq!(
            error,
            "invalid configuration: --database-url / HISTORY_DATABASE_URL: sslrootcert \
             /nonexistent/ca.crt does not exist"
        );
    }

    #[test]
    fn the_settings_never_show_a_password() {
        let file = password_file("hunter2\n");
        let settings =
            DatabaseSettings::from_flags("postgres://u@h/db".into(), Some(file.path())).unwrap();
        assert!(!format!("{settings:?}").contains("hunter2"));
        let in_url = DatabaseSettings::from("postgres://u:hunter2@h/db");
        assert!(!format!("{in_url:?}").contains("hunter2"));
    }
}
