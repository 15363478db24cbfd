//! libpq's sslmode and what it means for one connection string: whether TLS is used, which
//! authority the server's certificate must chain to, whether its host name is checked, which
//! client certificate is shown — libpq's defaults under `~/.postgresql` included. Pure: whether
//! a file exists is asked of a function the caller gives.
//!
//! | sslmode | TLS | server certificate checked |
//! |---|---|---|
//! | disable | never | — |
//! | allow, prefer (default) | when the server offers it | no |
//! | require | always | no; the chain when a root certificate file is there (libpq's rule) |
//! | verify-ca | always | the chain, against sslrootcert |
//! | verify-full | always | the chain and the host name |

use std::fmt;
use std::path::{Path, PathBuf};

/// libpq's sslmode values, weakest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum SslMode {
    Disable,
    Allow,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl fmt::Display for SslMode {
    /// libpq's spelling.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SslMode::Disable => "disable",
            SslMode::Allow => "allow",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        })
    }
}

/// Where the trusted authorities come from (`sslrootcert`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RootCert {
    File(PathBuf),
    /// `sslrootcert=system`: the system's trust store (OpenSSL's default paths, which honour
    /// `SSL_CERT_FILE` and `SSL_CERT_DIR`).
    System,
}

/// The passphrase of an encrypted client key (`sslpassword`): never shown.
#[derive(Clone, PartialEq, Eq)]
pub struct KeyPassword(String);

impl KeyPassword {
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for KeyPassword {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("KeyPassword([redacted])")
    }
}

impl From<String> for KeyPassword {
    fn from(value: String) -> KeyPassword {
        KeyPassword(value)
    }
}

/// The TLS keys of a connection string, as given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSettings {
    /// `None`: not given (prefer, or verify-full with `sslrootcert=system`).
    pub mode: Option<SslMode>,
    pub root_cert: Option<RootCert>,
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
    pub key_password: Option<KeyPassword>,
    /// Send the host name in the handshake (`sslsni`, default 1).
    pub sni: bool,
    /// `sslnegotiation=direct`: TLS right away, without asking the server first.
    pub direct: bool,
}

impl Default for TlsSettings {
    fn default() -> Self {
        TlsSettings {
            mode: None,
            root_cert: None,
            cert: None,
            key: None,
            key_password: None,
            sni: true,
            direct: false,
        }
    }
}

/// The TLS settings cannot work; the message names the key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error(
        "sslrootcert=system needs sslmode=verify-full, not sslmode={0}: libpq refuses a weaker \
         mode with the system's trust store"
    )]
    WeakModeForSystemRoots(SslMode),
    #[error("sslnegotiation=direct needs sslmode=require, verify-ca or verify-full, not {0}")]
    WeakModeForDirect(SslMode),
    #[error("{key} {} does not exist", path.display())]
    Missing { key: &'static str, path: PathBuf },
    #[error(
        "sslmode={mode} needs the server's certificate authority: no sslrootcert is given and \
         {} does not exist (name it with sslrootcert=/path/to/ca.crt, or use \
         sslrootcert=system for the system's trust store)",
        default.display()
    )]
    NoRootCert { mode: SslMode, default: PathBuf },
    #[error(
        "sslkey {} does not exist: the client certificate {} needs its key",
        key.display(),
        cert.display()
    )]
    NoKey { key: PathBuf, cert: PathBuf },
}

/// What a connection does about TLS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsPlan {
    pub mode: SslMode,
    /// `None`: the server's certificate is not checked at all.
    pub verify: Option<Verify>,
    pub client: Option<ClientCert>,
    pub key_password: Option<KeyPassword>,
    pub sni: bool,
    pub direct: bool,
}

/// How the server's certificate is checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verify {
    pub roots: Roots,
    /// The host name (or address) dialled must be one the certificate names (verify-full).
    pub host: bool,
}

/// The authorities a server's certificate must chain to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Roots {
    /// A PEM file of one or more certificates; `default`: libpq's `~/.postgresql/root.crt`,
    /// not named by sslrootcert.
    File {
        path: PathBuf,
        default: bool,
    },
    System,
}

impl fmt::Display for Roots {
    /// As an error names it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Roots::File {
                path,
                default: false,
            } => write!(f, "sslrootcert {}", path.display()),
            Roots::File {
                path,
                default: true,
            } => write!(f, "{} (libpq's default sslrootcert)", path.display()),
            Roots::System => f.write_str("sslrootcert=system (the system's trust store)"),
        }
    }
}

/// The certificate (and its key) the client shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientCert {
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl TlsPlan {
    /// Whether TLS is mandatory, and so whether this crate asks the server for it itself
    /// (tokio-postgres would then refuse a server without TLS in words that do not name the
    /// sslmode that asked for it).
    pub fn asks_server(&self) -> bool {
        self.mode >= SslMode::Require && !self.direct
    }
}

