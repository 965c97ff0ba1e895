//! `gpuscope fleet` on a terminal: `run` owns the terminal (the local
//! dashboard's guard, restored on every way out) and the quit signals;
//! `run_loop` is the loop, generic over backend and events so tests drive
//! it as `run` does. It redraws on new fleet data or input, plus once a
//! second while a host is stale or down, so that its age keeps counting.

mod render;
mod state;

use std::io;
use std::time::Duration;

use crossterm::event::{Event, KeyEventKind};
use futures_util::{Stream, StreamExt};
use ratatui::backend::Backend;

use super::FleetRx;
use super::model::HostStatus;
use crate::tui::term::{Term, stdout_backend};
use crate::tui::{FRAME, TuiOptions};
pub use render::draw;
pub use state::{Flow, HostSort, Screen, ViewState};

pub async fn run(fleet: FleetRx, mut options: TuiOptions) -> io::Result<()> {
    options.real_terminal = true;
    let mut signals = crate::tui::signals::QuitSignals::new()?;
    let _guard = crate::tui::terminal::TerminalGuard::enter(false)?;
    let mut terminal = Term::new(stdout_backend())?;
    tokio::select! {
        result = run_loop(&mut terminal, crate::tui::events()?, fleet, options) => result,
        _ = signals.recv() => Ok(()),
    }
}

pub async fn run_loop<B, E>(
    terminal: &mut Term<B>,
    mut events: E,
    mut fleet: FleetRx,
    options: TuiOptions,
) -> io::Result<()>
where
    B: Backend,
    B::Error: Send + Sync + 'static,
    E: Stream<Item = io::Result<Event>> + Unpin,
{
    let clock = options.clock.clone();
    let mut view = ViewState::new(fleet.borrow_and_update().clone(), options);
    let mut dirty = true;
    let mut fleet_open = true;
    loop {
        if dirty {
            terminal.draw(|frame| draw(frame, &view, &clock))?;
            dirty = false;
            // At most one frame per period, however fast data and keys come.
            tokio::time::sleep(FRAME).await;
        }
        let ticking = view.fleet.hosts.iter().any(|h| matches!(h.status, HostStatus::Stale | HostStatus::Unreachable));
        tokio::select! {
            event = events.next() => match event {
                None => return Ok(()),
                Some(Err(e)) => return Err(e),
                Some(Ok(Event::Key(key))) if key.kind != KeyEventKind::Release => match view.key(key, clock.now_ms()) {
                    Flow::Quit => return Ok(()),
                    Flow::Redraw => dirty = true,
                    Flow::Same => {}
                },
                Some(Ok(Event::Resize(..))) => {
                    terminal.resized();
                    dirty = true;
                }
                Some(Ok(_)) => {}
            },
            changed = fleet.changed(), if fleet_open => {
                match changed {
                    Ok(()) => view.on_fleet(fleet.borrow_and_update().clone()),
                    Err(_) => fleet_open = false,
                }
                dirty = true;
            },
            () = tokio::time::sleep(Duration::from_secs(1)), if ticking => dirty = true,
        }
    }
}
