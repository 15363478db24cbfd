//! Certificates made on the spot, for the servers the tests and the bench start with TLS on:
//! a certificate authority of their own, server certificates for the names and addresses a
//! client dials, client certificates for mutual TLS. Keys are P-256 (fast to make); every file
//! is PEM, keys unencrypted and readable by their owner only (PostgreSQL refuses a server key
//! that others can read).

use std::fs;
use std::net::IpAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use openssl::asn1::Asn1Time;
use openssl::bn::{BigNum, MsbOption};
use openssl::ec::{EcGroup, EcKey};
use openssl::error::ErrorStack;
use openssl::hash::MessageDigest;
use openssl::nid::Nid;
use openssl::pkey::{PKey, Private};
use openssl::x509::extension::{
    AuthorityKeyIdentifier, BasicConstraints, ExtendedKeyUsage, KeyUsage, SubjectAlternativeName,
    SubjectKeyIdentifier,
};
use openssl::x509::{X509, X509NameBuilder};

/// A certificate or key could not be made or written.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    #[error("openssl refused to make the certificate {0}")]
    OpenSsl(String, #[source] ErrorStack),
    #[error("could not write {0}")]
    Write(PathBuf, #[source] std::io::Error),
}

/// A certificate and its key, as files.
#[derive(Debug, Clone)]
pub struct Issued {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// A certificate authority of its own, written to `dir`.
pub struct Authority {
    dir: PathBuf,
    name: String,
    cert: X509,
    key: PKey<Private>,
    /// The authority's certificate: what a client trusts (`sslrootcert`, `ssl.ca.location`).
    pub cert_path: PathBuf,
}

/// What a certificate is for.
enum Purpose<'a> {
    /// A server reached under these names or addresses.
    Server(&'a [&'a str]),
    /// A client that says it is this name.
    Client,
}

impl Authority {
    /// A new authority called `name`, its certificate written to `dir/<name>.crt`.
    pub fn new(dir: &Path, name: &str) -> Result<Authority, CertError> {
        let failed = |e| CertError::OpenSsl(format!("of the authority {name}"), e);
        let key = new_key().map_err(failed)?;
        let cert = authority_certificate(name, &key).map_err(failed)?;
        let cert_path = dir.join(format!("{name}.crt"));
        write(&cert_path, &cert.to_pem().map_err(failed)?, 0o644)?;
        Ok(Authority {
            dir: dir.to_owned(),
            name: name.to_owned(),
            cert,
            key,
            cert_path,
        })
    }

    /// A server certificate valid for each of `hosts` (DNS names or IP addresses), with the
    /// first as its common name; `file_stem.crt` and `file_stem.key` in the authority's folder.
    pub fn issue_server(&self, file_stem: &str, hosts: &[&str]) -> Result<Issued, CertError> {
        let common_name = hosts.first().copied().unwrap_or("localhost");
        self.issue(file_stem, common_name, Purpose::Server(hosts))
    }

    /// A client certificate whose common name is `common_name` (PostgreSQL's `cert` login maps
    /// it to the database user of that name).
    pub fn issue_client(&self, file_stem: &str, common_name: &str) -> Result<Issued, CertError> {
        self.issue(file_stem, common_name, Purpose::Client)
    }

    fn issue(
        &self,
        file_stem: &str,
        common_name: &str,
        purpose: Purpose<'_>,
    ) -> Result<Issued, CertError> {
        let failed = |e| CertError::OpenSsl(format!("{file_stem} by {}", self.name), e);
        let key = new_key().map_err(failed)?;
        let cert = self.sign(common_name, &key, &purpose).map_err(failed)?;
        let issued = Issued {
            cert: self.dir.join(format!("{file_stem}.crt")),
            key: self.dir.join(format!("{file_stem}.key")),
        };
        write(&issued.cert, &cert.to_pem().map_err(failed)?, 0o644)?;
        write(
            &issued.key,
            &key.private_key_to_pem_pkcs8().map_err(failed)?,
            0o600,
        )?;
        Ok(issued)
    }

