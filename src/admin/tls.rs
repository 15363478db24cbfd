//! HTTPS on the admin listeners: the certificate chain and key of `--admin-tls-cert` and
//! `--admin-tls-key`, read and checked once as the service starts (a configuration error naming
//! the file's key, never a failure on the first connection), one OpenSSL acceptor per listener,
//! and the `Strict-Transport-Security` header that only HTTPS responses carry.

use std::path::Path;

use openssl::error::ErrorStack;
use openssl::pkey::{PKey, Private};
use openssl::ssl::{SslAcceptor, SslAcceptorBuilder, SslMethod};
use openssl::x509::X509;

use crate::config::admin::TlsFiles;
use crate::config::{ConfigError, Key, key};

/// `Strict-Transport-Security` of every HTTPS response: a year. Browsers apply it to the host
/// name, every port included, and ignore it on a connection with certificate errors.
pub const HSTS: &str = "max-age=31536000";

/// The admin's certificate chain and the private key that belongs to its first certificate.
/// No `Debug`: it holds the key.
#[derive(Clone)]
pub struct AdminTls {
    /// The server's certificate, then the intermediates a client needs to reach its root.
    chain: Vec<X509>,
    key: PKey<Private>,
}

impl AdminTls {
    /// Reads both files and checks that they serve TLS: PEM, an unencrypted key, the key of the
    /// first certificate. Each error names the key of the file to fix.
    pub fn load(files: &TlsFiles) -> Result<AdminTls, ConfigError> {
        let chain = read_chain(&files.cert)?;
        let key = read_key(&files.key)?;
        let tls = AdminTls { chain, key };
        let matches = tls.chain[0]
            .public_key()
            .is_ok_and(|public| tls.key.public_eq(&public));
        if !matches {
            return Err(ConfigError::new(
                format!("{} and {}", key::ADMIN_TLS_CERT, key::ADMIN_TLS_KEY),
                format!(
                    "the private key in {} does not belong to the first certificate in {}",
                    files.key.display(),
                    files.cert.display()
                ),
            ));
        }
        // Whatever else OpenSSL refuses (a key too weak for its security level, say) shows
        // now, not when the listener is built.
        tls.acceptor().map_err(|error| {
            ConfigError::new(
                format!("{} and {}", key::ADMIN_TLS_CERT, key::ADMIN_TLS_KEY),
                format!("OpenSSL refuses them: {error}"),
            )
        })?;
        tls.warn_if_expired(&files.cert);
        Ok(tls)
    }

    /// A fresh acceptor for one listener: Mozilla's "intermediate" settings (TLS 1.2 and 1.3).
    pub fn acceptor(&self) -> Result<SslAcceptorBuilder, ErrorStack> {
        let mut builder = SslAcceptor::mozilla_intermediate_v5(SslMethod::tls_server())?;
        builder.set_certificate(&self.chain[0])?;
        for intermediate in &self.chain[1..] {
            builder.add_extra_chain_cert(intermediate.clone())?;
        }
        builder.set_private_key(&self.key)?;
        builder.check_private_key()?;
        Ok(builder)
    }

    /// An expired certificate still starts the service (an operator may be replacing it), but
    /// every browser will refuse it: say so once.
    fn warn_if_expired(&self, path: &Path) {
        let Ok(now) = openssl::asn1::Asn1Time::days_from_now(0) else {
            return;
        };
        let certificate = &self.chain[0];
        if certificate.not_after() < now {
            tracing::warn!(
                path = %path.display(),
                not_after = %certificate.not_after(),
                "the admin tls certificate has expired"
            );
        }
    }
}

fn read(path: &Path, key: Key) -> Result<Vec<u8>, ConfigError> {
    std::fs::read(path)
        .map_err(|error| ConfigError::at(key, format!("cannot read {}: {error}", path.display())))
}

fn read_chain(path: &Path) -> Result<Vec<X509>, ConfigError> {
    let pem = read(path, key::ADMIN_TLS_CERT)?;
    let not_pem = |reason: String| {
        ConfigError::at(
            key::ADMIN_TLS_CERT,
            format!("{} holds no PEM certificate: {reason}", path.display()),
        )
    };
    let chain = X509::stack_from_pem(&pem).map_err(|error| not_pem(error.to_string()))?;
    if chain.is_empty() {
        return Err(not_pem("no BEGIN CERTIFICATE line".into()));
    }
    Ok(chain)
}

