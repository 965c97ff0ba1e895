//! What the fleet knows: every host with its newest snapshot or why there
//! is none, and since when; the jobs across hosts. Published whole on a
//! `watch` channel; the snapshots are shared, not copied.

use std::sync::Arc;

use serde::Serialize;

use super::jobs::Job;
use crate::model::Snapshot;

/// Bumped when a field of `fleet --json` is renamed, removed or changes
/// meaning; each host's `snapshot` follows the snapshot's own schema.
pub const FLEET_SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// Each node's `gpuscope serve`, `/snapshot`.
    Direct,
    /// A Prometheus that scrapes the nodes' exporters.
    Prometheus,
}

#[derive(Debug, Clone, Serialize)]
pub struct Fleet {
    pub fleet_schema_version: u32,
    pub source: Source,
    /// When this state was published, unix milliseconds.
    pub time_unix_ms: u64,
    pub hosts: Vec<HostState>,
    pub jobs: Vec<Job>,
}

#[derive(Debug, Clone, Serialize)]
pub struct HostState {
    /// As the user named it (`node1:9835`), or Prometheus's `instance`.
    pub host: String,
    pub status: HostStatus,
    /// Why the newest attempt failed; `null` after a success.
    pub error: Option<String>,
    /// When this host last answered, unix milliseconds; `null`: never.
    pub last_ok_unix_ms: Option<u64>,
    /// The first failure of the current run of failures; `null` while it answers.
    pub failing_since_unix_ms: Option<u64>,
    /// Milliseconds since the snapshot below was received; `null` without one.
    pub age_ms: Option<u64>,
    /// The newest snapshot this host gave, kept while it is stale.
    #[serde(serialize_with = "shared")]
    pub snapshot: Option<Arc<Snapshot>>,
}

fn shared<S: serde::Serializer>(snap: &Option<Arc<Snapshot>>, s: S) -> Result<S::Ok, S::Error> {
    snap.as_deref().serialize(s)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HostStatus {
    /// No attempt has finished yet.
    Waiting,
    Ok,
    /// It answered before, not lately: the figures shown are old.
    Stale,
    /// It never answered.
    Unreachable,
}

impl HostState {
    pub fn new(host: String) -> Self {
        Self {
            host,
            status: HostStatus::Waiting,
            error: None,
            last_ok_unix_ms: None,
            failing_since_unix_ms: None,
            age_ms: None,
            snapshot: None,
        }
    }

    pub fn answered(&mut self, snap: Arc<Snapshot>, now_ms: u64) {
        self.snapshot = Some(snap);
        self.last_ok_unix_ms = Some(now_ms);
        self.failing_since_unix_ms = None;
        self.error = None;
        self.status = HostStatus::Ok;
    }

    pub fn failed(&mut self, error: String, now_ms: u64) {
        self.failing_since_unix_ms.get_or_insert(now_ms);
        self.error = Some(error);
        self.status = if self.snapshot.is_some() { HostStatus::Stale } else { HostStatus::Unreachable };
    }

    /// Ages as of `now_ms`; an answer older than `stale_after_ms` is stale
    /// even without a failure (a host whose request still hangs).
    pub fn refresh(&mut self, now_ms: u64, stale_after_ms: u64) {
        self.age_ms = self.last_ok_unix_ms.map(|t| now_ms.saturating_sub(t));
        if self.status == HostStatus::Ok && self.age_ms.is_some_and(|a| a > stale_after_ms) {
            self.status = HostStatus::Stale;
        }
    }

    /// "ok", "stale 12s", "down 5s" (never answered), "waiting".
    pub fn status_text(&self, now_ms: u64) -> String {
        let since = |t: Option<u64>| crate::fleet::short_age(now_ms.saturating_sub(t.unwrap_or(now_ms)));
        match self.status {
            HostStatus::Waiting => "waiting".into(),
            HostStatus::Ok => "ok".into(),
            HostStatus::Stale => format!("stale {}", since(self.last_ok_unix_ms)),
            HostStatus::Unreachable => format!("down {}", since(self.failing_since_unix_ms)),
        }
    }

    /// GPUs with a process on them or at least 5% utilisation, of all;
    /// `None` without a snapshot.
    pub fn busy_gpus(&self) -> Option<(usize, usize)> {
        let snap = self.snapshot.as_ref()?;
        let busy = snap
            .gpus
            .iter()
            .filter(|g| {
                g.utilization.gpu.is_some_and(|u| u >= 5)
                    || snap.processes.iter().any(|p| p.gpus.iter().any(|pg| pg.index == g.index))
            })
            .count();
        Some((busy, snap.gpus.len()))
    }

    /// Memory used and total over the GPUs that report both.
    pub fn memory(&self) -> Option<(u64, u64)> {
        let snap = self.snapshot.as_ref()?;
        let known: Vec<(u64, u64)> = snap.gpus.iter().filter_map(|g| g.memory.used.zip(g.memory.total)).collect();
        if known.is_empty() {
            return None;
        }
        Some(known.iter().fold((0, 0), |(u, t), (gu, gt)| (u.saturating_add(*gu), t.saturating_add(*gt))))
    }

    pub fn alert_count(&self) -> Option<usize> {
        self.snapshot.as_ref().map(|s| s.alerts.len())
    }
}
