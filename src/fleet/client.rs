//! A minimal HTTP/1.1 GET over hyper 1 on the caller's tokio runtime: one
//! connection per request (`Connection: close`), the whole exchange under a
//! deadline, the body capped, the bearer token sent. `https://` hosts speak
//! TLS (rustls with ring, HTTP/1.1 by ALPN) against the CA of `--ca` only:
//! no system trust store, so that what is trusted is what was named.

use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Empty, Limited};
use hyper::body::Bytes;
use hyper::header::{AUTHORIZATION, CONNECTION, HOST, HeaderValue};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls::pki_types::ServerName;

use super::hosts::{HostSpec, Scheme};

/// A `/snapshot` of hundreds of GPUs and thousands of processes is a few
/// MiB; anything past this is not one.
pub const MAX_BODY: usize = 16 << 20;

#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("no answer within {}", humantime::format_duration(*.0))]
    Timeout(Duration),
    #[error("cannot connect: {0}")]
    Connect(std::io::Error),
    #[error("HTTP: {0}")]
    Http(String),
    #[error("HTTP {status}: {text}")]
    Status { status: u16, text: String },
    /// A plain `http://` request answered with a TLS record.
    #[error("the node answered with TLS: use https://{0} (with --ca)")]
    SpeaksTls(String),
    #[error("the answer is larger than {} MiB", MAX_BODY >> 20)]
    TooLarge,
    #[error("TLS: {0}")]
    Tls(String),
    #[error("{0}")]
    Unsupported(&'static str),
}

#[derive(Clone)]
pub struct Client {
    timeout: Duration,
    /// `Authorization: Bearer ...`, read once from `--token-file`.
    authorization: Option<Arc<HeaderValue>>,
    /// Trusting `--ca`'s certificates; `None` without `--ca`.
    tls: Option<TlsConnector>,
}

impl Client {
    pub fn new(timeout: Duration, token: Option<&str>, tls: Option<TlsConnector>) -> Result<Self, String> {
        let authorization = match token {
            Some(t) => Some(Arc::new(
                HeaderValue::from_str(&format!("Bearer {}", t.trim()))
                    .map_err(|_| "the token has characters a header cannot carry".to_string())?,
            )),
            None => None,
        };
        Ok(Self { timeout, authorization, tls })
    }

    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The body of a 200 answer to `GET path` (with its query), within the
    /// timeout.
    pub async fn get(&self, host: &HostSpec, path: &str) -> Result<Bytes, FetchError> {
        self.get_reply(host, path).await.map(|r| r.body)
    }

    /// A 200 answer's body and headers, within the timeout.
    pub async fn get_reply(&self, host: &HostSpec, path: &str) -> Result<Reply, FetchError> {
        match tokio::time::timeout(self.timeout, self.exchange(host, path)).await {
            Ok(result) => result,
            Err(_) => Err(FetchError::Timeout(self.timeout)),
        }
    }

    async fn exchange(&self, host: &HostSpec, path: &str) -> Result<Reply, FetchError> {
        let stream = TcpStream::connect((host.host.as_str(), host.port)).await.map_err(FetchError::Connect)?;
        let _ = stream.set_nodelay(true);
        let request = self.request(host, path)?;
        if host.scheme == Scheme::Http {
            // Not HTTP/1.x at the first bytes: a TLS alert, as a TLS
            // server sends to a request in clear text.
            return send(stream, request).await.map_err(|e| match e {
                FetchError::Http(why) if why.contains("invalid HTTP version") => {
                    FetchError::SpeaksTls(host.authority())
                }
                e => e,
            });
        }
        let Some(connector) = &self.tls else {
            return Err(FetchError::Unsupported("https:// needs --ca PATH"));
        };
        let name = ServerName::try_from(host.host.clone())
            .map_err(|_| FetchError::Tls(format!("{:?} is not a name a certificate can carry", host.host)))?;
        let tls = connector.connect(name, stream).await.map_err(|e| FetchError::Tls(super::tls::explain(&e)))?;
        send(tls, request).await
    }

    fn request(&self, host: &HostSpec, path: &str) -> Result<hyper::Request<Empty<Bytes>>, FetchError> {
        let mut builder = hyper::Request::get(path).header(HOST, host.authority()).header(CONNECTION, "close");
        if let Some(auth) = &self.authorization {
            builder = builder.header(AUTHORIZATION, auth.as_ref().clone());
        }
        builder.body(Empty::new()).map_err(|e| FetchError::Http(e.to_string()))
    }
}

/// A 200 answer.
pub struct Reply {
    pub body: Bytes,
    pub headers: hyper::HeaderMap,
}

/// One request on a fresh connection, plain or TLS.
async fn send<IO>(io: IO, request: hyper::Request<Empty<Bytes>>) -> Result<Reply, FetchError>
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(TokioIo::new(io)).await.map_err(|e| FetchError::Http(e.to_string()))?;
    let path = request.uri().path().to_string();
    let work = async move {
        let response = sender.send_request(request).await.map_err(|e| FetchError::Http(e.to_string()))?;
        read_body(response, &path).await
    };
    tokio::pin!(work, conn);
    // The connection is driven here rather than on a task of its own, so
    // that a deadline that drops this future closes the socket too.
    tokio::select! {
        result = &mut work => result,
        ended = &mut conn => {
            ended.map_err(|e| FetchError::Http(e.to_string()))?;
            work.await
        }
    }
}

async fn read_body(response: hyper::Response<hyper::body::Incoming>, path: &str) -> Result<Reply, FetchError> {
    let status = response.status();
    let headers = response.headers().clone();
    let body = Limited::new(response.into_body(), MAX_BODY).collect().await.map_err(|e| {
        if e.is::<http_body_util::LengthLimitError>() { FetchError::TooLarge } else { FetchError::Http(e.to_string()) }
    })?;
    let bytes = body.to_bytes();
    if !status.is_success() {
        let text = String::from_utf8_lossy(&bytes[..bytes.len().min(200)]);
        // gpuscope serve's bodies start with their status ("401: ..."): said once.
        let code = format!("{}: ", status.as_u16());
        let text = text.trim().strip_prefix(code.as_str()).unwrap_or(text.trim());
        let text = crate::tui::render::clean_text(text, true);
        return Err(FetchError::Status { status: status.as_u16(), text: explain(status, &headers, path, text) });
    }
    Ok(Reply { body: bytes, headers })
}

/// What an answer other than 200 means here: a redirect is named, not
/// followed (the token would go with it); a 404 is not a gpuscope serve
/// (or not at that port); anything else keeps the node's own reason, or
/// the status's name where it gave none.
fn explain(status: hyper::StatusCode, headers: &hyper::HeaderMap, path: &str, text: String) -> String {
    let said = |what: String| if text.is_empty() { what } else { format!("{what}: {text}") };
    if status.is_redirection() {
        let to = headers.get(hyper::header::LOCATION).and_then(|l| l.to_str().ok());
        let to = to.map_or_else(|| "elsewhere".to_string(), |l| crate::tui::render::clean_text(l, true));
        return format!("a redirect to {to}, not followed: name the host that serves {path} itself");
    }
    if status == hyper::StatusCode::NOT_FOUND {
        let guess = if path == "/snapshot" { "not a gpuscope serve? " } else { "" };
        return said(format!("{guess}{path} answered 404"));
    }
    if text.is_empty() { status.canonical_reason().unwrap_or("no reason given").to_string() } else { text }
}