fn read_key(path: &Path) -> Result<PKey<Private>, ConfigError> {
    let pem = read(path, key::ADMIN_TLS_KEY)?;
    let mut encrypted = false;
    // A callback of our own, or OpenSSL would ask for a passphrase on the terminal; it gives
    // none, so an encrypted key fails here.
    let parsed = PKey::private_key_from_pem_callback(&pem, |_| {
        encrypted = true;
        Ok(0)
    });
    parsed.map_err(|error| {
        let reason = if encrypted {
            "it is encrypted; give the key without a passphrase (readable by the service only)"
                .to_owned()
        } else {
            format!("no PEM private key: {error}")
        };
        ConfigError::at(key::ADMIN_TLS_KEY, format!("{}: {reason}", path.display()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(dir: &Path, cert: &str, key: &str) -> TlsFiles {
        let (cert_path, key_path) = (dir.join("x.crt"), dir.join("x.key"));
        std::fs::write(&cert_path, cert).unwrap();
        std::fs::write(&key_path, key).unwrap();
        TlsFiles {
            cert: cert_path,
            key: key_path,
        }
    }

    fn self_signed() -> (String, String) {
        let key = PKey::from_rsa(openssl::rsa::Rsa::generate(2048).unwrap()).unwrap();
        let mut name = openssl::x509::X509NameBuilder::new().unwrap();
        name.append_entry_by_text("CN", "localhost").unwrap();
        let name = name.build();
        let mut builder = X509::builder().unwrap();
        builder.set_version(2).unwrap();
        builder.set_subject_name(&name).unwrap();
        builder.set_issuer_name(&name).unwrap();
        builder.set_pubkey(&key).unwrap();
        let start = openssl::asn1::Asn1Time::days_from_now(0).unwrap();
        let end = openssl::asn1::Asn1Time::days_from_now(1).unwrap();
        builder.set_not_before(&start).unwrap();
        builder.set_not_after(&end).unwrap();
        builder
            .sign(&key, openssl::hash::MessageDigest::sha256())
            .unwrap();
        let cert = String::from_utf8(builder.build().to_pem().unwrap()).unwrap();
        let key = String::from_utf8(key.private_key_to_pem_pkcs8().unwrap()).unwrap();
        (cert, key)
    }

    #[test]
    fn a_matching_pair_loads_and_makes_acceptors() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = self_signed();
        let tls = AdminTls::load(&files(dir.path(), &cert, &key)).unwrap();
        assert!(tls.acceptor().is_ok());
        assert!(tls.acceptor().is_ok(), "one acceptor per listener");
    }

    #[test]
    fn each_unusable_file_is_named_by_its_key() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = self_signed();
        let (_, other_key) = self_signed();
        let cert_key = key::ADMIN_TLS_CERT.to_string();
        let key_key = key::ADMIN_TLS_KEY.to_string();

        let missing = TlsFiles {
            cert: dir.path().join("absent.crt"),
            key: dir.path().join("absent.key"),
        };
        let error = AdminTls::load(&missing).err().unwrap();
        assert_eq!(error.key, cert_key, "{error}");
        assert!(error.message.contains("absent.crt"), "{error}");

        let error = AdminTls::load(&files(dir.path(), "not a certificate", &key))
            .err()
            .unwrap();
        assert_eq!(error.key, cert_key, "{error}");

        let error = AdminTls::load(&files(dir.path(), &cert, "not a key"))
            .err()
            .unwrap();
        assert_eq!(error.key, key_key, "{error}");

        let error = AdminTls::load(&files(dir.path(), &cert, &other_key))
            .err()
            .unwrap();
        assert!(
            error.key.contains(&key_key) && error.key.contains(&cert_key),
            "{error}"
        );
        assert!(error.message.contains("does not belong"), "{error}");
        assert!(
            !error.to_string().contains("PRIVATE KEY"),
            "no key material in errors: {error}"
        );
    }

    #[test]
    fn an_encrypted_key_is_refused_without_asking_for_a_passphrase() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, _) = self_signed();
        let rsa = openssl::rsa::Rsa::generate(2048).unwrap();
        let encrypted = rsa
            .private_key_to_pem_passphrase(openssl::symm::Cipher::aes_128_cbc(), b"passphrase")
            .unwrap();
        let error = AdminTls::load(&files(
            dir.path(),
            &cert,
            std::str::from_utf8(&encrypted).unwrap(),
        ))
        .err()
        .unwrap();
        assert_eq!(error.key, key::ADMIN_TLS_KEY.to_string(), "{error}");
        assert!(error.message.contains("encrypted"), "{error}");
    }
}
