//! The dashboard's one loop, generic over the terminal backend and the
//! event source so that tests drive it exactly as `run` does: key and
//! resize events, new snapshots and the clock (once a second while the
//! data is stale, so the age on screen keeps counting, and otherwise not at
//! all) mark the screen dirty;
//! a dirty screen is drawn at most once per frame period, so a burst of
//! input or data costs one frame. Keys have a frame period of their own: a
//! key pressed just after new data was drawn shows at once, not a frame
//! later (over a slow link that frame comes on top of the round trip).

use std::io;
use std::path::PathBuf;
use std::time::Duration;

use crossterm::event::Event;
use futures_util::{Stream, StreamExt};
use ratatui::backend::Backend;
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::probe::memviz::ProbeChannel;
use crate::probe::segmap::{MapState, MapUpdate, Requester};

use crate::poller::{PollerControl, SnapshotRx};
use crate::tui::keys::Action;
use crate::tui::options::{Clock, TuiOptions};
use crate::tui::signals::{Stop, StopSignals};
use crate::tui::state::{State, View};
use crate::tui::steer::Steer;
use crate::tui::term::Term;
use crate::tui::update::{self, Effect};
use crate::tui::{keys, kill, mouse, probe_tools, render, terminal};

const NO_JOB_CONTROL: &str = "not suspended: no shell with job control would resume gpuscope";

/// About ten frames a second at most.
pub const FRAME: Duration = Duration::from_millis(100);

enum Flow {
    Quit,
    Suspend,
    Redraw,
    /// The terminal has a new size: asked before the next frame.
    Resized,
    Same,
}

pub async fn run_loop<B, E>(
    terminal: &mut Term<B>,
    mut events: E,
    mut snapshots: SnapshotRx,
    control: Option<PollerControl>,
    options: TuiOptions,
) -> io::Result<()>
where
    B: Backend,
    B::Error: Send + Sync + 'static,
    E: Stream<Item = io::Result<Event>> + Unpin,
{
    let clock = options.clock.clone();
    let mut state = State::new(&options);
    if let Some(snap) = snapshots.borrow_and_update().clone() {
        state.on_snapshot(snap);
    }
    let mut dirty = true;
    let mut last_draw: Option<Instant> = None;
    // Whether a key made the screen dirty, and when a key's frame was last
    // drawn.
    let mut keyed = false;
    let mut last_key_draw: Option<Instant> = None;
    let mut snapshots_open = true;
    let mut replay_status = options.replay.as_ref().map(|r| r.status.clone());
    let mut stops = if options.real_terminal { Some(StopSignals::new()?) } else { None };
    let mut tools = Tools::new(options.probe_dir.clone());
    let mut steer = Steer::default();
    loop {
        let free = |last: Option<Instant>| last.is_none_or(|t| t.elapsed() >= FRAME);
        if dirty && (free(last_draw) || (keyed && free(last_key_draw))) {
            let mut drawn = (state.page, std::mem::take(&mut state.hits));
            terminal.draw(|frame| drawn = render::draw_with_hits(frame, &state, &clock))?;
            (state.page, state.hits) = drawn;
            if let Some(control) = &control {
                steer.after_frame(&state, control);
            }
            last_draw = Some(Instant::now());
            if keyed {
                last_key_draw = last_draw;
            }
            (dirty, keyed) = (false, false);
        }
        let next_frame = |last: Option<Instant>| last.map_or_else(Instant::now, |t| t + FRAME);
        let next_frame =
            if keyed { next_frame(last_draw).min(next_frame(last_key_draw)) } else { next_frame(last_draw) };
        tokio::select! {
            event = events.next() => match event {
                None => return Ok(()),
                Some(Err(e)) => return Err(e),
                Some(Ok(event)) => match on_event(&mut state, event, control.as_ref(), &clock, &mut tools) {
                    Flow::Quit => return Ok(()),
                    Flow::Suspend => {
                        if options.real_terminal && !terminal::suspend()? {
                            state.status = Some(NO_JOB_CONTROL.into());
                        }
                        terminal.redraw_all()?;
                        dirty = true;
                    }
                    Flow::Redraw => (dirty, keyed) = (true, true),
                    Flow::Resized => {
                        terminal.resized();
                        (dirty, keyed) = (true, true);
                    }
                    Flow::Same => {}
                },
            },
            stop = async {
                match stops.as_mut() {
                    Some(s) => s.recv().await,
                    None => std::future::pending().await,
                }
            } => {
                match stop {
                    Stop::Suspend => {
                        if !terminal::suspend()? {
                            state.status = Some(NO_JOB_CONTROL.into());
                        }
                    }
                    Stop::Continued => terminal::reenter()?,
                }
                terminal.redraw_all()?;
                dirty = true;
            },
            changed = snapshots.changed(), if snapshots_open => {
                match changed {
                    Ok(()) => {
                        if let Some(snap) = snapshots.borrow_and_update().clone() {
                            state.on_snapshot(snap);
                        }
                    }
                    Err(_) => {
                        snapshots_open = false;
                        state.collection_stopped = true;
                    }
                }
                dirty = true;
            },
            // The player's speed, pause and notes change without a new
            // snapshot; the header must follow.
            Ok(()) = async {
                match replay_status.as_mut() {
                    Some(status) => status.changed().await,
                    None => std::future::pending().await,
                }
            } => dirty = true,
            // The segment map's thread has a newer map (or why not).
            Ok(()) = async {
                match tools.segmap.as_mut() {
                    Some(r) => r.updates.changed().await,
                    None => std::future::pending().await,
                }
            } => {
                if let Some(r) = tools.segmap.as_mut() {
                    let update = r.updates.borrow_and_update().clone();
                    // Only for the map on screen, not one just closed.
                    if state.segmap.is_some() {
                        state.segmap = update.or(state.segmap.take());
                    }
                }
                dirty = true;
            },
            Some(done) = tools.done_rx.recv() => {
                match done {
                    Done::Status(message) => state.status = Some(message),
                    Done::Environ(pid, result) => {
                        if let Some(View::Environ { pid: shown, vars }) = state.views.last_mut()
                            && *shown == pid
                        {
                            *vars = Some(result);
                        }
                    }
                }
                dirty = true;
            },
            () = tokio::time::sleep(state.clock_wait(clock.now_ms())) => {
                if state.ticking(clock.now_ms()) {
                    dirty = true;
                }
            },
            () = tokio::time::sleep_until(next_frame), if dirty => {},
        }
    }
}

