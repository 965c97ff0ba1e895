//! The signals that end the dashboard: SIGTERM (kill, systemd), SIGHUP
//! (the terminal or the SSH connection went away) and SIGINT (Ctrl-C when
//! it arrives as a signal rather than a key, e.g. `kill -INT`). Handling
//! them, instead of dying of them, is what lets the terminal be restored.

use std::io;

use tokio::signal::unix::{SignalKind, signal};

/// SIGTSTP (`kill -TSTP`; Ctrl-Z itself arrives as a key in raw mode)
/// and SIGCONT (after a stop, ours or anyone's).
pub struct StopSignals {
    tstp: tokio::signal::unix::Signal,
    cont: tokio::signal::unix::Signal,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    Suspend,
    Continued,
}

impl StopSignals {
    pub fn new() -> io::Result<Self> {
        Ok(Self {
            tstp: signal(SignalKind::from_raw(libc::SIGTSTP))?,
            cont: signal(SignalKind::from_raw(libc::SIGCONT))?,
        })
    }

    pub async fn recv(&mut self) -> Stop {
        tokio::select! {
            _ = self.tstp.recv() => Stop::Suspend,
            _ = self.cont.recv() => Stop::Continued,
        }
    }
}

pub struct QuitSignals {
    term: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

impl QuitSignals {
    pub fn new() -> io::Result<Self> {
        Ok(Self {
            term: signal(SignalKind::terminate())?,
            hup: signal(SignalKind::hangup())?,
            int: signal(SignalKind::interrupt())?,
        })
    }

    /// Waits for the first of them; returns its name.
    pub async fn recv(&mut self) -> &'static str {
        tokio::select! {
            _ = self.term.recv() => "SIGTERM",
            _ = self.hup.recv() => "SIGHUP",
            _ = self.int.recv() => "SIGINT",
        }
    }
}
