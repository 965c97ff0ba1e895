//! Plays a recording into the dashboard through the same `watch` channel
//! the poller uses, at the recorded pace times a speed, with alerts
//! recomputed under the current thresholds. Seeking warms a fresh analyzer
//! up on the minutes before the target, so trend alerts are right at once.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};

use super::Recording;
use crate::analysis::Analyzer;
use crate::analysis::config::{AlertsConfig, HistoryConfig};
use crate::history::{Shared, Store};
use crate::model::{Change, Snapshot};
use crate::poller::SnapshotRx;

pub const SPEEDS: [f64; 7] = [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0];
/// Enough history for the longest default rule window (leak: 5 minutes).
const WARM_UP_MS: u64 = 6 * 60 * 1000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    TogglePause,
    Faster,
    Slower,
    /// Relative to the current position, in milliseconds of recording time.
    Seek(i64),
    NextAlert,
    PrevAlert,
}

/// What the header shows about the replay.
#[derive(Debug, Clone, PartialEq)]
pub struct Status {
    pub file: String,
    pub position: usize,
    pub len: usize,
    pub speed: f64,
    pub paused: bool,
    pub at_end: bool,
    /// `None` until the background pass that finds the alerts is done.
    pub alerts_indexed: Option<usize>,
    pub note: Option<String>,
}

#[derive(Debug, Clone)]
pub struct Handle {
    pub commands: mpsc::UnboundedSender<Command>,
    pub status: watch::Receiver<Status>,
    /// The history the player's analyzer records, for the charts.
    pub history: Shared,
}

struct Player {
    rec: Arc<Recording>,
    store: Shared,
    alerts: AlertsConfig,
    analyzer: Analyzer,
    position: usize,
    speed_index: usize,
    paused: bool,
    alert_times: Option<Vec<u64>>,
    note: Option<String>,
}

/// Starts playing from the beginning. `on_time` receives each shown
/// snapshot's time (the dashboard's clock follows the recording).
pub fn start(
    rec: Recording,
    history: HistoryConfig,
    alerts: AlertsConfig,
    on_time: impl Fn(u64) + Send + 'static,
) -> (SnapshotRx, Handle) {
    let rec = Arc::new(rec);
    let (snap_tx, snap_rx) = watch::channel(None);
    let (cmd_tx, cmd_rx) = mpsc::unbounded_channel();
    let file = rec.path.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let status = Status {
        file,
        position: 0,
        len: rec.len(),
        speed: 1.0,
        paused: false,
        at_end: false,
        alerts_indexed: None,
        note: None,
    };
    let (status_tx, status_rx) = watch::channel(status);
    let (index_tx, index_rx) = tokio::sync::oneshot::channel();
    let for_index = (rec.clone(), history.clone(), alerts.clone());
    tokio::task::spawn_blocking(move || {
        let _ = index_tx.send(alert_times(&for_index.0, Analyzer::for_replay(&for_index.1, for_index.2)));
    });
    let store = Store::shared(crate::analysis::longest_window(&history, &alerts));
    let player = Player {
        analyzer: Analyzer::for_replay_into(store.clone(), alerts.clone()),
        rec,
        store: store.clone(),
        alerts,
        position: 0,
        speed_index: 1,
        paused: false,
        alert_times: None,
        note: None,
    };
    tokio::spawn(player.run(snap_tx, cmd_rx, status_tx, index_rx, on_time));
    (snap_rx, Handle { commands: cmd_tx, status: status_rx, history: store })
}

/// Times at which an alert was raised, over the whole recording.
pub fn alert_times(rec: &Recording, mut analyzer: Analyzer) -> Vec<u64> {
    let mut times = Vec::new();
    for i in 0..rec.len() {
        let Ok(mut snap) = rec.get(i) else { continue };
        analyzer.observe(&mut snap);
        if snap.events.iter().any(|e| e.change == Change::Raised) {
            times.push(snap.time.time_unix_ms);
        }
    }
    times
}