impl TlsSettings {
    /// What libpq would do with these settings for a user whose home directory is `home`:
    /// every file named must exist (`exists`); libpq's defaults under `~/.postgresql` are used
    /// when they exist.
    pub fn plan(
        &self,
        home: Option<&Path>,
        exists: impl Fn(&Path) -> bool,
    ) -> Result<TlsPlan, PlanError> {
        let system = self.root_cert == Some(RootCert::System);
        let mode = match self.mode {
            Some(mode) => mode,
            // libpq 16: the system's trust store makes verify-full the default.
            None if system => SslMode::VerifyFull,
            None => SslMode::Prefer,
        };
        if system && mode != SslMode::VerifyFull {
            return Err(PlanError::WeakModeForSystemRoots(mode));
        }
        if self.direct && mode < SslMode::Require {
            return Err(PlanError::WeakModeForDirect(mode));
        }
        let named = [
            ("sslrootcert", root_file(&self.root_cert)),
            ("sslcert", self.cert.as_ref()),
            ("sslkey", self.key.as_ref()),
        ];
        for (key, path) in named {
            if let Some(path) = path.filter(|p| !exists(p)) {
                return Err(PlanError::Missing {
                    key,
                    path: path.clone(),
                });
            }
        }
        let default = |name: &str| match home {
            Some(home) => home.join(".postgresql").join(name),
            None => Path::new("~/.postgresql").join(name),
        };
        let roots = match &self.root_cert {
            Some(RootCert::System) => Some(Roots::System),
            Some(RootCert::File(path)) => Some(Roots::File {
                path: path.clone(),
                default: false,
            }),
            None => Some(default("root.crt"))
                .filter(|path| home.is_some() && exists(path))
                .map(|path| Roots::File {
                    path,
                    default: true,
                }),
        };
        let verify = match mode {
            SslMode::Disable | SslMode::Allow | SslMode::Prefer => None,
            // libpq: "if a root CA file exists, the behavior of sslmode=require will be the
            // same as that of verify-ca".
            SslMode::Require => roots.map(|roots| Verify { roots, host: false }),
            SslMode::VerifyCa | SslMode::VerifyFull => Some(Verify {
                roots: roots.ok_or_else(|| PlanError::NoRootCert {
                    mode,
                    default: default("root.crt"),
                })?,
                host: mode == SslMode::VerifyFull,
            }),
        };
        let client = if mode == SslMode::Disable {
            None
        } else {
            let cert = self.cert.clone().or_else(|| {
                Some(default("postgresql.crt")).filter(|path| home.is_some() && exists(path))
            });
            match cert {
                None => None,
                Some(cert) => {
                    // libpq takes the default key even beside a named certificate.
                    let key = self
                        .key
                        .clone()
                        .unwrap_or_else(|| default("postgresql.key"));
                    if !exists(&key) {
                        return Err(PlanError::NoKey { key, cert });
                    }
                    Some(ClientCert { cert, key })
                }
            }
        };
        Ok(TlsPlan {
            mode,
            verify,
            client,
            key_password: self.key_password.clone(),
            sni: self.sni,
            direct: self.direct,
        })
    }
}

