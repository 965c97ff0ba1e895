//! The async side of collection: one task ticks at the interval, runs the
//! blocking collection on tokio's blocking pool, and publishes the newest
//! snapshot on a `watch` channel. Readers always see the latest; nothing
//! queues up behind a slow reader.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::MissedTickBehavior;

use crate::collect::Collector;
use crate::config::MIN_INTERVAL;
use crate::model::Snapshot;

pub type SnapshotRx = watch::Receiver<Option<Arc<Snapshot>>>;

/// Steers a running poller.
#[derive(Debug, Clone)]
pub struct PollerControl {
    interval: watch::Sender<Duration>,
}

impl PollerControl {
    pub fn interval(&self) -> Duration {
        *self.interval.borrow()
    }

    /// Takes effect from the next tick.
    pub fn set_interval(&self, interval: Duration) {
        self.interval.send_replace(interval.max(MIN_INTERVAL));
    }
}

/// Starts polling; the task ends when every receiver is gone.
pub fn spawn(collector: Collector) -> (SnapshotRx, PollerControl, tokio::task::JoinHandle<()>) {
    let (tx, rx) = watch::channel(None);
    let (interval_tx, interval_rx) = watch::channel(collector.interval);
    let handle = tokio::spawn(run(collector, tx, interval_rx));
    (rx, PollerControl { interval: interval_tx }, handle)
}

fn new_ticker(every: Duration) -> tokio::time::Interval {
    let mut t = tokio::time::interval(every.max(Duration::from_millis(1)));
    // A slow driver call delays the next tick instead of causing a burst
    // of catch-up ticks.
    t.set_missed_tick_behavior(MissedTickBehavior::Delay);
    t
}

async fn run(
    mut collector: Collector,
    tx: watch::Sender<Option<Arc<Snapshot>>>,
    mut interval: watch::Receiver<Duration>,
) {
    let mut ticker = new_ticker(collector.interval);
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            Ok(()) = interval.changed() => {
                collector.interval = *interval.borrow_and_update();
                let mut next = new_ticker(collector.interval);
                // A new Interval ticks at once; resetting it puts the next
                // snapshot one new period from now instead of adding one.
                next.reset();
                ticker = next;
                continue;
            }
        }
        let joined = tokio::task::spawn_blocking(move || {
            let snap = collector.tick();
            (collector, snap)
        })
        .await;
        let Ok((back, snap)) = joined else {
            // The collection panicked; the panic is already reported by the
            // hook, and there is no collector to go on with.
            return;
        };
        collector = back;
        if tx.send(Some(Arc::new(snap))).is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::Analyzer;
    use crate::analysis::config::{AlertsConfig, HistoryConfig};
    use crate::model::{Driver, Gpu, GpuState, ProcessGpu, ProcessType, SourceStatus};
    use crate::sources::fake::{ScriptedGpu, ScriptedHost, ScriptedProbes};
    use crate::sources::{GpuProcess, GpuSample, HostProcess, HostSample};

    fn gpu_sample(used: u64) -> GpuSample {
        GpuSample {
            driver: Driver { driver_version: Some("560.35.03".into()), ..Driver::default() },
            gpus: vec![Gpu::blank(0, GpuState::Ok)],
            processes: vec![GpuProcess {
                pid: 42,
                gpus: vec![ProcessGpu { index: 0, kind: ProcessType::Compute, used_memory: Some(used) }],
                driver_name: Some("python3".into()),
            }],
            status: SourceStatus::ok(),
        }
    }

    #[tokio::test]
    async fn publishes_each_tick_and_joins_host_data() {
        let host = HostSample {
            processes: [(42, HostProcess { user: Some("alice".into()), ..HostProcess::default() })].into(),
            status: SourceStatus::ok(),
            ..HostSample::default()
        };
        let scripted_host = ScriptedHost::new([host]);
        let asked = scripted_host.asked.clone();
        let collector = Collector {
            gpu: Box::new(ScriptedGpu::new([gpu_sample(1), gpu_sample(2), gpu_sample(3)])),
            host: Box::new(scripted_host),
            probes: Box::new(ScriptedProbes::new([])),
            analyzer: Analyzer::new(&HistoryConfig::default(), AlertsConfig::default()),
            interval: Duration::from_millis(5),
            simulated: false,
        };
        let (mut rx, control, handle) = spawn(collector);
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
        handle.await.unwrap();
        assert_eq!(snap.processes[0].user.as_deref(), Some("alice"));
        // NVML's name fills in where the host had none.
        assert_eq!(snap.processes[0].name.as_deref(), Some("python3"));
        let asked = asked.lock().unwrap();
        assert!(asked.len() >= 3 && asked.iter().all(|pids| pids == &[42]), "{asked:?}");
    }
}
