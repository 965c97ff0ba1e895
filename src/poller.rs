//! Collection on a thread of its own: it collects, publishes the newest
//! snapshot on a `watch` channel, and sleeps until the next tick. Readers
//! always see the latest; nothing queues up behind a slow reader, and a
//! slow driver call holds up only this thread, never the dashboard.
//!
//! A dedicated thread rather than a tokio task handing each tick to the
//! blocking pool: that woke a worker for the timer, a pool thread for the
//! work and the worker again for the result on every tick; this wakes only
//! itself before it publishes. On a shared or virtual machine each wake-up
//! of an idle CPU can cost more than the work it does.

use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::collect::Collector;
use crate::model::Snapshot;
use crate::sources::{Figures, OnScreen};
use crate::util::bounds;

pub type SnapshotRx = watch::Receiver<Option<Arc<Snapshot>>>;

#[derive(Debug)]
struct Wanted {
    interval: Duration,
    /// Set by `set_interval`, cleared by the thread when it takes it.
    changed: bool,
    figures: Figures,
    on_screen: Option<OnScreen>,
}

/// Steers a running poller.
#[derive(Debug, Clone)]
pub struct PollerControl {
    shared: Arc<(Mutex<Wanted>, Condvar)>,
}

impl PollerControl {
    fn wanted(&self) -> std::sync::MutexGuard<'_, Wanted> {
        // The lock guards plain fields, each consistent at every point.
        self.shared.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn interval(&self) -> Duration {
        self.wanted().interval
    }

    /// Takes effect from the next tick, one new period from now.
    pub fn set_interval(&self, interval: Duration) {
        let mut w = self.wanted();
        w.interval = interval.clamp(bounds::INTERVAL.min, bounds::INTERVAL.max);
        w.changed = true;
        self.shared.1.notify_all();
    }

    /// Whose CPU time and resident memory the ticks from the next on read
    /// (`collect::Reads::figures`); every process's until this is called.
    pub fn set_figures(&self, figures: Figures) {
        self.wanted().figures = figures;
    }

    pub fn figures(&self) -> Figures {
        self.wanted().figures.clone()
    }

    /// Which of the readings asked only while shown (`sources::OnScreen`)
    /// the ticks from the next on ask the driver for; what the source was
    /// built to ask until this is called.
    pub fn set_on_screen(&self, shown: OnScreen) {
        self.wanted().on_screen = Some(shown);
    }

    pub fn on_screen(&self) -> Option<OnScreen> {
        self.wanted().on_screen
    }

    /// Sleeps until `deadline` or a new interval; returns the new one.
    fn wait(&self, deadline: Instant) -> Option<Duration> {
        let mut w = self.wanted();
        loop {
            if w.changed {
                w.changed = false;
                return Some(w.interval);
            }
            let left = deadline.checked_duration_since(Instant::now()).filter(|d| !d.is_zero())?;
            w = self.shared.1.wait_timeout(w, left).unwrap_or_else(PoisonError::into_inner).0;
        }
    }
}

/// Starts polling: the first snapshot at once, then one per interval. The
/// thread ends once every receiver is gone (noticed at its next tick), or
/// if collection panics (the hook has reported it), which receivers see as
/// the channel closing.
pub fn spawn(collector: Collector) -> std::io::Result<(SnapshotRx, PollerControl, std::thread::JoinHandle<()>)> {
    let (tx, rx) = watch::channel(None);
    let control = PollerControl {
        shared: Arc::new((
            Mutex::new(Wanted {
                interval: collector.interval,
                changed: false,
                figures: collector.reads.figures.clone(),
                on_screen: collector.reads.on_screen,
            }),
            Condvar::new(),
        )),
    };
    let steer = control.clone();
    let handle =
        std::thread::Builder::new().name("gpuscope-poller".into()).spawn(move || run(collector, &tx, &steer))?;
    Ok((rx, control, handle))
}

fn run(mut collector: Collector, tx: &watch::Sender<Option<Arc<Snapshot>>>, control: &PollerControl) {
    let mut held: Held<Snapshot> = Held::default();
    loop {
        held.free_older();
        let started = Instant::now();
        collector.reads.figures = control.figures();
        collector.reads.on_screen = control.on_screen();
        let snap = Arc::new(collector.tick());
        if tx.send(Some(Arc::clone(&snap))).is_err() {
            return;
        }
        held.keep(snap);
        // A slow collection delays the next tick instead of causing a burst
        // of catch-up ticks: the deadline counts from when this one began.
        let mut deadline = bounds::later(started, collector.interval);
        while let Some(new) = control.wait(deadline) {
            collector.interval = new;
            deadline = bounds::later(Instant::now(), new);
        }
    }
}

/// The last two snapshots sent. A receiver lets each go when the next
/// arrives, so its last hold, and the freeing of its hundreds of blocks,
/// would be on the receiver's thread: glibc puts them in that thread's
/// cache, and the next tick here finds this thread's cache empty and takes
/// the arena's slow path for each block it makes. Held here one tick
/// longer, the one before the last is freed on this thread, just before
/// the tick that makes as many blocks again. At most two snapshots live at
/// once, as before: the one shown, and the one being made (between ticks,
/// the one held).
struct Held<T> {
    older: Option<Arc<T>>,
    last: Option<Arc<T>>,
}