fn root_file(root: &Option<RootCert>) -> Option<&PathBuf> {
    match root {
        Some(RootCert::File(path)) => Some(path),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;
    use crate::db::conninfo::parse;

    const HOME: &str = "/home/history";

    /// The plan of `text` on a machine where exactly `files` exist.
    fn plan(text: &str, files: &[&str]) -> Result<TlsPlan, PlanError> {
        let files: HashSet<PathBuf> = files.iter().map(PathBuf::from).collect();
        parse(text)
            .expect("parses")
            .tls
            .plan(Some(Path::new(HOME)), |p| files.contains(p))
    }

    fn file(path: &str) -> Roots {
        Roots::File {
            path: path.into(),
            default: false,
        }
    }

    #[test]
    fn disable_allow_and_prefer_check_no_certificate() {
        for mode in ["disable", "allow", "prefer"] {
            let plan = plan(
                &format!("host=h sslmode={mode} sslrootcert=/ca.crt"),
                &["/ca.crt"],
            )
            .unwrap();
            assert_eq!(plan.verify, None, "{mode}");
            assert!(!plan.asks_server(), "{mode}");
        }
        let default = plan("host=h", &[]).unwrap();
        assert_eq!(default.mode, SslMode::Prefer);
        assert_eq!(default.verify, None);
    }

    #[test]
    fn require_checks_nothing_without_a_root_certificate_and_the_chain_with_one() {
        let bare = plan("host=h sslmode=require", &[]).unwrap();
        assert_eq!(bare.verify, None);
        assert!(bare.asks_server());
        let named = plan("host=h sslmode=require sslrootcert=/ca.crt", &["/ca.crt"]).unwrap();
        assert_eq!(
            named.verify,
            Some(Verify {
                roots: file("/ca.crt"),
                host: false
            })
        );
        let default_root = format!("{HOME}/.postgresql/root.crt");
        let found = plan("host=h sslmode=require", &[&default_root]).unwrap();
        assert_eq!(
            found.verify,
            Some(Verify {
                roots: Roots::File {
                    path: default_root.into(),
                    default: true
                },
                host: false
            })
        );
    }

    #[test]
    fn verify_ca_checks_the_chain_and_verify_full_the_host_too() {
        let ca = plan("host=h sslmode=verify-ca sslrootcert=/ca.crt", &["/ca.crt"]).unwrap();
        assert_eq!(
            ca.verify,
            Some(Verify {
                roots: file("/ca.crt"),
                host: false
            })
        );
        let full = plan(
            "host=h sslmode=verify-full sslrootcert=/ca.crt",
            &["/ca.crt"],
        )
        .unwrap();
        assert_eq!(
            full.verify,
            Some(Verify {
                roots: file("/ca.crt"),
                host: true
            })
        );
        assert!(full.asks_server());
    }

    #[test]
    fn verify_ca_without_a_root_certificate_says_where_it_looked_and_how_to_name_one() {
        let error = plan("host=h sslmode=verify-ca", &[])
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("sslmode=verify-ca needs the server's certificate authority"),
            "{error}"
        );
        assert!(
            error.contains("/home/history/.postgresql/root.crt does not exist"),
            "{error}"
        );
        assert!(error.contains("sslrootcert=/path/to/ca.crt"), "{error}");
    }

    #[test]
    fn a_file_the_string_names_must_exist() {
        for (text, key) in [
            (
                "host=h sslmode=verify-full sslrootcert=/gone.crt",
                "sslrootcert",
            ),
            (
                "host=h sslmode=require sslrootcert=/gone.crt",
                "sslrootcert",
            ),
            ("host=h sslcert=/gone.crt", "sslcert"),
            ("host=h sslkey=/gone.key", "sslkey"),
        ] {
            let error = plan(text, &[]).unwrap_err().to_string();
            assert!(
                error.starts_with(&format!("{key} /gone.")),
                "{text}: {error}"
            );
            assert!(error.ends_with("does not exist"), "{text}: {error}");
        }
    }

    #[test]
    fn the_system_trust_store_means_verify_full_and_refuses_weaker_modes() {
        let plan_system = plan("host=h sslrootcert=system", &[]).unwrap();
        assert_eq!(plan_system.mode, SslMode::VerifyFull);
        assert_eq!(
            plan_system.verify,
            Some(Verify {
                roots: Roots::System,
                host: true
            })
        );
        let error = plan("host=h sslrootcert=system sslmode=verify-ca", &[]).unwrap_err();
        assert_eq!(error, PlanError::WeakModeForSystemRoots(SslMode::VerifyCa));
        assert!(error.to_string().contains("sslmode=verify-ca"));
    }

    #[test]
    fn a_client_certificate_is_the_named_one_or_libpqs_default_with_its_key() {
        let named = plan("host=h sslcert=/c.crt sslkey=/c.key", &["/c.crt", "/c.key"]).unwrap();
        assert_eq!(
            named.client,
            Some(ClientCert {
                cert: "/c.crt".into(),
                key: "/c.key".into()
            })
        );
        let crt = format!("{HOME}/.postgresql/postgresql.crt");
        let key = format!("{HOME}/.postgresql/postgresql.key");
        let defaults = plan("host=h", &[&crt, &key]).unwrap();
        assert_eq!(
            defaults.client,
            Some(ClientCert {
                cert: crt.clone().into(),
                key: key.clone().into()
            })
        );
        let error = plan("host=h", &[&crt]).unwrap_err().to_string();
        assert!(
            error.starts_with(&format!("sslkey {key} does not exist")),
            "{error}"
        );
        assert_eq!(plan("host=h", &[]).unwrap().client, None);
        assert_eq!(
            plan("host=h sslmode=disable", &[&crt, &key])
                .unwrap()
                .client,
            None
        );
    }

    #[test]
    fn direct_negotiation_needs_a_mode_that_requires_tls() {
        let error = plan("host=h sslnegotiation=direct", &[]).unwrap_err();
        assert_eq!(error, PlanError::WeakModeForDirect(SslMode::Prefer));
        let direct = plan("host=h sslnegotiation=direct sslmode=require", &[]).unwrap();
        assert!(direct.direct && !direct.asks_server());
    }

    #[test]
    fn the_key_passphrase_is_kept_and_never_shown() {
        let plan = plan(
            "host=h sslcert=/c.crt sslkey=/c.key sslpassword=swordfish",
            &["/c.crt", "/c.key"],
        )
        .unwrap();
        assert_eq!(
            plan.key_password.as_ref().map(KeyPassword::expose),
            Some("swordfish")
        );
        assert!(!format!("{plan:?}").contains("swordfish"));
    }
}
