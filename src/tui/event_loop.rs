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
    let mut pace = Pacing::default();
    let mut snapshots_open = true;
    let mut replay_status = options.replay.as_ref().map(|r| r.status.clone());
    let mut stops = if options.real_terminal { Some(StopSignals::new()?) } else { None };
    let mut tools = Tools::new(options.probe_dir.clone());
    let mut steer = Steer::default();
    loop {
        if pace.due() {
            let mut drawn = (state.page, std::mem::take(&mut state.hits));
            terminal.draw(|frame| drawn = render::draw_with_hits(frame, &state, &clock))?;
            (state.page, state.hits) = drawn;
            if let Some(control) = &control {
                steer.after_frame(&state, control);
            }
            pace.drawn();
        }
        tokio::select! {
            event = events.next() => match event {
                None => return Ok(()),
                Some(Err(e)) => return Err(e),
                Some(Ok(event)) => {
                    let flow = on_event(&mut state, event, control.as_ref(), &clock, &mut tools);
                    if !follow(flow, terminal, &mut state, &mut pace, options.real_terminal)? {
                        return Ok(());
                    }
                }
            },
            stop = async {
                match stops.as_mut() {
                    Some(s) => s.recv().await,
                    None => std::future::pending().await,
                }
            } => {
                on_stop(stop, terminal, &mut state)?;
                pace.dirty();
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
                pace.dirty();
            },
            // The player's speed, pause and notes change without a new
            // snapshot; the header must follow.
            Ok(()) = async {
                match replay_status.as_mut() {
                    Some(status) => status.changed().await,
                    None => std::future::pending().await,
                }
            } => pace.dirty(),
            Ok(()) = async {
                match tools.segmap.as_mut() {
                    Some(r) => r.updates.changed().await,
                    None => std::future::pending().await,
                }
            } => {
                tools.take_map_update(&mut state);
                pace.dirty();
            },
            Some(done) = tools.done_rx.recv() => {
                done.apply(&mut state);
                pace.dirty();
            },
            () = tokio::time::sleep(state.clock_wait(clock.now_ms())) => {
                if state.ticking(clock.now_ms()) {
                    pace.dirty();
                }
            },
            () = tokio::time::sleep_until(pace.next_frame()), if pace.is_dirty() => {},
        }
    }
}

/// When the next frame may be drawn: a dirty screen at most once per
/// `FRAME`, and a key's change on its own clock, so that a key pressed
/// just after a data frame shows at once.
struct Pacing {
    dirty: bool,
    /// Whether a key made the screen dirty.
    keyed: bool,
    last_draw: Option<Instant>,
    last_key_draw: Option<Instant>,
}

impl Default for Pacing {
    /// The first frame is drawn at once.
    fn default() -> Self {
        Self { dirty: true, keyed: false, last_draw: None, last_key_draw: None }
    }
}

impl Pacing {
    fn dirty(&mut self) {
        self.dirty = true;
    }

    fn keyed(&mut self) {
        (self.dirty, self.keyed) = (true, true);
    }

    fn is_dirty(&self) -> bool {
        self.dirty
    }

    fn due(&self) -> bool {
        let free = |last: Option<Instant>| last.is_none_or(|t| t.elapsed() >= FRAME);
        self.dirty && (free(self.last_draw) || (self.keyed && free(self.last_key_draw)))
    }

    fn drawn(&mut self) {
        self.last_draw = Some(Instant::now());
        if self.keyed {
            self.last_key_draw = self.last_draw;
        }
        (self.dirty, self.keyed) = (false, false);
    }

    fn next_frame(&self) -> Instant {
        let after = |last: Option<Instant>| last.map_or_else(Instant::now, |t| t + FRAME);
        if self.keyed { after(self.last_draw).min(after(self.last_key_draw)) } else { after(self.last_draw) }
    }
}

/// Carries out what an event asked of the loop; `false` to quit.
fn follow<B>(flow: Flow, terminal: &mut Term<B>, state: &mut State, pace: &mut Pacing, real: bool) -> io::Result<bool>
where
    B: Backend,
    B::Error: Send + Sync + 'static,
{
    match flow {
        Flow::Quit => return Ok(false),
        Flow::Suspend => {
            if real && !terminal::suspend()? {
                state.status = Some(NO_JOB_CONTROL.into());
            }
            terminal.redraw_all()?;
            pace.dirty();
        }
        Flow::Redraw => pace.keyed(),
        Flow::Resized => {
            terminal.resized();
            pace.keyed();
        }
        Flow::Same => {}
    }
    Ok(true)
}

/// Ctrl-Z from outside (SIGTSTP) or the shell's `fg` (SIGCONT).
fn on_stop<B>(stop: Stop, terminal: &mut Term<B>, state: &mut State) -> io::Result<()>
where
    B: Backend,
    B::Error: Send + Sync + 'static,
{
    match stop {
        Stop::Suspend => {
            if !terminal::suspend()? {
                state.status = Some(NO_JOB_CONTROL.into());
            }
        }
        Stop::Continued => terminal::reenter()?,
    }
    terminal.redraw_all()
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

impl Done {
    fn apply(self, state: &mut State) {
        match self {
            Done::Status(message) => state.status = Some(message),
            Done::Environ(pid, result) => {
                if let Some(View::Environ { pid: shown, vars }) = state.views.last_mut()
                    && *shown == pid
                {
                    *vars = Some(result);
                }
            }
        }
    }
}

impl Tools {
    /// The segment map's thread has a newer map (or why not): shown only
    /// for the map on screen, not one just closed.
    fn take_map_update(&mut self, state: &mut State) {
        if let Some(r) = self.segmap.as_mut() {
            let update = r.updates.borrow_and_update().clone();
            if state.segmap.is_some() {
                state.segmap = update.or(state.segmap.take());
            }
        }
    }

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