    fn sign(
        &self,
        common_name: &str,
        key: &PKey<Private>,
        purpose: &Purpose<'_>,
    ) -> Result<X509, ErrorStack> {
        let mut builder = X509::builder()?;
        builder.set_version(2)?;
        let serial = serial()?.to_asn1_integer()?;
        builder.set_serial_number(&serial)?;
        let mut name = X509NameBuilder::new()?;
        name.append_entry_by_nid(Nid::COMMONNAME, common_name)?;
        let name = name.build();
        builder.set_subject_name(&name)?;
        builder.set_issuer_name(self.cert.subject_name())?;
        builder.set_pubkey(key)?;
        builder.set_not_before(&*Asn1Time::days_from_now(0)?)?;
        builder.set_not_after(&*Asn1Time::days_from_now(30)?)?;
        builder.append_extension(BasicConstraints::new().build()?)?;
        builder.append_extension(
            KeyUsage::new()
                .critical()
                .digital_signature()
                .key_encipherment()
                .build()?,
        )?;
        match purpose {
            Purpose::Server(hosts) => {
                builder.append_extension(ExtendedKeyUsage::new().server_auth().build()?)?;
                let mut names = SubjectAlternativeName::new();
                for host in *hosts {
                    if host.parse::<IpAddr>().is_ok() {
                        names.ip(host);
                    } else {
                        names.dns(host);
                    }
                }
                let names = names.build(&builder.x509v3_context(Some(&self.cert), None))?;
                builder.append_extension(names)?;
            }
            Purpose::Client => {
                builder.append_extension(ExtendedKeyUsage::new().client_auth().build()?)?;
            }
        }
        let key_id =
            SubjectKeyIdentifier::new().build(&builder.x509v3_context(Some(&self.cert), None))?;
        builder.append_extension(key_id)?;
        let authority_id = AuthorityKeyIdentifier::new()
            .keyid(false)
            .build(&builder.x509v3_context(Some(&self.cert), None))?;
        builder.append_extension(authority_id)?;
        builder.sign(&self.key, MessageDigest::sha256())?;
        Ok(builder.build())
    }
}

fn new_key() -> Result<PKey<Private>, ErrorStack> {
    let group = EcGroup::from_curve_name(Nid::X9_62_PRIME256V1)?;
    PKey::from_ec_key(EcKey::generate(&group)?)
}

fn serial() -> Result<BigNum, ErrorStack> {
    let mut serial = BigNum::new()?;
    serial.rand(64, MsbOption::MAYBE_ZERO, false)?;
    Ok(serial)
}

fn authority_certificate(name: &str, key: &PKey<Private>) -> Result<X509, ErrorStack> {
    let mut builder = X509::builder()?;
    builder.set_version(2)?;
    let serial = serial()?.to_asn1_integer()?;
    builder.set_serial_number(&serial)?;
    let mut subject = X509NameBuilder::new()?;
    subject.append_entry_by_nid(Nid::COMMONNAME, name)?;
    let subject = subject.build();
    builder.set_subject_name(&subject)?;
    builder.set_issuer_name(&subject)?;
    builder.set_pubkey(key)?;
    builder.set_not_before(&*Asn1Time::days_from_now(0)?)?;
    builder.set_not_after(&*Asn1Time::days_from_now(30)?)?;
    builder.append_extension(BasicConstraints::new().critical().ca().build()?)?;
    builder.append_extension(
        KeyUsage::new()
            .critical()
            .key_cert_sign()
            .crl_sign()
            .build()?,
    )?;
    let key_id = SubjectKeyIdentifier::new().build(&builder.x509v3_context(None, None))?;
    builder.append_extension(key_id)?;
    builder.sign(key, MessageDigest::sha256())?;
    Ok(builder.build())
}

fn write(path: &Path, bytes: &[u8], mode: u32) -> Result<(), CertError> {
    let failed = |e| CertError::Write(path.to_owned(), e);
    fs::write(path, bytes).map_err(failed)?;
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).map_err(failed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use openssl::stack::Stack;
    use openssl::x509::store::X509StoreBuilder;
    use openssl::x509::{X509StoreContext, X509VerifyResult};

    fn verifies(authority: &Path, cert: &Path) -> bool {
        let ca = X509::from_pem(&fs::read(authority).unwrap()).unwrap();
        let leaf = X509::from_pem(&fs::read(cert).unwrap()).unwrap();
        let mut store = X509StoreBuilder::new().unwrap();
        store.add_cert(ca).unwrap();
        let store = store.build();
        let mut context = X509StoreContext::new().unwrap();
        context
            .init(&store, &leaf, &Stack::new().unwrap(), |c| {
                c.verify_cert()?;
                Ok(c.error())
            })
            .unwrap()
            == X509VerifyResult::OK
    }

    #[test]
    fn issued_certificates_verify_against_their_own_authority_only() {
        let dir = tempfile::tempdir().unwrap();
        let ours = Authority::new(dir.path(), "ours").unwrap();
        let theirs = Authority::new(dir.path(), "theirs").unwrap();
        let server = ours
            .issue_server("server", &["localhost", "127.0.0.1"])
            .unwrap();
        let client = ours.issue_client("client", "history").unwrap();
        assert!(verifies(&ours.cert_path, &server.cert));
        assert!(verifies(&ours.cert_path, &client.cert));
        assert!(!verifies(&theirs.cert_path, &server.cert));
        let mode = fs::metadata(&server.key).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let leaf = X509::from_pem(&fs::read(&server.cert).unwrap()).unwrap();
        let names = leaf.subject_alt_names().unwrap();
        assert_eq!(names.len(), 2);
        assert_eq!(names.get(0).unwrap().dnsname(), Some("localhost"));
        assert_eq!(names.get(1).unwrap().ipaddress(), Some(&[127, 0, 0, 1][..]));
    }
}
