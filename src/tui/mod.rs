//! The interactive dashboard (`gpuscope` on a terminal). It reads the
//! poller's snapshots and never calls NVML itself, so a slow driver delays
//! data, never a key press.
//!
//! `run` owns the real terminal and the signals; `run_loop` is the loop
//! itself, which tests drive with scripted events and a `TestBackend`.

mod environ;
mod event_loop;
mod input;
pub mod keys;
pub mod kill;
pub mod mouse;
mod options;
mod probe_tools;
pub mod render;
pub mod rows;
pub(crate) mod signals;
pub mod state;
pub mod steer;
pub mod term;
pub(crate) mod terminal;
pub mod tree;
pub mod update;

use std::io;

use crate::poller::{PollerControl, SnapshotRx};
pub use event_loop::{FRAME, run_loop};
pub(crate) use input::events;
pub use options::{Clock, TuiOptions, color_allowed, utf8_locale};
pub use state::State;

/// The dashboard over a recording: a player stands in for the poller, and
/// the dashboard's clock follows the recording's time.
pub async fn replay(
    rec: crate::recording::Recording,
    history: crate::analysis::config::HistoryConfig,
    alerts: crate::analysis::config::AlertsConfig,
    mut options: TuiOptions,
) -> io::Result<()> {
    let clock = Clock::manual(rec.entries.first().map_or(0, |e| e.time_ms));
    options.clock = clock.clone();
    let (snapshots, handle) = crate::recording::player::start(rec, history, alerts, move |t| clock.set(t));
    // The player's analyzer records the history the charts draw.
    options.history = Some(handle.history.clone());
    options.replay = Some(handle);
    options.real_terminal = true;
    let mut signals = signals::QuitSignals::new()?;
    let _guard = terminal::TerminalGuard::enter(options.mouse)?;
    let mut terminal = term::Term::new(term::stdout_backend())?;
    tokio::select! {
        result = run_loop(&mut terminal, input::events()?, snapshots, None, options) => result,
        _ = signals.recv() => Ok(()),
    }
}

/// Runs the dashboard on this process's terminal until `q`, Ctrl-C,
/// SIGTERM, SIGHUP or SIGINT; the terminal is restored on every way out,
/// a panic included.
pub async fn run(snapshots: SnapshotRx, control: PollerControl, mut options: TuiOptions) -> io::Result<()> {
    options.real_terminal = true;
    let mut signals = signals::QuitSignals::new()?;
    let _guard = terminal::TerminalGuard::enter(options.mouse)?;
    let mut terminal = term::Term::new(term::stdout_backend())?;
    tokio::select! {
        result = run_loop(&mut terminal, input::events()?, snapshots, Some(control), options) => result,
        _ = signals.recv() => Ok(()),
    }
}
