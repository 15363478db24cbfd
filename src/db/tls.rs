//! The TLS side of the database connections, with OpenSSL (the one TLS library of the product,
//! also librdkafka's and the admin server's): the connector a [`TlsPlan`] describes, its files
//! read once, and handshake failures explained in libpq's terms — the sslmode that asked for
//! TLS, the authorities the chain did not reach, the host name the certificate does not name.

use std::fmt;
use std::future::Future;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use openssl::error::ErrorStack;
use openssl::pkey::{PKey, Private};
use openssl::ssl::{SslConnector, SslMethod, SslVerifyMode, SslVersion};
use openssl::x509::store::X509StoreBuilder;
use openssl::x509::{X509, X509VerifyResult};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio_postgres::tls::{MakeTlsConnect, TlsConnect};

use super::sslmode::{KeyPassword, Roots, SslMode, TlsPlan};

/// A file the TLS settings name could not be used; the message names the key.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("{key} {} cannot be read", path.display())]
    Read {
        key: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{key} {} holds no certificate OpenSSL can read (PEM)", path.display())]
    Certificate {
        key: &'static str,
        path: PathBuf,
        #[source]
        source: Option<ErrorStack>,
    },
    #[error("sslkey {} holds no private key OpenSSL can read{hint}", path.display())]
    Key {
        path: PathBuf,
        /// What to try, when something suggests it.
        hint: &'static str,
        #[source]
        source: ErrorStack,
    },
    #[error(
        "sslkey {} has group or world access; it must be u=rw (0600) or less, or u=rw,g=r (0640) \
         or less if owned by root (libpq refuses it too)",
        path.display()
    )]
    KeyPermissions { path: PathBuf },
    #[error("sslkey {} is not the key of sslcert {}", key.display(), cert.display())]
    KeyMismatch {
        key: PathBuf,
        cert: PathBuf,
        #[source]
        source: ErrorStack,
    },
    #[error("OpenSSL could not set up TLS")]
    OpenSsl(#[source] ErrorStack),
}

/// The handshake's cause, as the TLS library gave it.
type Cause = Box<dyn std::error::Error + Send + Sync>;

/// A connection's TLS failed; the message names the setting behind it. tokio-postgres shows it
/// after its own "error performing TLS handshake".
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("the server does not support TLS, and sslmode={0} asks for it")]
    NotOffered(SslMode),
    #[error("could not ask the server for TLS")]
    Ask(#[source] io::Error),
    #[error(
        "the host name {host} does not match the server's certificate (sslmode=verify-full \
         checks it; verify-ca would not)"
    )]
    HostMismatch {
        host: String,
        #[source]
        reason: X509VerifyResult,
    },
    #[error(
        "certificate verify failed: the server's certificate does not chain to an authority of \
         {roots} (sslmode={mode})"
    )]
    UnknownAuthority {
        roots: String,
        mode: SslMode,
        #[source]
        reason: X509VerifyResult,
    },
    #[error("certificate verify failed (sslmode={mode}, {roots})")]
    Rejected {
        roots: String,
        mode: SslMode,
        #[source]
        reason: X509VerifyResult,
    },
    #[error("the TLS handshake failed (sslmode={mode})")]
    Handshake {
        mode: SslMode,
        #[source]
        cause: Cause,
    },
}

/// OpenSSL's `X509_V_ERR_*` numbers (`x509_vfy.h`, stable across versions) that mean "no
/// trusted authority signed this chain".
const UNKNOWN_AUTHORITY: [i32; 5] = [
    2,  // UNABLE_TO_GET_ISSUER_CERT
    18, // DEPTH_ZERO_SELF_SIGNED_CERT
    19, // SELF_SIGNED_CERT_IN_CHAIN
    20, // UNABLE_TO_GET_ISSUER_CERT_LOCALLY
    21, // UNABLE_TO_VERIFY_LEAF_SIGNATURE
];
/// ... and that the certificate is not for the host (or address) dialled.
const HOST_MISMATCH: [i32; 2] = [
    62, // HOSTNAME_MISMATCH
    64, // IP_ADDRESS_MISMATCH
];

/// Makes the TLS side of each connection as its plan says; cheap to clone (the OpenSSL context
/// is shared).
#[derive(Clone)]
pub struct Connector {
    ssl: SslConnector,
    plan: Arc<TlsPlan>,
}