impl<T> Default for Held<T> {
    fn default() -> Self {
        Self { older: None, last: None }
    }
}

impl<T> Held<T> {
    fn keep(&mut self, sent: Arc<T>) {
        self.older = self.last.replace(sent);
    }

    fn free_older(&mut self) {
        drop(self.older.take());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::Analyzer;
    use crate::analysis::config::{AlertsConfig, HistoryConfig};
    use crate::model::{Driver, Gpu, GpuState, ProcessGpu, ProcessType, SourceStatus};
    use crate::probe::files::fake::ScriptedProbes;
    use crate::sources::fake::{ScriptedGpu, ScriptedHost};
    use crate::sources::{GpuProcess, GpuSample, HostProcess, HostSample};

    fn gpu_sample(used: u64) -> GpuSample {
        GpuSample {
            driver: Driver { driver_version: Some("560.35.03".into()), ..Driver::default() },
            gpus: vec![Gpu::blank(0, GpuState::Ok)],
            all_gpus: Arc::default(),
            processes: vec![GpuProcess {
                pid: 42,
                gpus: vec![ProcessGpu {
                    index: 0,
                    kind: ProcessType::Compute,
                    used_memory: Some(used),
                    mig_device: None,
                    mig_uuid: None,
                }],
                driver_name: Some("python3".into()),
            }],
            status: SourceStatus::ok(),
            calls: None,
            events: None,
        }
    }

    #[tokio::test]
    async fn publishes_each_tick_and_joins_host_data() {
        let host = HostSample {
            processes: [(42, HostProcess { user: Some("alice".into()), ..HostProcess::default() })]
                .into_iter()
                .collect(),
            status: SourceStatus::ok(),
            ..HostSample::default()
        };
        let scripted_host = ScriptedHost::new([host]);
        let asked = scripted_host.asked.clone();
        let figures = scripted_host.figures.clone();
        let scripted_gpu = ScriptedGpu::new([gpu_sample(1), gpu_sample(2), gpu_sample(3)]);
        let told = scripted_gpu.shown.clone();
        let collector = Collector {
            gpu: Box::new(scripted_gpu),
            host: Box::new(scripted_host),
            probes: Box::new(ScriptedProbes::new([])),
            analyzer: Analyzer::new(&HistoryConfig::default(), AlertsConfig::default()),
            interval: Duration::from_millis(5),
            simulated: false,
            fallback: None,
            reads: crate::collect::Reads::ALL,
        };
        let (mut rx, control, handle) = spawn(collector).unwrap();
        let shown = Figures::Of(Arc::from([42]));
        control.set_figures(shown.clone());
        assert_eq!(control.on_screen(), None, "what the source was built to ask, until the dashboard says");
        let clocks = OnScreen { clocks: true, pcie: false };
        control.set_on_screen(clocks);
        control.set_interval(Duration::from_millis(7));
        assert_eq!(control.interval(), Duration::from_millis(10), "clamped to the minimum");
        let snap = loop {
            rx.changed().await.unwrap();
            let snap = rx.borrow_and_update().clone().unwrap();
            if snap.processes[0].gpus[0].used_memory == Some(3) {
                break snap;
            }
        };
        drop(rx);
        // With its only receiver gone, the poller stops by itself.
        tokio::task::spawn_blocking(move || handle.join().unwrap()).await.unwrap();
        assert_eq!(snap.processes[0].user.as_deref(), Some("alice"));
        // NVML's name fills in where the host had none.
        assert_eq!(snap.processes[0].name.as_deref(), Some("python3"));
        let asked = asked.lock().unwrap();
        assert!(asked.len() >= 3 && asked.iter().all(|pids| pids == &[42]), "{asked:?}");
        // Every tick from the one after it was set reads what the table shows.
        let figures = figures.lock().unwrap();
        assert_eq!(figures.last(), Some(&shown), "{figures:?}");
        assert!(figures.iter().all(|f| f == &shown || f == &Figures::All), "{figures:?}");
        // And the GPU source is told what is on screen before each tick
        // from then on.
        let told = told.lock().unwrap();
        assert!(!told.is_empty() && told.iter().all(|s| *s == clocks), "{told:?}");
    }

    #[test]
    fn a_snapshot_is_freed_here_once_the_next_has_been_shown_a_tick() {
        let mut held = Held::default();
        let snap = Arc::new;
        let first = snap(1);
        let first_gone = Arc::downgrade(&first);
        held.keep(first);
        held.free_older();
        let second = snap(2);
        held.keep(Arc::clone(&second));
        assert!(first_gone.upgrade().is_some(), "held while the receiver may still show it");
        held.free_older();
        assert!(first_gone.upgrade().is_none(), "freed here before the next tick");
        held.keep(snap(3));
        assert_eq!(Arc::strong_count(&second), 2, "the receiver's and the one held");
        held.free_older();
        assert_eq!(Arc::strong_count(&second), 1);
    }
}
