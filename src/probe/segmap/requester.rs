//! Asks one probe for its segment map about once a second while the
//! dashboard shows it, on a thread of its own: the files in the probe
//! directory are never touched on the UI task. Closing the map (or
//! dropping the requester) stops the requests; nothing is asked while
//! nobody looks.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::probe::memviz::ProbeChannel;
use crate::probe::segmap::SegmentMap;
use crate::util::dirfd::random_hex;

/// The probe serves at most one request a second.
const REFRESH: Duration = Duration::from_secs(1);
/// How often the answer file is looked at while one is awaited.
const POLL: Duration = Duration::from_millis(100);
/// The answer is at most 512 segments of 64 runs.
const MAX_ANSWER: u64 = 4 << 20;

#[derive(Debug, Clone, PartialEq)]
pub enum MapState {
    Waiting,
    Ready(Arc<SegmentMap>),
    Failed(String),
}

/// What the dashboard shows for the map of `pid`'s device `ordinal`.
#[derive(Debug, Clone, PartialEq)]
pub struct MapUpdate {
    pub pid: u32,
    pub ordinal: u32,
    pub state: MapState,
}

enum Command {
    Open { pid: u32, ordinal: u32 },
    Close,
}

pub struct Requester {
    commands: Sender<Command>,
    pub updates: watch::Receiver<Option<MapUpdate>>,
}

impl Requester {
    /// A thread that waits for `open`; it ends when the requester is dropped.
    pub fn start(probe_dir: PathBuf) -> std::io::Result<Self> {
        let (commands, rx) = mpsc::channel();
        let (tx, updates) = watch::channel(None);
        std::thread::Builder::new()
            .name("gpuscope-segmap".into())
            .spawn(move || Worker { rx, tx, probe_dir, target: None }.run())?;
        Ok(Self { commands, updates })
    }

    pub fn open(&self, pid: u32, ordinal: u32) {
        let _ = self.commands.send(Command::Open { pid, ordinal });
    }

    pub fn close(&self) {
        let _ = self.commands.send(Command::Close);
    }
}

struct Target {
    channel: ProbeChannel,
    ordinal: u32,
    /// The request awaiting its answer, and when it was left.
    pending: Option<(String, Instant)>,
    next_ask: Instant,
}

struct Worker {
    rx: Receiver<Command>,
    tx: watch::Sender<Option<MapUpdate>>,
    probe_dir: PathBuf,
    target: Option<Target>,
}

impl Worker {
    fn run(mut self) {
        loop {
            let wait = if self.target.is_some() { POLL } else { Duration::from_secs(3600) };
            match self.rx.recv_timeout(wait) {
                Ok(Command::Open { pid, ordinal }) => self.open(pid, ordinal),
                Ok(Command::Close) => {
                    self.target = None;
                    self.tx.send_replace(None);
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return,
            }
            self.step();
        }
    }

    fn publish(&self, pid: u32, ordinal: u32, state: MapState) {
        self.tx.send_replace(Some(MapUpdate { pid, ordinal, state }));
    }

    fn open(&mut self, pid: u32, ordinal: u32) {
        self.publish(pid, ordinal, MapState::Waiting);
        match ProbeChannel::open_in(pid, self.probe_dir.clone()) {
            Ok(channel) => {
                self.target = Some(Target { channel, ordinal, pending: None, next_ask: Instant::now() });
            }
            Err(e) => {
                self.target = None;
                self.publish(pid, ordinal, MapState::Failed(e.to_string()));
            }
        }
    }

    fn step(&mut self) {
        let Some(target) = self.target.as_mut() else { return };
        let (pid, ordinal) = (target.channel.pid, target.ordinal);
        let now = Instant::now();
        let outcome = match &target.pending {
            None if now >= target.next_ask => {
                let id = random_hex();
                let request = serde_json::json!({"kind": "segments", "id": id, "device": ordinal});
                match target.channel.ask(&request) {
                    Ok(()) => target.pending = Some((id, now)),
                    Err(e) => {
                        target.next_ask = now + REFRESH * 5;
                        return self.publish(pid, ordinal, MapState::Failed(e.to_string()));
                    }
                }
                None
            }
            None => None,
            Some((id, asked)) => answer(target, id, *asked, now),
        };
        let Some(state) = outcome else { return };
        target.pending = None;
        target.next_ask = now + if matches!(state, MapState::Ready(_)) { REFRESH } else { REFRESH * 5 };
        self.publish(pid, ordinal, state);
    }
}

/// The answer to request `id`, or why none came in time.
fn answer(target: &Target, id: &str, asked: Instant, now: Instant) -> Option<MapState> {
    let map = target.channel.read::<SegmentMap>("segments.json", MAX_ANSWER).filter(|m| m.id.as_deref() == Some(id));
    match map {
        Some(m) if m.state == "done" => Some(MapState::Ready(Arc::new(m))),
        Some(m) => Some(MapState::Failed(m.error.unwrap_or_else(|| "the probe could not take the map".into()))),
        // The probe looks at its wake-ups (its interval) and serves one
        // request a second; well past that, say so and try again later.
        None if now.duration_since(asked) > target.channel.interval + REFRESH * 5 => Some(MapState::Failed(format!(
            "process {}'s probe did not answer within {:.0?}: it is busy, or older than segment maps \
             (restart the job under this gpuscope's `gpuscope run`)",
            target.channel.pid,
            now.duration_since(asked)
        ))),
        None => None,
    }
}