impl fmt::Debug for Connector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Connector")
            .field("plan", &self.plan)
            .finish_non_exhaustive()
    }
}

impl Connector {
    /// Reads the plan's files: the authorities, the client certificate and its key.
    pub fn new(plan: TlsPlan) -> Result<Connector, SetupError> {
        let mut builder =
            SslConnector::builder(SslMethod::tls_client()).map_err(SetupError::OpenSsl)?;
        // libpq's default ssl_min_protocol_version, and the ALPN protocol libpq 17 sends.
        builder
            .set_min_proto_version(Some(SslVersion::TLS1_2))
            .map_err(SetupError::OpenSsl)?;
        postgres_openssl::set_postgresql_alpn(&mut builder).map_err(SetupError::OpenSsl)?;
        // The builder trusts the system's store; a root file replaces it, as in libpq.
        if let Some(Roots::File { path, .. }) = plan.verify.as_ref().map(|v| &v.roots) {
            let mut store = X509StoreBuilder::new().map_err(SetupError::OpenSsl)?;
            for cert in certificates("sslrootcert", path)? {
                store.add_cert(cert).map_err(SetupError::OpenSsl)?;
            }
            builder.set_cert_store(store.build());
        }
        if let Some(client) = &plan.client {
            let mut chain = certificates("sslcert", &client.cert)?.into_iter();
            let leaf = chain.next().ok_or_else(|| SetupError::Certificate {
                key: "sslcert",
                path: client.cert.clone(),
                source: None,
            })?;
            builder
                .set_certificate(&leaf)
                .map_err(SetupError::OpenSsl)?;
            for intermediate in chain {
                builder
                    .add_extra_chain_cert(intermediate)
                    .map_err(SetupError::OpenSsl)?;
            }
            let key = private_key(&client.key, plan.key_password.as_ref())?;
            builder.set_private_key(&key).map_err(SetupError::OpenSsl)?;
            builder
                .check_private_key()
                .map_err(|source| SetupError::KeyMismatch {
                    key: client.key.clone(),
                    cert: client.cert.clone(),
                    source,
                })?;
        }
        Ok(Connector {
            ssl: builder.build(),
            plan: Arc::new(plan),
        })
    }

    pub fn plan(&self) -> &TlsPlan {
        &self.plan
    }
}

fn read(key: &'static str, path: &Path) -> Result<Vec<u8>, SetupError> {
    std::fs::read(path).map_err(|source| SetupError::Read {
        key,
        path: path.to_owned(),
        source,
    })
}

/// Every certificate of a PEM file (a bundle such as RDS's holds many).
fn certificates(key: &'static str, path: &Path) -> Result<Vec<X509>, SetupError> {
    let bytes = read(key, path)?;
    let certificates = X509::stack_from_pem(&bytes).map_err(|source| SetupError::Certificate {
        key,
        path: path.to_owned(),
        source: Some(source),
    })?;
    if certificates.is_empty() {
        return Err(SetupError::Certificate {
            key,
            path: path.to_owned(),
            source: None,
        });
    }
    Ok(certificates)
}

/// The client's key, PEM (encrypted with `sslpassword`, or not) or DER, after libpq's check
/// that nobody else can read it.
fn private_key(path: &Path, password: Option<&KeyPassword>) -> Result<PKey<Private>, SetupError> {
    let metadata = std::fs::metadata(path).map_err(|source| SetupError::Read {
        key: "sslkey",
        path: path.to_owned(),
        source,
    })?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    let mode = metadata.mode();
    let too_open =
        (metadata.uid() == euid && mode & 0o077 != 0) || (metadata.uid() == 0 && mode & 0o037 != 0);
    if too_open {
        return Err(SetupError::KeyPermissions {
            path: path.to_owned(),
        });
    }
    let bytes = read("sslkey", path)?;
    let pem = bytes.starts_with(b"-----BEGIN") || bytes.windows(10).any(|w| w == b"-----BEGIN");
    let parsed = if pem {
        // A callback, never OpenSSL's default, which would prompt on the terminal.
        PKey::private_key_from_pem_callback(&bytes, |buffer| {
            let given = password.map(KeyPassword::expose).unwrap_or_default();
            let given = given.as_bytes();
            if given.len() > buffer.len() {
                return Err(ErrorStack::get());
            }
            buffer[..given.len()].copy_from_slice(given);
            Ok(given.len())
        })
    } else {
        PKey::private_key_from_der(&bytes)
    };
    parsed.map_err(|source| SetupError::Key {
        path: path.to_owned(),
        hint: match (password, bytes.windows(9).any(|w| w == b"ENCRYPTED")) {
            (None, true) => " (it is encrypted: give its passphrase with sslpassword)",
            (Some(_), true) => " (is sslpassword its passphrase?)",
            _ => "",
        },
        source,
    })
}

