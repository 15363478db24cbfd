//! A secret string: never shown by `Debug` or `Display`; [`Secret::expose`] is the one way out.

use std::fmt;

#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret([redacted])")
    }
}

impl From<&str> for Secret {
    fn from(value: &str) -> Secret {
        Secret::new(value)
    }
}

impl From<String> for Secret {
    fn from(value: String) -> Secret {
        Secret(value)
    }
}

/// For clap: any text is a secret.
pub fn parse_secret(text: &str) -> Result<Secret, String> {
    Ok(Secret::new(text))
}

/// Whether this process was started with `--<key>` on its command line (not the environment):
/// a secret there is visible to every local user, so its use warns.
pub fn given_on_command_line(key: super::Key) -> bool {
    std::env::args_os().any(|arg| {
        arg.to_str().is_some_and(|a| {
            a.strip_prefix("--") == Some(key.long) || a.starts_with(&format!("--{}=", key.long))
        })
    })
}
