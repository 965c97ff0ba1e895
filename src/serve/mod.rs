//! `gpuscope serve`: a Prometheus exporter over the poller's snapshots.
//! `/metrics` (Prometheus text 0.0.4, or OpenMetrics 1.0 on request),
//! `/snapshot` (the JSON), `/healthz`.

mod conns;
pub mod encode;
mod labels;
pub mod metrics;
mod negotiate;
mod routes;
mod state;

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::watch;

use crate::poller::SnapshotRx;
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
}

impl ServeError {
    /// A bind failure is a usage problem (address taken or not ours): 2,
    /// like the other errors that stop gpuscope before it does anything.
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::Bind { .. } => crate::exit::USAGE,
            Self::Signal(_) | Self::Serve(_) => crate::exit::FAILURE,
        }
    }
}

/// Serves until SIGINT or SIGTERM, then returns `Ok`.
pub async fn run(
    listen: SocketAddr,
    snapshots: SnapshotRx,
    interval: Duration,
    limits: Limits,
) -> Result<(), ServeError> {
    let listener = TcpListener::bind(listen).await.map_err(|source| ServeError::Bind { addr: listen, source })?;
    let local = listener.local_addr().map_err(ServeError::Serve)?;
    let mut term = signal(SignalKind::terminate()).map_err(ServeError::Signal)?;
    if !listen.ip().is_loopback() {
        eprintln!(
            "gpuscope: warning: {listen} is not a loopback address: anyone who can reach it sees the GPU \
             processes' names, command lines and users"
        );
    }
    eprintln!("gpuscope: serving http://{local}/metrics (also /snapshot and /healthz)");

    let (stop_tx, stop_rx) = watch::channel(false);
    let stop = async move {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        stop_tx.send_replace(true);
        // Serving ends on its own once it has seen the stop.
        std::future::pending::<()>().await;
    };
    let router = routes::router(state::track(snapshots), interval);
    tokio::select! {
        () = conns::serve(listener, router, limits, stop_rx, SHUTDOWN_GRACE) => Ok(()),
        () = stop => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use crate::cli::{Cli, Command};

    #[test]
    fn listens_on_loopback_by_default() {
        let listen = |args: &[&str]| match Cli::try_parse_from(args).map(|c| c.command) {
            Ok(Some(Command::Serve { listen, .. })) => Ok(listen.to_string()),
            other => Err(format!("{other:?}")),
        };
        assert_eq!(listen(&["gpuscope", "serve"]).unwrap(), "127.0.0.1:9835");
        assert_eq!(listen(&["gpuscope", "serve", "--listen", "[::]:9100", "--demo"]).unwrap(), "[::]:9100");
        assert!(listen(&["gpuscope", "serve", "--listen", "localhost"]).is_err(), "an address, not a name");
    }
}
