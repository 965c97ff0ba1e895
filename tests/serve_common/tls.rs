//! TLS for `serve`'s tests: a CA and a server certificate made on the spot
//! (rcgen), files written as an operator would (the key private), and a
//! rustls client that trusts a given CA.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};
use tokio_rustls::rustls::{self, ClientConfig, ClientConnection, RootCertStore, StreamOwned};

use super::{Response, parse, request};

/// A CA, and a certificate it signed for `localhost` and 127.0.0.1.
pub struct Pki {
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
    ca_der: CertificateDer<'static>,
}

impl Pki {
    pub fn new(dir: &Path, name: &str) -> Self {
        Self::for_names(dir, name, &["localhost", "127.0.0.1"])
    }

    /// A CA, and a certificate it signed for `names` only.
    pub fn for_names(dir: &Path, name: &str, names: &[&str]) -> Self {
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.distinguished_name.push(DnType::CommonName, format!("gpuscope test CA {name}"));
        let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
        let key = KeyPair::generate().unwrap();
        let params = CertificateParams::new(names.iter().map(ToString::to_string).collect::<Vec<_>>()).unwrap();
        let cert = params.signed_by(&key, &ca).unwrap();
        let pki = Self {
            ca: dir.join(format!("{name}-ca.pem")),
            cert: dir.join(format!("{name}-cert.pem")),
            key: dir.join(format!("{name}-key.pem")),
            ca_der: ca.der().clone(),
        };
        std::fs::write(&pki.ca, ca.pem()).unwrap();
        std::fs::write(&pki.cert, cert.pem()).unwrap();
        write_private(&pki.key, &key.serialize_pem());
        pki
    }

    /// A client that trusts this CA only.
    pub fn client(&self) -> Arc<ClientConfig> {
        let mut roots = RootCertStore::empty();
        roots.add(self.ca_der.clone()).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        Arc::new(config)
    }
}

/// A file only its owner may read, as a key or a token must be.
pub fn write_private(path: &Path, content: &str) {
    std::fs::write(path, content).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

/// One GET over a fresh TLS connection; the error is rustls's (a refused
/// certificate, say) as the client saw it.
pub fn tls_get(
    addr: SocketAddr,
    client: Arc<ClientConfig>,
    path: &str,
    headers: &[(&str, &str)],
) -> Result<Response, std::io::Error> {
    let tcp = TcpStream::connect(addr)?;
    tcp.set_read_timeout(Some(Duration::from_secs(30)))?;
    let name = ServerName::try_from("localhost").unwrap();
    let conn = ClientConnection::new(client, name).map_err(std::io::Error::other)?;
    let mut stream = StreamOwned::new(conn, tcp);
    stream.write_all(request(addr, path, headers).as_bytes())?;
    let mut raw = Vec::new();
    match stream.read_to_end(&mut raw) {
        Ok(_) => {}
        // The server may close without close_notify once the whole response is out.
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && !raw.is_empty() => {}
        Err(e) => return Err(e),
    }
    Ok(parse(&raw))
}
