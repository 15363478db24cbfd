//! How the members of a consumer group see one another through the service's database: how
//! often each publishes itself, when one counts as gone and when its rows are forgotten, how
//! long an action routed to another member is waited for, and the admin URL the others link
//! to. Flattened into the admin flags of `run`; each check names the key to fix.

use std::time::Duration;

use clap::Args;

use super::{ConfigError, defaults, key, parse_duration, shown};

/// The group flags of `run`.
#[derive(Debug, Clone, Args)]
pub struct MembersArgs {
    /// The admin UI's address as the other members and operators reach it, e.g.
    /// https://history-2.internal:8080 (the group page links to it). Default: made from
    /// --admin-addr (the host name when it listens on every address).
    #[arg(long = key::ADMIN_PUBLIC_URL.long, env = key::ADMIN_PUBLIC_URL.env, value_name = "URL")]
    pub admin_public_url: Option<String>,
    /// How often this member publishes its state (its partitions, their offsets and health) to
    /// the database, where the other members of the group read it.
    #[arg(long = key::MEMBER_HEARTBEAT.long, env = key::MEMBER_HEARTBEAT.env,
          default_value = defaults::MEMBER_HEARTBEAT, value_parser = parse_duration)]
    pub member_heartbeat: Duration,
    /// A member whose last heartbeat is older than this counts as gone: its partitions are shown
    /// without an owner until Kafka gives them to another member.
    #[arg(long = key::MEMBER_GONE_AFTER.long, env = key::MEMBER_GONE_AFTER.env,
          default_value = defaults::MEMBER_GONE_AFTER, value_parser = parse_duration)]
    pub member_gone_after: Duration,
    /// The rows of a member gone for this long are removed (and routed commands older than this).
    #[arg(long = key::MEMBER_FORGET_AFTER.long, env = key::MEMBER_FORGET_AFTER.env,
          default_value = defaults::MEMBER_FORGET_AFTER, value_parser = parse_duration)]
    pub member_forget_after: Duration,
    /// How long an action on a partition another member owns waits for that member's answer.
    #[arg(long = key::COMMAND_TIMEOUT.long, env = key::COMMAND_TIMEOUT.env,
          default_value = defaults::COMMAND_TIMEOUT, value_parser = parse_duration)]
    pub command_timeout: Duration,
}

/// The group's shared view, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberSettings {
    /// `None`: made from the admin address as the service starts.
    pub public_url: Option<String>,
    pub heartbeat: Duration,
    pub gone_after: Duration,
    pub forget_after: Duration,
    pub command_timeout: Duration,
}

impl Default for MemberSettings {
    fn default() -> Self {
        MemberSettings {
            public_url: None,
            heartbeat: defaults::duration(defaults::MEMBER_HEARTBEAT),
            gone_after: defaults::duration(defaults::MEMBER_GONE_AFTER),
            forget_after: defaults::duration(defaults::MEMBER_FORGET_AFTER),
            command_timeout: defaults::duration(defaults::COMMAND_TIMEOUT),
        }
    }
}

impl MemberSettings {
    pub fn from_args(args: MembersArgs) -> Result<MemberSettings, ConfigError> {
        let public_url = args
            .admin_public_url
            .map(|url| {
                check_public_url(&url).map_err(|m| ConfigError::at(key::ADMIN_PUBLIC_URL, m))
            })
            .transpose()?;
        let settings = MemberSettings {
            public_url,
            heartbeat: args.member_heartbeat,
            gone_after: args.member_gone_after,
            forget_after: args.member_forget_after,
            command_timeout: args.command_timeout,
        };
        settings.validate()?;
        Ok(settings)
    }

    /// Checks that name the key to fix.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.heartbeat < Duration::from_millis(100) {
            return Err(ConfigError::at(
                key::MEMBER_HEARTBEAT,
                "must be at least 100ms",
            ));
        }
        // One late heartbeat (a slow database, a busy machine) must not make a member gone.
        if self.gone_after < self.heartbeat * 2 {
            return Err(ConfigError::at(
                key::MEMBER_GONE_AFTER,
                format!(
                    "{} must be at least twice {} ({})",
                    shown(self.gone_after),
                    key::MEMBER_HEARTBEAT,
                    shown(self.heartbeat)
                ),
            ));
        }
        if self.forget_after < self.gone_after {
            return Err(ConfigError::at(
                key::MEMBER_FORGET_AFTER,
                format!(
                    "{} is shorter than {} ({})",
                    shown(self.forget_after),
                    key::MEMBER_GONE_AFTER,
                    shown(self.gone_after)
                ),
            ));
        }
        if self.command_timeout < Duration::from_millis(500) {
            return Err(ConfigError::at(
                key::COMMAND_TIMEOUT,
                "must be at least 500ms",
            ));
        }
        Ok(())
    }
}

/// An admin URL others can follow: `http` or `https`, a host, no spaces; without a trailing
/// slash, so that paths append to it.
fn check_public_url(url: &str) -> Result<String, String> {
    let url = url.trim().trim_end_matches('/');
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .ok_or("must start with http:// or https://")?;
    if rest.is_empty() || rest.starts_with('/') {
        return Err("names no host".into());
    }
    if url
        .chars()
        .any(|c| c.is_whitespace() || c.is_control() || c == '"' || c == '<')
    {
        return Err("must not contain spaces, quotes or control characters".into());
    }
    Ok(url.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_public_url_is_http_or_https_with_a_host_and_loses_its_trailing_slash() {
        assert_eq!(
            check_public_url("https://history-2.internal:8080/").unwrap(),
            "https://history-2.internal:8080"
        );
        assert_eq!(
            check_public_url("http://10.0.0.7:8080/admin").unwrap(),
            "http://10.0.0.7:8080/admin"
        );
        for wrong in [
            "history-2:8080",
            "ftp://h",
            "https://",
            "http:///x",
            "http://a b",
        ] {
            assert!(check_public_url(wrong).is_err(), "{wrong}");
        }
    }

    #[test]
    fn a_member_is_gone_only_after_two_heartbeats_and_forgotten_only_after_it_is_gone() {
        assert!(MemberSettings::default().validate().is_ok());
        let early = MemberSettings {
            gone_after: Duration::from_secs(3),
            ..MemberSettings::default()
        };
        let error = early.validate().unwrap_err();
        assert_eq!(error.key, key::MEMBER_GONE_AFTER.to_string(), "{error}");
        let forgetful = MemberSettings {
            forget_after: Duration::from_secs(5),
            ..MemberSettings::default()
        };
        let error = forgetful.validate().unwrap_err();
        assert_eq!(error.key, key::MEMBER_FORGET_AFTER.to_string(), "{error}");
        let hasty = MemberSettings {
            command_timeout: Duration::from_millis(10),
            ..MemberSettings::default()
        };
        assert_eq!(
            hasty.validate().unwrap_err().key,
            key::COMMAND_TIMEOUT.to_string()
        );
    }
}