impl<S> MakeTlsConnect<S> for Connector
where
    S: AsyncRead + AsyncWrite + Unpin + fmt::Debug + Send + Sync + 'static,
{
    type Stream = postgres_openssl::TlsStream<S>;
    type TlsConnect = Handshake;
    type Error = ErrorStack;

    fn make_tls_connect(&mut self, host: &str) -> Result<Handshake, ErrorStack> {
        let mut ssl = self.ssl.configure()?;
        ssl.set_use_server_name_indication(self.plan.sni);
        let failure = Arc::new(Mutex::new(None));
        match &self.plan.verify {
            None => {
                ssl.set_verify_hostname(false);
                ssl.set_verify(SslVerifyMode::NONE);
            }
            Some(verify) => {
                ssl.set_verify_hostname(verify.host);
                let seen = Arc::clone(&failure);
                // Keeps OpenSSL's verdict (ok or not) and remembers the first failure, which
                // the handshake's own error does not say in a form that can be matched.
                ssl.set_verify_callback(SslVerifyMode::PEER, move |ok, context| {
                    if !ok {
                        if let Ok(mut seen) = seen.lock() {
                            seen.get_or_insert(context.error());
                        }
                    }
                    ok
                });
            }
        }
        Ok(Handshake {
            inner: postgres_openssl::TlsConnector::new(ssl, host),
            host: host.to_owned(),
            plan: Arc::clone(&self.plan),
            failure,
        })
    }
}

/// One connection's handshake.
pub struct Handshake {
    inner: postgres_openssl::TlsConnector,
    host: String,
    plan: Arc<TlsPlan>,
    failure: Arc<Mutex<Option<X509VerifyResult>>>,
}

impl<S> TlsConnect<S> for Handshake
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = postgres_openssl::TlsStream<S>;
    type Error = TlsError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Stream, TlsError>> + Send>>;

    fn connect(self, mut stream: S) -> Self::Future {
        Box::pin(async move {
            if self.plan.asks_server() {
                ask_for_tls(&mut stream, self.plan.mode).await?;
            }
            let Handshake {
                inner,
                host,
                plan,
                failure,
            } = self;
            match TlsConnect::<S>::connect(inner, stream).await {
                Ok(stream) => Ok(stream),
                Err(cause) => {
                    let verdict = failure.lock().ok().and_then(|mut seen| seen.take());
                    Err(explain(cause, verdict, &host, &plan))
                }
            }
        })
    }
}

/// PostgreSQL's SSLRequest: length 8, code 80877103.
const SSL_REQUEST: [u8; 8] = [0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f];

/// Asks the server for TLS as libpq does; `S` means yes, anything else no.
async fn ask_for_tls<S>(stream: &mut S, mode: SslMode) -> Result<(), TlsError>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    stream
        .write_all(&SSL_REQUEST)
        .await
        .map_err(TlsError::Ask)?;
    stream.flush().await.map_err(TlsError::Ask)?;
    let mut answer = [0];
    stream
        .read_exact(&mut answer)
        .await
        .map_err(TlsError::Ask)?;
    if answer[0] == b'S' {
        Ok(())
    } else {
        Err(TlsError::NotOffered(mode))
    }
}

/// A failed handshake in libpq's terms: which setting asked for the check that failed.
fn explain(
    cause: Cause,
    verdict: Option<X509VerifyResult>,
    host: &str,
    plan: &TlsPlan,
) -> TlsError {
    let mode = plan.mode;
    let (Some(reason), Some(verify)) = (verdict, &plan.verify) else {
        return TlsError::Handshake { mode, cause };
    };
    let roots = verify.roots.to_string();
    let code = reason.as_raw();
    if HOST_MISMATCH.contains(&code) {
        TlsError::HostMismatch {
            host: host.to_owned(),
            reason,
        }
    } else if UNKNOWN_AUTHORITY.contains(&code) {
        TlsError::UnknownAuthority {
            roots,
            mode,
            reason,
        }
    } else {
        TlsError::Rejected {
            roots,
            mode,
            reason,
        }
    }
}