/// What the dashboard does in a probed process's directory, off the UI
/// task: the segment map's requester thread (started on first use), and
/// one blocking task per `M` or `A`, whose outcome comes back as a status.
struct Tools {
    probe_dir: PathBuf,
    segmap: Option<Requester>,
    done_tx: mpsc::UnboundedSender<Done>,
    done_rx: mpsc::UnboundedReceiver<Done>,
}

/// What a blocking task brings back to the loop.
enum Done {
    Status(String),
    Environ(u32, Result<Vec<(String, String)>, String>),
}

impl Tools {
    fn new(probe_dir: PathBuf) -> Self {
        let (done_tx, done_rx) = mpsc::unbounded_channel();
        Self { probe_dir, segmap: None, done_tx, done_rx }
    }

    fn carry_out(&mut self, state: &mut State, effect: Effect) {
        match effect {
            Effect::SegmentsOpen { pid, ordinal } => {
                if self.segmap.is_none() {
                    match Requester::start(self.probe_dir.clone()) {
                        Ok(r) => self.segmap = Some(r),
                        Err(e) => {
                            state.segmap = Some(MapUpdate {
                                pid,
                                ordinal,
                                state: MapState::Failed(format!("cannot start the map's thread: {e}")),
                            });
                            return;
                        }
                    }
                }
                if let Some(r) = &self.segmap {
                    r.open(pid, ordinal);
                }
            }
            Effect::SegmentsClose => {
                if let Some(r) = &self.segmap {
                    r.close();
                }
            }
            Effect::Memviz(pid) => {
                let (tx, dir) = (self.done_tx.clone(), self.probe_dir.clone());
                tokio::task::spawn_blocking(move || {
                    let result = ProbeChannel::open_in(pid, dir).and_then(|c| crate::probe::memviz::ask_snapshot(&c));
                    let _ = tx.send(Done::Status(probe_tools::memviz_outcome(pid, result)));
                });
            }
            Effect::Attach(pid) => {
                let tx = self.done_tx.clone();
                tokio::task::spawn_blocking(move || {
                    let _ = tx.send(Done::Status(probe_tools::attach_outcome(pid, crate::probe::attach::start(pid))));
                });
            }
            Effect::Environ(pid) => {
                let tx = self.done_tx.clone();
                tokio::task::spawn_blocking(move || {
                    let _ = tx.send(Done::Environ(pid, crate::tui::environ::read(pid)));
                });
            }
            _ => {}
        }
    }
}

fn on_event(
    state: &mut State,
    event: Event,
    control: Option<&PollerControl>,
    clock: &Clock,
    tools: &mut Tools,
) -> Flow {
    match event {
        Event::Key(key) => match keys::map(key, state.input_mode()) {
            Some(action) => act(state, action, control, clock, tools),
            None => Flow::Same,
        },
        Event::Mouse(mouse) => match mouse::map(mouse, &state.hits, state.input_mode()) {
            Some(action) => act(state, action, control, clock, tools),
            None => Flow::Same,
        },
        Event::Resize(..) => Flow::Resized,
        _ => Flow::Same,
    }
}

/// A key's or a click's action: the state changes, and what reaches
/// outside the dashboard is carried out here.
fn act(state: &mut State, action: Action, control: Option<&PollerControl>, clock: &Clock, tools: &mut Tools) -> Flow {
    match update::apply(state, action, clock.now_ms()) {
        Some(Effect::Quit) => return Flow::Quit,
        Some(Effect::Suspend) => return Flow::Suspend,
        Some(Effect::Replay(cmd)) => {
            if let Some(replay) = &state.replay {
                let _ = replay.commands.send(cmd);
            }
        }
        Some(Effect::SetInterval(interval)) => {
            if let Some(control) = control {
                control.set_interval(interval);
            }
        }
        // Never in a replay or the demo: `update` offers no kill there,
        // and this is the last place a signal could leave from.
        Some(Effect::Signal(target, signal)) if state.replay.is_none() && !probe_tools::simulated(state) => {
            let result = kill::send(target, signal);
            update::signal_sent(state, signal, result);
        }
        Some(Effect::Signal(..)) | None => {}
        Some(effect) => tools.carry_out(state, effect),
    }
    Flow::Redraw
}
