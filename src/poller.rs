//! The async side of collection: one task ticks at the interval, runs the
//! blocking collection on tokio's blocking pool, and publishes the newest
//! snapshot on a `watch` channel. Readers always see the latest; nothing
//! queues up behind a slow reader.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::MissedTickBehavior;

use crate::collect::Collector;
use crate::model::Snapshot;

pub type SnapshotRx = watch::Receiver<Option<Arc<Snapshot>>>;

/// Starts polling; the task ends when every receiver is gone.
pub fn spawn(collector: Collector) -> (SnapshotRx, tokio::task::JoinHandle<()>) {
    let (tx, rx) = watch::channel(None);
    let handle = tokio::spawn(run(collector, tx));
    (rx, handle)
}

async fn run(mut collector: Collector, tx: watch::Sender<Option<Arc<Snapshot>>>) {
    let mut ticker = tokio::time::interval(collector.interval.max(Duration::from_millis(1)));
    // A slow driver call delays the next tick instead of causing a burst
    // of catch-up ticks.
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
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
            interval: Duration::from_millis(5),
            simulated: false,
        };
        let (mut rx, handle) = spawn(collector);
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
