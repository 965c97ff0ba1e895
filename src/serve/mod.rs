//! `gpuscope serve`: a Prometheus exporter over the poller's snapshots.
//! `/metrics` (Prometheus text 0.0.4, or OpenMetrics 1.0 on request),
//! `/snapshot` (the JSON), `/healthz`, and with `--web` a page at `/`
//! that shows the snapshot live; over TLS with `--tls-cert` and
//! `--tls-key`, behind a bearer token with `--token-file`.

mod auth;
mod conns;
pub mod encode;
pub(crate) mod files;
mod labels;
pub mod metrics;
mod negotiate;
mod routes;
mod state;
pub(crate) mod tls;
mod web;

use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;

use crate::poller::SnapshotRx;
use auth::{Access, Token};
pub use conns::{DEFAULT_HEADER_TIMEOUT, DEFAULT_MAX_CONNECTIONS, Limits, MAX_HEADER_BYTES};

/// How long in-flight scrapes may finish after SIGINT/SIGTERM before the
/// server stops regardless: a scraper that holds its connection open must
/// not keep gpuscope alive.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot listen on {addr}: {source}")]
    Bind { addr: SocketAddr, source: io::Error },
    #[error("cannot watch for SIGTERM: {0}")]
    Signal(io::Error),
    #[error("serving HTTP: {0}")]
    Serve(io::Error),
    #[error(transparent)]
    File(#[from] files::FileError),
}

impl ServeError {
    /// A bind failure is a usage problem (address taken or not ours): 2,
    /// like the other errors that stop gpuscope before it does anything.
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::Bind { .. } | Self::File(_) => crate::exit::USAGE,
            Self::Signal(_) | Self::Serve(_) => crate::exit::FAILURE,
        }
    }
}

/// `serve`'s flags, as given.
#[derive(Debug, Clone)]
pub struct Options {
    pub listen: SocketAddr,
    pub limits: Limits,
    /// `--tls-cert` and `--tls-key`, both or neither (clap sees to it).
    pub tls: Option<(PathBuf, PathBuf)>,
    pub token_file: Option<PathBuf>,
    pub token_healthz: bool,
    pub no_processes: bool,
    /// `--web`: the page at `/`.
    pub web: bool,
}

/// The options with their files read and checked: done before NVML is
/// opened, so that a bad file costs nothing.
pub struct Prepared {
    options: Options,
    tls: Option<TlsAcceptor>,
    access: Access,
}

impl Prepared {
    pub fn load(options: Options) -> Result<Self, ServeError> {
        let tls = options.tls.as_ref().map(|(cert, key)| tls::acceptor(cert, key)).transpose()?;
        let token = options.token_file.as_deref().map(Token::load).transpose()?;
        let access = Access { token: token.map(Arc::new), healthz_too: options.token_healthz, web: options.web };
        Ok(Self { options, tls, access })
    }
}

/// What `serve` says on stderr when it listens beyond loopback without
/// both a token and TLS; `None` when there is nothing to warn of.
fn exposure_warning(o: &Options) -> Option<String> {
    let listen = o.listen;
    if listen.ip().is_loopback() || (o.token_file.is_some() && o.tls.is_some()) {
        return None;
    }
    if o.token_file.is_some() {
        return Some(format!(
            "{listen} is not a loopback address and serves plain HTTP: the token and the metrics cross the \
             network in clear text; add --tls-cert and --tls-key"
        ));
    }
    let what = match o.no_processes {
        true => "the GPUs' figures and the PIDs that use them",
        false => "the GPU processes' names, command lines and users",
    };
    Some(format!(
        "{listen} is not a loopback address: anyone who can reach it sees {what}; require a token with \
         --token-file and encrypt with --tls-cert and --tls-key (or serve on loopback behind a reverse proxy)"
    ))
}