impl Player {
    async fn run(
        mut self,
        snaps: watch::Sender<Option<Arc<Snapshot>>>,
        mut commands: mpsc::UnboundedReceiver<Command>,
        status: watch::Sender<Status>,
        mut index: tokio::sync::oneshot::Receiver<Vec<u64>>,
        on_time: impl Fn(u64),
    ) {
        let mut index_open = true;
        self.show(&snaps, &on_time);
        loop {
            self.publish_status(&status);
            let wait = self.wait_for_next();
            tokio::select! {
                cmd = commands.recv() => match cmd {
                    Some(cmd) => self.command(cmd, &snaps, &on_time),
                    None => return,
                },
                times = &mut index, if index_open => {
                    index_open = false;
                    self.alert_times = times.ok();
                }
                () = tokio::time::sleep(wait.unwrap_or(Duration::MAX)), if wait.is_some() => {
                    self.position += 1;
                    self.show(&snaps, &on_time);
                }
                () = snaps.closed() => return,
            }
        }
    }

    /// Time until the next snapshot is due at the current speed, or `None`
    /// when paused or at the end.
    fn wait_for_next(&self) -> Option<Duration> {
        if self.paused || self.position + 1 >= self.rec.len() {
            return None;
        }
        let e = &self.rec.entries;
        let gap_ms = e[self.position + 1].time_ms.saturating_sub(e[self.position].time_ms);
        // A recording paused for an hour replays the gap in a second.
        let gap = Duration::from_millis(gap_ms).min(Duration::from_secs(60));
        Some(gap.div_f64(SPEEDS[self.speed_index]))
    }

    fn command(&mut self, cmd: Command, snaps: &watch::Sender<Option<Arc<Snapshot>>>, on_time: &impl Fn(u64)) {
        self.note = None;
        let now = self.rec.entries.get(self.position).map_or(0, |e| e.time_ms);
        match cmd {
            Command::TogglePause => self.paused = !self.paused,
            Command::Faster => self.speed_index = (self.speed_index + 1).min(SPEEDS.len() - 1),
            Command::Slower => self.speed_index = self.speed_index.saturating_sub(1),
            Command::Seek(delta_ms) => self.seek(now.saturating_add_signed(delta_ms), snaps, on_time),
            Command::NextAlert | Command::PrevAlert => match &self.alert_times {
                None => self.note = Some("still looking for alerts in the recording".into()),
                Some(times) => {
                    let target = if cmd == Command::NextAlert {
                        times.iter().find(|&&t| t > now).copied()
                    } else {
                        times.iter().rev().find(|&&t| t < now).copied()
                    };
                    match target {
                        Some(t) => self.seek(t, snaps, on_time),
                        None => self.note = Some("no alert that way".into()),
                    }
                }
            },
        }
    }

    fn seek(&mut self, time_ms: u64, snaps: &watch::Sender<Option<Arc<Snapshot>>>, on_time: &impl Fn(u64)) {
        let target = self.rec.position_at(time_ms);
        let from = self.rec.position_at(self.rec.entries[target].time_ms.saturating_sub(WARM_UP_MS));
        // The charts' history starts over with the warm-up, as the alerts'.
        crate::history::lock(&self.store).clear();
        self.analyzer = Analyzer::for_replay_into(self.store.clone(), self.alerts.clone());
        for i in from..target {
            if let Ok(mut snap) = self.rec.get(i) {
                self.analyzer.observe(&mut snap);
            }
        }
        self.position = target;
        self.show(snaps, on_time);
    }

    /// Shows the snapshot at the current position, through the analyzer.
    fn show(&mut self, snaps: &watch::Sender<Option<Arc<Snapshot>>>, on_time: &impl Fn(u64)) {
        let Ok(mut snap) = self.rec.get(self.position) else {
            self.note = Some(format!("snapshot {} is unreadable; skipped", self.position + 1));
            return;
        };
        snap.alerts.clear();
        snap.events.clear();
        self.analyzer.observe(&mut snap);
        on_time(snap.time.time_unix_ms);
        snaps.send_replace(Some(Arc::new(snap)));
    }

    fn publish_status(&self, status: &watch::Sender<Status>) {
        status.send_modify(|s| {
            s.position = self.position;
            s.speed = SPEEDS[self.speed_index];
            s.paused = self.paused;
            s.at_end = self.position + 1 >= self.rec.len();
            s.alerts_indexed = self.alert_times.as_ref().map(Vec::len);
            s.note.clone_from(&self.note);
        });
    }
}
