//! `--tls-cert` and `--tls-key`: the server's TLS configuration (rustls
//! with ring; TLS 1.2 and 1.3; HTTP/1.1 only, announced by ALPN).

use std::path::Path;
use std::sync::Arc;

use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::{self, ServerConfig};

use super::files::{self, FileError, Kind};

const CERT: &str = "--tls-cert";
const KEY: &str = "--tls-key";

/// Reads and checks both files; every problem names the file it is in.
pub fn acceptor(cert: &Path, key: &Path) -> Result<TlsAcceptor, FileError> {
    let chain = certificates(CERT, cert)?;
    let key_der = private_key(key)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    // Parsed here first so that a key ring cannot use is blamed on the key
    // file; what fails below is then the certificate or the pair.
    provider
        .key_provider
        .load_private_key(key_der.clone_key())
        .map_err(|e| FileError::new(KEY, key, format!("not a usable private key: {e}")))?;
    let builder = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| FileError::new(CERT, cert, format!("no TLS version to serve it with: {e}")))?;
    let mut config = builder.with_no_client_auth().with_single_cert(chain, key_der).map_err(|e| match e {
        rustls::Error::InconsistentKeys(_) => {
            FileError::new(KEY, key, format!("does not match the certificate in {}", cert.display()))
        }
        other => FileError::new(CERT, cert, format!("not a usable certificate and key: {other}")),
    })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// The PEM certificates in `path` (at least one), read with `files.rs`'s
/// checks; `--ca` of `fleet` reads its bundle the same way.
pub(crate) fn certificates(flag: &'static str, path: &Path) -> Result<Vec<CertificateDer<'static>>, FileError> {
    let pem = files::read(flag, path, Kind::Public)?;
    let chain = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| FileError::new(flag, path, format!("not PEM: {e}")))?;
    if chain.is_empty() {
        return Err(FileError::new(flag, path, "holds no PEM certificate (-----BEGIN CERTIFICATE-----)"));
    }
    Ok(chain)
}

fn private_key(path: &Path) -> Result<PrivateKeyDer<'static>, FileError> {
    let pem = files::read(KEY, path, Kind::Secret)?;
    PrivateKeyDer::from_pem_slice(&pem)
        .map_err(|e| FileError::new(KEY, path, format!("holds no PEM private key (PKCS#8, PKCS#1 or SEC1): {e}")))
}