/// Serves until SIGINT or SIGTERM, then returns `Ok`.
/// `simulated`: the GPUs are `--demo`'s, which the start-up line says.
pub async fn run(
    prepared: Prepared,
    snapshots: SnapshotRx,
    interval: Duration,
    simulated: bool,
) -> Result<(), ServeError> {
    let Prepared { options, tls, access } = prepared;
    let listen = options.listen;
    let listener = TcpListener::bind(listen).await.map_err(|source| ServeError::Bind { addr: listen, source })?;
    let local = listener.local_addr().map_err(ServeError::Serve)?;
    // Both handlers are in place before the first scrape can be answered: a
    // SIGINT that arrives right after start-up must stop the server cleanly,
    // not kill it (`ctrl_c()` would only register once first polled).
    let mut term = signal(SignalKind::terminate()).map_err(ServeError::Signal)?;
    let mut int = signal(SignalKind::interrupt()).map_err(ServeError::Signal)?;
    if let Some(warning) = exposure_warning(&options) {
        crate::output::stderr::say!("gpuscope: warning: {warning}");
    }
    // Said before the address, which scripts and tests wait for as the
    // sign that start-up is over.
    if simulated {
        crate::output::stderr::say!(
            "gpuscope: the GPUs are simulated (--demo): every figure served is made up (gpuscope_simulated 1)"
        );
    }
    let scheme = if tls.is_some() { "https" } else { "http" };
    let page = if options.web { format!("; the web page: {scheme}://{local}/") } else { String::new() };
    crate::output::stderr::say!("gpuscope: serving {scheme}://{local}/metrics (also /snapshot and /healthz{page})");

    let (stop_tx, stop_rx) = watch::channel(false);
    let stop = async move {
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
        stop_tx.send_replace(true);
        // Serving ends on its own once it has seen the stop.
        std::future::pending::<()>().await;
    };
    let router = routes::router(state::track(snapshots, options.no_processes), interval, access, options.web);
    let service = conns::Service { router, limits: options.limits, tls };
    tokio::select! {
        () = conns::serve(listener, service, stop_rx, SHUTDOWN_GRACE) => Ok(()),
        () = stop => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::cli::{Cli, Command};

    fn options(listen: &str) -> Options {
        let listen = listen.parse().unwrap();
        Options {
            listen,
            limits: Limits::default(),
            tls: None,
            token_file: None,
            token_healthz: false,
            no_processes: false,
            web: false,
        }
    }

    #[test]
    fn beyond_loopback_the_warning_names_what_is_exposed_and_the_remedy() {
        assert_eq!(exposure_warning(&options("127.0.0.1:1")), None);
        let open = exposure_warning(&options("0.0.0.0:1")).unwrap();
        assert!(open.contains("command lines and users") && open.contains("--token-file"), "{open}");
        assert!(open.contains("--tls-cert"), "{open}");
        let hidden = exposure_warning(&Options { no_processes: true, ..options("0.0.0.0:1") }).unwrap();
        assert!(hidden.contains("PIDs") && !hidden.contains("command lines"), "{hidden}");
        let token = Options { token_file: Some("t".into()), ..options("0.0.0.0:1") };
        assert!(exposure_warning(&token).unwrap().contains("clear text"));
        let both = Options { tls: Some(("c".into(), "k".into())), ..token };
        assert_eq!(exposure_warning(&both), None);
    }

    #[test]
    fn listens_on_loopback_by_default() {
        let listen = |args: &[&str]| match Cli::try_parse_from(args).map(|c| c.command) {
            Ok(Some(Command::Serve { listen, .. })) => Ok(listen.to_string()),
            other => Err(format!("{other:?}")),
        };
        assert_eq!(listen(&["gpuscope", "serve"]).unwrap(), "127.0.0.1:10983");
        assert_eq!(listen(&["gpuscope", "serve", "--listen", "[::]:9100", "--demo"]).unwrap(), "[::]:9100");
        assert!(listen(&["gpuscope", "serve", "--listen", "localhost"]).is_err(), "an address, not a name");
    }
}
