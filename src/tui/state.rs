//! Everything the dashboard remembers between frames: the newest snapshot
//! and, while paused, the frozen one; the history; focus, selection, sort,
//! filter; the views stacked over the dashboard.

use crate::recording::player::Handle;
use std::sync::Arc;
use std::time::Duration;

use crate::history::{Shared, Store};
use crate::model::Snapshot;
use crate::probe::segmap::MapUpdate;
use crate::tui::TuiOptions;
use crate::tui::keys::InputMode;
use crate::tui::kill::{Signal, Target};
use crate::tui::rows::RowKey;
use crate::tui::rows::{self, Row, Sort};

#[derive(Debug, Clone, PartialEq)]
pub enum View {
    Help,
    /// One process on one GPU, in full.
    Detail(DetailView),
    Confirm(Confirm),
    /// The live segment map of one process's device on one GPU.
    Segments(SegmentsView),
    /// Every active alert in full; `scroll` is the first line shown.
    Alerts {
        scroll: usize,
    },
    /// F6: the sort columns; `cursor` indexes `rows::SORTABLE`.
    SortMenu {
        cursor: usize,
    },
    /// `e`: one process's GPU-related environment, once read (or why not).
    Environ {
        pid: u32,
        vars: Option<Result<Vec<(String, String)>, String>>,
    },
}

/// Whose details are open, and how far down they are scrolled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DetailView {
    pub key: RowKey,
    /// The first line shown under the title: 0 on opening, so another
    /// process's details always start at the top.
    pub scroll: usize,
}

impl DetailView {
    pub fn new(key: RowKey) -> Self {
        Self { key, scroll: 0 }
    }
}

/// What the segment map shows: whose, and the allocation it is asked
/// about ("would N fit without a new cudaMalloc").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentsView {
    pub key: RowKey,
    /// The framework's device ordinal, as the probe names it.
    pub ordinal: u32,
    pub request: u64,
    /// The first segment row shown.
    pub scroll: usize,
}

/// A signal waiting for the user's yes, with what identifies the process
/// to a person.
#[derive(Debug, Clone, PartialEq)]
pub struct Confirm {
    pub target: Target,
    pub signal: Signal,
    pub user: String,
    pub command: String,
    pub age: Option<Duration>,
    /// SIGTERM already went out: this is the offer to follow with SIGKILL.
    pub after_term: bool,
}

#[derive(Debug, Clone)]
pub struct State {
    pub ascii: bool,
    pub color: bool,
    pub read_only: bool,
    pub interval: Duration,
    pub latest: Option<Arc<Snapshot>>,
    /// While paused: the snapshot on screen.
    pub frozen: Option<Arc<Snapshot>>,
    /// The history the charts draw: the analyzer's store, or, when no
    /// analyzer shares one, the dashboard's own (`records_history`).
    pub history: Shared,
    pub records_history: bool,
    /// How far back the charts reach: `[history] window`.
    pub span: Duration,
    /// The focused GPU's index; `None` is all.
    pub focus: Option<u32>,
    /// Within the focused GPU, the focused MIG device's index; `None` is
    /// the whole GPU.
    pub focus_mig: Option<u32>,
    pub selected: Option<RowKey>,
    /// Where the selection was, for when its row goes away.
    pub selected_pos: usize,
    pub sort: Sort,
    pub filter: String,
    pub editing_filter: bool,
    /// F3's text: kept after Enter, so that `n` finds the next match.
    pub search: String,
    pub searching: bool,
    pub views: Vec<View>,
    /// A one-line message until the next key: results and refusals.
    pub status: Option<String>,
    /// Process rows the last frame had room for: one page.
    pub page: usize,
    /// Where the last frame drew the GPUs and the process rows.
    pub hits: crate::tui::mouse::Hits,
    /// The poller ended: no more snapshots will come.
    pub collection_stopped: bool,
    /// Set when the snapshots come from a recording's player.
    pub replay: Option<Handle>,
    pub started_ms: u64,
    /// The newest segment map (or why there is none) while the map is open.
    pub segmap: Option<MapUpdate>,
    /// Why the GPUs are simulated (`--demo=auto` without a driver).
    pub notice: Option<String>,
    /// `-u` / `-p` from the command line, on top of the `/` filter.
    pub only: crate::settings::ProcessFilter,
}

impl State {
    pub fn new(options: &TuiOptions) -> Self {
        Self {
            ascii: options.ascii,
            color: options.color,
            read_only: options.read_only,
            interval: options.interval,
            latest: None,
            frozen: None,
            history: options.history.clone().unwrap_or_else(|| Store::shared(options.span)),
            records_history: options.history.is_none(),
            span: options.span,
            focus: None,
            focus_mig: None,
            selected: None,
            selected_pos: 0,
            sort: Sort::default(),
            filter: String::new(),
            editing_filter: false,
            search: String::new(),
            searching: false,
            views: Vec::new(),
            status: None,
            page: 1,
            hits: Default::default(),
            collection_stopped: false,
            started_ms: options.clock.now_ms(),
            replay: options.replay.clone(),
            segmap: None,
            notice: options.notice.clone(),
            only: options.only.clone(),
        }
    }

