//! A TLS handshake of our own with a broker whose certificate librdkafka refused, to learn why:
//! OpenSSL tells librdkafka only "certificate verify failed", but its verify result says
//! whether the certificate is untrusted, issued for another host or expired. The handshake
//! trusts what librdkafka trusts (`ssl.ca.location`, `ssl.ca.pem`, else the system's
//! authorities) and checks the host name when librdkafka does
//! (`ssl.endpoint.identification.algorithm`); it sends nothing but a ClientHello.

use std::io;
use std::net::{IpAddr, TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::time::Duration;

use openssl::ssl::{HandshakeError, Ssl, SslContext, SslMethod, SslVerifyMode};
use openssl::x509::X509;
use rdkafka::ClientConfig;

use crate::domain::connection::BrokerAddress;

/// What librdkafka trusts, read from its configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trust {
    /// `ssl.ca.location`: a file or a directory (`probe`: the system's).
    pub ca_location: Option<PathBuf>,
    /// `ssl.ca.pem`.
    pub ca_pem: Option<String>,
    /// Whether the certificate must name the host (librdkafka 2's default).
    pub verify_host: bool,
}

impl Trust {
    /// What a client with `config` trusts, if it verifies brokers' certificates at all.
    pub fn of(config: &ClientConfig) -> Option<Trust> {
        let protocol = config.get("security.protocol")?.to_ascii_lowercase();
        if !matches!(protocol.as_str(), "ssl" | "sasl_ssl") {
            return None;
        }
        let verify = config
            .get("enable.ssl.certificate.verification")
            .is_none_or(|v| v != "false");
        if !verify {
            return None;
        }
        Some(Trust {
            ca_location: config
                .get("ssl.ca.location")
                .filter(|l| *l != "probe")
                .map(PathBuf::from),
            ca_pem: config.get("ssl.ca.pem").map(str::to_owned),
            verify_host: config
                .get("ssl.endpoint.identification.algorithm")
                .is_none_or(|a| a.eq_ignore_ascii_case("https")),
        })
    }
}

/// The handshake could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error("could not connect to the broker {0}")]
    Connect(String, #[source] io::Error),
    #[error("could not set up the TLS handshake")]
    Setup(#[source] openssl::error::ErrorStack),
    #[error("the TLS handshake did not end")]
    Interrupted,
}

/// OpenSSL's verify result (`X509_V_*`, 0: the certificate passed) for `broker`'s certificate.
pub fn verify_result(
    broker: &BrokerAddress,
    trust: &Trust,
    timeout: Duration,
) -> Result<i32, ProbeError> {
    let connect_error = |e| ProbeError::Connect(broker.to_string(), e);
    let address = (broker.host.as_str(), broker.port)
        .to_socket_addrs()
        .map_err(connect_error)?
        .next()
        .ok_or_else(|| connect_error(io::ErrorKind::NotFound.into()))?;
    let ssl = ssl_for(broker, trust).map_err(ProbeError::Setup)?;
    let stream = TcpStream::connect_timeout(&address, timeout).map_err(connect_error)?;
    stream
        .set_read_timeout(Some(timeout))
        .and_then(|()| stream.set_write_timeout(Some(timeout)))
        .map_err(connect_error)?;
    match ssl.connect(stream) {
        Ok(stream) => Ok(stream.ssl().verify_result().as_raw()),
        Err(HandshakeError::Failure(mid)) => Ok(mid.ssl().verify_result().as_raw()),
        Err(HandshakeError::SetupFailure(error)) => Err(ProbeError::Setup(error)),
        Err(HandshakeError::WouldBlock(_)) => Err(ProbeError::Interrupted),
    }
}

fn ssl_for(broker: &BrokerAddress, trust: &Trust) -> Result<Ssl, openssl::error::ErrorStack> {
    let mut context = SslContext::builder(SslMethod::tls_client())?;
    context.set_verify(SslVerifyMode::PEER);
    match &trust.ca_location {
        Some(dir) if dir.is_dir() => context.load_verify_locations(None, Some(dir))?,
        Some(file) => context.set_ca_file(file)?,
        None if trust.ca_pem.is_none() => context.set_default_verify_paths()?,
        None => {}
    }
    if let Some(pem) = &trust.ca_pem {
        for cert in X509::stack_from_pem(pem.as_bytes())? {
            context.cert_store_mut().add_cert(cert)?;
        }
    }
    let context = context.build();
    let mut ssl = Ssl::new(&context)?;
    let ip = broker.host.parse::<IpAddr>().ok();
    if ip.is_none() {
        ssl.set_hostname(&broker.host)?;
    }
    if trust.verify_host {
        match ip {
            Some(ip) => ssl.param_mut().set_ip(ip)?,
            None => ssl.param_mut().set_host(&broker.host)?,
        }
    }
    Ok(ssl)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(pairs: &[(&str, &str)]) -> ClientConfig {
        let mut config = ClientConfig::new();
        for (key, value) in pairs {
            config.set(*key, *value);
        }
        config
    }

    #[test]
    fn a_client_without_tls_or_without_verification_has_nothing_to_probe() {
        assert_eq!(Trust::of(&config(&[])), None);
        assert_eq!(
            Trust::of(&config(&[("security.protocol", "sasl_plaintext")])),
            None
        );
        assert_eq!(
            Trust::of(&config(&[
                ("security.protocol", "SSL"),
                ("enable.ssl.certificate.verification", "false")
            ])),
            None
        );
    }

    #[test]
    fn the_probe_trusts_what_librdkafka_trusts_and_checks_the_host_as_it_does() {
        let trust = Trust::of(&config(&[
            ("security.protocol", "SASL_SSL"),
            ("ssl.ca.location", "/etc/kafka/ca.pem"),
        ]))
        .unwrap();
        assert_eq!(
            trust,
            Trust {
                ca_location: Some("/etc/kafka/ca.pem".into()),
                ca_pem: None,
                verify_host: true,
            }
        );
        let system = Trust::of(&config(&[
            ("security.protocol", "ssl"),
            ("ssl.ca.location", "probe"),
            ("ssl.endpoint.identification.algorithm", "none"),
        ]))
        .unwrap();
        assert_eq!(system.ca_location, None);
        assert!(!system.verify_host);
    }
}
