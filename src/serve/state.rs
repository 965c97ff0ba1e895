//! The exporter's view of the poller: the newest snapshot with what the
//! server counts across snapshots, and its encoded bodies, made at most
//! once per snapshot however many scrapes ask for them.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use tokio::sync::watch;

use super::encode::Format;
use super::metrics;
use crate::model::{GpuState, Snapshot};
use crate::output::json;
use crate::poller::SnapshotRx;

pub struct Entry {
    pub snap: Arc<Snapshot>,
    /// `gpuscope_nvml_errors_total` as of this snapshot.
    pub nvml_errors: u64,
    text: OnceLock<Bytes>,
    openmetrics: OnceLock<Bytes>,
    json: OnceLock<Bytes>,
}

impl Entry {
    fn new(snap: Arc<Snapshot>, nvml_errors: u64) -> Self {
        Self { snap, nvml_errors, text: OnceLock::new(), openmetrics: OnceLock::new(), json: OnceLock::new() }
    }

    /// The snapshot's part of `/metrics`; see [`metrics::encode`].
    pub fn metrics(&self, format: Format) -> &Bytes {
        let cell = match format {
            Format::Text => &self.text,
            Format::OpenMetrics => &self.openmetrics,
        };
        cell.get_or_init(|| metrics::encode(format, &self.snap, self.nvml_errors).into())
    }

    /// `/snapshot`: exactly what `gpuscope --json` prints.
    pub fn json(&self) -> &Bytes {
        self.json.get_or_init(|| {
            let mut out = Vec::with_capacity(64 * 1024);
            // Writing into memory cannot fail, and a Snapshot always serialises.
            let _ = json::write_pretty(&self.snap, &mut out);
            out.into()
        })
    }

    /// Wall-clock time since the snapshot was taken (0 if the clock went back).
    pub fn age(&self, now: SystemTime) -> Duration {
        let taken = UNIX_EPOCH + Duration::from_millis(self.snap.time.time_unix_ms);
        now.duration_since(taken).unwrap_or(Duration::ZERO)
    }
}

pub type Latest = watch::Receiver<Option<Arc<Entry>>>;

/// What one snapshot adds to `gpuscope_nvml_errors_total`.
pub fn nvml_errors_in(snap: &Snapshot) -> u64 {
    let failed = u64::from(!snap.sources.nvml.ok);
    failed + snap.gpus.iter().filter(|g| g.state == GpuState::Error).count() as u64
}

/// `--no-processes`: what names a process or who runs it (name, command
/// line, user, parent's name, container, pod or Slurm job) becomes null,
/// so that neither `/metrics` nor `/snapshot` can show it. PIDs stay: they
/// keep one process's series apart from another's on the same GPU (the
/// alerts name them too), and a number names nothing to a reader who
/// cannot look it up on the host.
pub fn without_processes(snap: &Snapshot) -> Snapshot {
    let mut out = snap.clone();
    for p in &mut out.processes {
        (p.name, p.user, p.command, p.parent_name, p.workload) = (None, None, None, None, None);
    }
    out
}

/// Follows the poller. Counting happens here, once per snapshot, rather
/// than in a scrape: scrapes may skip snapshots or see one many times.
/// With `hide_processes`, every snapshot is first [`without_processes`].
pub fn track(mut rx: SnapshotRx, hide_processes: bool) -> Latest {
    let (tx, latest) = watch::channel(None);
    tokio::spawn(async move {
        let mut errors = 0u64;
        while rx.changed().await.is_ok() {
            let Some(mut snap) = rx.borrow_and_update().clone() else { continue };
            errors += nvml_errors_in(&snap);
            if hide_processes {
                snap = Arc::new(without_processes(&snap));
            }
            tx.send_replace(Some(Arc::new(Entry::new(snap, errors))));
        }
    });
    latest
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::metrics::tests::snapshot;

    #[test]
    fn bodies_are_encoded_once_per_snapshot() {
        let entry = Entry::new(Arc::new(snapshot()), 2);
        let a = entry.metrics(Format::Text).clone();
        let b = entry.metrics(Format::Text).clone();
        assert_eq!(a.as_ptr(), b.as_ptr(), "the second scrape reuses the first's body");
        assert_ne!(entry.metrics(Format::OpenMetrics), &a);
        let json: serde_json::Value = serde_json::from_slice(entry.json()).unwrap();
        assert_eq!(json["gpus"][0]["index"], 0);
    }

    #[test]
    fn nvml_failures_and_gpus_in_error_count() {
        let mut snap = snapshot();
        assert_eq!(nvml_errors_in(&snap), 0);
        snap.sources.nvml.ok = false;
        snap.gpus[1].state = GpuState::Error;
        assert_eq!(nvml_errors_in(&snap), 2);
    }

    #[test]
    fn without_processes_keeps_pids_and_the_gpu_figures() {
        let snap = snapshot();
        assert!(snap.processes.iter().any(|p| p.command.is_some() && p.user.is_some()), "a test worth running");
        let hidden = without_processes(&snap);
        assert_eq!(hidden.gpus, snap.gpus);
        let pids = |s: &Snapshot| s.processes.iter().map(|p| (p.pid, p.gpu_memory_total)).collect::<Vec<_>>();
        assert_eq!(pids(&hidden), pids(&snap));
        for p in &hidden.processes {
            assert!(p.name.is_none() && p.user.is_none() && p.command.is_none(), "{p:?}");
            assert!(p.parent_name.is_none() && p.workload.is_none(), "{p:?}");
        }
        let text = metrics::encode(Format::Text, &hidden, 0);
        assert!(!text.contains("user=\"") && !text.contains("command=\""), "{text}");
        assert!(text.contains("pid=\""), "{text}");
    }

    #[test]
    fn age_is_never_negative() {
        let entry = Entry::new(Arc::new(snapshot()), 0);
        let taken = UNIX_EPOCH + Duration::from_millis(entry.snap.time.time_unix_ms);
        assert_eq!(entry.age(taken + Duration::from_millis(1500)), Duration::from_millis(1500));
        assert_eq!(entry.age(taken - Duration::from_secs(5)), Duration::ZERO);
    }
}
