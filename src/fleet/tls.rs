//! `--ca`: the certificates an `https://` node's must chain to (rustls with
//! ring, TLS 1.2 and 1.3, HTTP/1.1 by ALPN), and handshake failures put in
//! words a person can act on.

use std::path::Path;
use std::sync::Arc;

use tokio_rustls::TlsConnector;
use tokio_rustls::rustls::{self, CertificateError, ClientConfig, RootCertStore};

use crate::serve::files::FileError;

const CA: &str = "--ca";

/// Reads and checks the bundle; every problem names the file.
pub fn connector(path: &Path) -> Result<TlsConnector, FileError> {
    let certs = crate::serve::tls::certificates(CA, path)?;
    let mut roots = RootCertStore::empty();
    for cert in certs {
        roots.add(cert).map_err(|e| FileError::new(CA, path, format!("not a usable CA certificate: {e}")))?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| FileError::new(CA, path, format!("no TLS version to connect with: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsConnector::from(Arc::new(config)))
}

/// A failed handshake as the host's error line shows it.
pub fn explain(e: &std::io::Error) -> String {
    match e.get_ref().and_then(|inner| inner.downcast_ref::<rustls::Error>()) {
        Some(rustls::Error::InvalidCertificate(cert)) => certificate(cert),
        Some(rustls::Error::InvalidMessage(m)) => {
            format!("the server does not speak TLS (plain HTTP on an https:// host?): {m:?}")
        }
        Some(other) => other.to_string(),
        None if e.kind() == std::io::ErrorKind::UnexpectedEof => {
            "the server closed the connection during the handshake (plain HTTP on an https:// host?)".into()
        }
        None => e.to_string(),
    }
}

fn certificate(e: &CertificateError) -> String {
    match e {
        CertificateError::UnknownIssuer => "certificate not trusted: UnknownIssuer (not signed by a CA in --ca)".into(),
        CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
            format!("certificate name mismatch: {e}")
        }
        other => format!("certificate refused: {other}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bundle_without_certificates_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ca.pem");
        std::fs::write(&path, "not a certificate\n").unwrap();
        let err = connector(&path).err().unwrap().to_string();
        assert!(err.starts_with("--ca ") && err.contains("holds no PEM certificate"), "{err}");
    }

    #[test]
    fn handshake_errors_name_the_problem() {
        let wrap = |e: rustls::Error| std::io::Error::new(std::io::ErrorKind::InvalidData, e);
        let unknown = explain(&wrap(rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer)));
        assert!(unknown.starts_with("certificate not trusted: UnknownIssuer"), "{unknown}");
        let name = explain(&wrap(rustls::Error::InvalidCertificate(CertificateError::NotValidForName)));
        assert!(name.starts_with("certificate name mismatch"), "{name}");
        let plain = explain(&wrap(rustls::Error::InvalidMessage(rustls::InvalidMessage::InvalidContentType)));
        assert!(plain.contains("does not speak TLS"), "{plain}");
    }
}