    pub fn on_snapshot(&mut self, snap: Arc<Snapshot>) {
        if self.records_history {
            crate::history::lock(&self.history).record(&snap);
        }
        // Focus and selection name a GPU, not an index: when GPUs come and
        // go, they follow it to its new index (or let go when it left).
        if let Some(prev) = &self.latest {
            self.focus = self.focus.and_then(|f| follow_gpu(prev, &snap, f));
            self.selected = self.selected.and_then(|k| Some(RowKey { gpu: follow_gpu(prev, &snap, k.gpu)?, ..k }));
        }
        self.focus_mig = self.focus_mig.filter(|&m| mig_exists(&snap, self.focus, m));
        // SIGKILL is offered after SIGTERM only while the process is still
        // on a GPU: one that went needs no second signal.
        if let Some(View::Confirm(c)) = self.views.last()
            && c.after_term
            && !snap.processes.iter().any(|p| p.pid == c.target.pid)
        {
            self.status = Some(format!("PID {} left the GPU after SIGTERM: no SIGKILL needed", c.target.pid));
            self.views.pop();
        }
        self.latest = Some(snap);
    }

    /// What the screen shows: the frozen snapshot while paused.
    pub fn shown(&self) -> Option<&Arc<Snapshot>> {
        self.frozen.as_ref().or(self.latest.as_ref())
    }

    pub fn paused(&self) -> bool {
        self.frozen.is_some()
    }

    pub fn rows(&self) -> Vec<Row<'_>> {
        let mut rows = self.shown().map_or_else(Vec::new, |s| rows::build(s, self.focus, &self.filter, self.sort));
        rows.retain(|r| self.only.keeps(r.process.user.as_deref(), r.process.pid));
        match self.focus_mig {
            Some(m) => rows.into_iter().filter(|r| r.gpu.mig_device == Some(m)).collect(),
            None => rows,
        }
    }

    /// The selected row's position: the selected process if it is still
    /// listed, else the row now where it was.
    pub fn selected_index(&self, rows: &[Row]) -> Option<usize> {
        if rows.is_empty() {
            return None;
        }
        let by_key = self.selected.and_then(|k| rows.iter().position(|r| r.key == k));
        Some(by_key.unwrap_or(self.selected_pos.min(rows.len() - 1)))
    }

    pub fn top(&self) -> Option<&View> {
        self.views.last()
    }

    pub fn input_mode(&self) -> InputMode {
        match self.top() {
            _ if self.editing_filter => InputMode::Filter,
            _ if self.searching => InputMode::Search,
            Some(View::Help) => InputMode::Help,
            Some(View::Confirm(_)) => InputMode::Confirm,
            Some(View::Segments(_)) => InputMode::Segments,
            Some(View::SortMenu { .. }) => InputMode::SortMenu,
            Some(View::Alerts { .. } | View::Environ { .. }) => InputMode::Alerts,
            Some(View::Detail(_)) if self.replay.is_some() => InputMode::ReplayDetail,
            Some(View::Detail(_)) => InputMode::Detail,
            None if self.replay.is_some() => InputMode::Replay,
            None => InputMode::Dashboard,
        }
    }

    /// Milliseconds since the newest data was taken.
    pub fn data_age_ms(&self, now_ms: u64) -> Option<u64> {
        self.latest.as_ref().map(|s| now_ms.saturating_sub(s.time.time_unix_ms))
    }

    /// No snapshot for two intervals: the header must say how old the data
    /// is, and keep saying it as the seconds pass.
    pub fn stale(&self, now_ms: u64) -> bool {
        let interval = u64::try_from(self.interval.as_millis()).unwrap_or(u64::MAX);
        self.data_age_ms(now_ms).is_some_and(|age| age > interval.saturating_mul(2))
    }

    /// Whether the header changes with the clock alone right now.
    pub fn ticking(&self, now_ms: u64) -> bool {
        self.latest.is_none() || self.stale(now_ms)
    }

    /// How long the loop may sleep before the clock alone changes the
    /// header: a second while it counts the data's age, else until the data
    /// turns stale. Fresh data at the default interval thus wakes the
    /// dashboard once per snapshot, not once more for a clock tick.
    pub fn clock_wait(&self, now_ms: u64) -> Duration {
        const TICK_MS: u64 = 1000;
        let wait_ms = match &self.latest {
            Some(snap) if !self.stale(now_ms) => {
                let interval = u64::try_from(self.interval.as_millis()).unwrap_or(u64::MAX);
                let stale_at = snap.time.time_unix_ms.saturating_add(interval.saturating_mul(2)).saturating_add(1);
                stale_at.saturating_sub(now_ms).clamp(1, 60 * TICK_MS)
            }
            _ => TICK_MS,
        };
        Duration::from_millis(wait_ms)
    }
}

/// Whether GPU `gpu` in `snap` still has MIG device `mig`.
fn mig_exists(snap: &Snapshot, gpu: Option<u32>, mig: u32) -> bool {
    let gpu = snap.gpus.iter().find(|g| Some(g.index) == gpu);
    gpu.is_some_and(|g| g.mig_devices.iter().any(|m| m.index == mig))
}

/// The index in `now` of the GPU that had `index` in `before`: unchanged
/// when its UUID is unknown, `None` when it has gone.
fn follow_gpu(before: &Snapshot, now: &Snapshot, index: u32) -> Option<u32> {
    let uuid = before.gpus.iter().find(|g| g.index == index).and_then(|g| g.uuid.as_deref());
    match uuid {
        None => Some(index),
        Some(u) => now.gpus.iter().find(|g| g.uuid.as_deref() == Some(u)).map(|g| g.index),
    }
}
