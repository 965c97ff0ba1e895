//! What the charts draw: the figures of every snapshot received, in rings
//! bounded by time (ten minutes at the current interval) and by a hard cap
//! on points, so a long session at a short interval keeps its memory flat.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::Duration;

use crate::model::{Gpu, Snapshot};

/// How far back the charts reach at the default interval.
pub const SPAN: Duration = Duration::from_secs(600);
/// Points per series, whatever the interval (at 100 ms: five minutes).
pub const MAX_POINTS: usize = 3000;
/// Processes whose series are kept at once; the longest quiet go first.
pub const MAX_PROCESS_SERIES: usize = 256;

/// One GPU (or all GPUs added up) at one instant.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GpuPoint {
    pub t_ms: u64,
    pub total: Option<u64>,
    pub used: Option<u64>,
    /// The probed processes' caching allocators, added up.
    pub reserved: Option<u64>,
    pub allocated: Option<u64>,
    pub util: Option<f64>,
}

/// One process on one GPU at one instant.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProcessPoint {
    pub t_ms: u64,
    /// What NVML attributes to the process.
    pub nvml: Option<u64>,
    pub reserved: Option<u64>,
    pub allocated: Option<u64>,
    pub inactive_split: Option<u64>,
}

/// Identifies a process row: one process on one GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RowKey {
    pub pid: u32,
    pub gpu: u32,
}

#[derive(Debug, Clone)]
pub struct History {
    capacity: usize,
    all: VecDeque<GpuPoint>,
    gpus: BTreeMap<u32, VecDeque<GpuPoint>>,
    processes: HashMap<RowKey, VecDeque<ProcessPoint>>,
    /// Each index's GPU at the last snapshot: when another GPU takes the
    /// index (a reset, hot-plug), the old one's series go.
    uuids: BTreeMap<u32, String>,
}

impl History {
    pub fn new(interval: Duration) -> Self {
        Self {
            capacity: capacity_for(interval),
            all: VecDeque::new(),
            gpus: BTreeMap::new(),
            processes: HashMap::new(),
            uuids: BTreeMap::new(),
        }
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The time the rings cover once full.
    pub fn window(&self, interval: Duration) -> Duration {
        interval.saturating_mul(u32::try_from(self.capacity).unwrap_or(u32::MAX)).min(SPAN)
    }

    pub fn set_interval(&mut self, interval: Duration) {
        self.capacity = capacity_for(interval);
        let cap = self.capacity;
        trim(&mut self.all, cap);
        self.gpus.values_mut().for_each(|r| trim(r, cap));
        self.processes.values_mut().for_each(|r| trim(r, cap));
    }

    pub fn record(&mut self, snap: &Snapshot) {
        let t_ms = snap.time.time_unix_ms;
        let cap = self.capacity;
        push(&mut self.all, total_point(t_ms, &snap.gpus), cap);
        self.forget_moved_gpus(snap);
        for gpu in &snap.gpus {
            push(self.gpus.entry(gpu.index).or_default(), gpu_point(t_ms, gpu), cap);
        }
        for p in &snap.processes {
            for g in &p.gpus {
                let dev = p.allocator.as_ref().and_then(|a| a.devices.iter().find(|d| d.gpu == Some(g.index)));
                let point = ProcessPoint {
                    t_ms,
                    nvml: g.used_memory,
                    reserved: dev.and_then(|d| d.reserved),
                    allocated: dev.and_then(|d| d.allocated),
                    inactive_split: dev.and_then(|d| d.inactive_split),
                };
                push(self.processes.entry(RowKey { pid: p.pid, gpu: g.index }).or_default(), point, cap);
            }
        }
        self.forget_quiet_processes(t_ms);
    }

    fn forget_moved_gpus(&mut self, snap: &Snapshot) {
        for gpu in &snap.gpus {
            let Some(uuid) = &gpu.uuid else { continue };
            if self.uuids.insert(gpu.index, uuid.clone()).is_some_and(|was| &was != uuid) {
                self.gpus.remove(&gpu.index);
                self.processes.retain(|k, _| k.gpu != gpu.index);
            }
        }
    }

    /// A process that left keeps its series for a while, so its detail view
    /// still has a chart; past the span, or the cap, it goes.
    fn forget_quiet_processes(&mut self, now_ms: u64) {
        let horizon = now_ms.saturating_sub(u64::try_from(SPAN.as_millis()).unwrap_or(u64::MAX));
        let last = |r: &VecDeque<ProcessPoint>| r.back().map_or(0, |p| p.t_ms);
        self.processes.retain(|_, r| last(r) >= horizon);
        if self.processes.len() > MAX_PROCESS_SERIES {
            let mut by_age: Vec<(u64, RowKey)> = self.processes.iter().map(|(k, r)| (last(r), *k)).collect();
            by_age.sort_unstable();
            let excess = self.processes.len() - MAX_PROCESS_SERIES;
            for (_, key) in by_age.into_iter().take(excess) {
                self.processes.remove(&key);
            }
        }
    }

    /// The GPU's series, or all GPUs added up for `None`.
    pub fn gpu(&self, index: Option<u32>) -> &VecDeque<GpuPoint> {
        static EMPTY: VecDeque<GpuPoint> = VecDeque::new();
        match index {
            None => &self.all,
            Some(i) => self.gpus.get(&i).unwrap_or(&EMPTY),
        }
    }

    pub fn process(&self, key: RowKey) -> &VecDeque<ProcessPoint> {
        static EMPTY: VecDeque<ProcessPoint> = VecDeque::new();
        self.processes.get(&key).unwrap_or(&EMPTY)
    }

    pub fn process_series(&self) -> usize {
        self.processes.len()
    }
}

pub fn capacity_for(interval: Duration) -> usize {
    let per = interval.as_millis().max(1);
    usize::try_from(SPAN.as_millis() / per).unwrap_or(MAX_POINTS).clamp(2, MAX_POINTS)
}

fn push<T>(ring: &mut VecDeque<T>, point: T, cap: usize) {
    ring.push_back(point);
    trim(ring, cap);
}

fn trim<T>(ring: &mut VecDeque<T>, cap: usize) {
    while ring.len() > cap {
        ring.pop_front();
    }
}

fn gpu_point(t_ms: u64, gpu: &Gpu) -> GpuPoint {
    let alloc = gpu.allocator.as_ref();
    GpuPoint {
        t_ms,
        total: gpu.memory.total,
        used: gpu.memory.used,
        reserved: alloc.and_then(|a| a.reserved),
        allocated: alloc.and_then(|a| a.allocated),
        util: gpu.utilization.gpu.map(f64::from),
    }
}

fn total_point(t_ms: u64, gpus: &[Gpu]) -> GpuPoint {
    let sum = |f: fn(&Gpu) -> Option<u64>| gpus.iter().filter_map(f).reduce(|a, b| a.saturating_add(b));
    let utils: Vec<f64> = gpus.iter().filter_map(|g| g.utilization.gpu).map(f64::from).collect();
    GpuPoint {
        t_ms,
        total: sum(|g| g.memory.total),
        used: sum(|g| g.memory.used),
        reserved: sum(|g| g.allocator.as_ref().and_then(|a| a.reserved)),
        allocated: sum(|g| g.allocator.as_ref().and_then(|a| a.allocated)),
        util: (!utils.is_empty()).then(|| utils.iter().sum::<f64>() / utils.len() as f64),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Gpu, GpuState, Process, ProcessGpu, ProcessType, Snapshot};

    fn snap(t_ms: u64, pids: &[u32]) -> Snapshot {
        let mut gpu = Gpu::blank(0, GpuState::Ok);
        gpu.memory.used = Some(t_ms);
        gpu.utilization.gpu = Some(50);
        let mut gpu1 = Gpu::blank(1, GpuState::Ok);
        gpu1.memory.used = Some(1);
        gpu1.utilization.gpu = Some(100);
        let json = serde_json::json!({
            "schema_version": 1, "time": "x", "time_unix_ms": t_ms, "interval_ms": 1000,
            "collection_ms": 0.0, "simulated": true, "host": {}, "driver": {},
            "gpus": [gpu, gpu1], "processes": [], "alerts": [],
            "sources": { "nvml": { "ok": true, "error": null }, "host": { "ok": true, "error": null },
                         "probes": { "ok": true, "error": null, "directory": null, "files": 0, "skipped": 0, "last_skipped": null } }
        });
        let mut s: Snapshot = serde_json::from_value(json).unwrap();
        s.processes = pids
            .iter()
            .map(|&pid| {
                serde_json::from_value::<Process>(serde_json::json!({
                    "pid": pid, "gpus": [ProcessGpu { index: 0, kind: ProcessType::Compute, used_memory: Some(7), mig_device: None, mig_uuid: None }],
                    "gpu_memory_total": 7, "name": null, "user": null, "command": null, "start_time": null,
                    "start_time_unix_ms": null, "parent_pid": null, "cpu_percent": null, "host_memory": null,
                    "allocator": null
                }))
                .unwrap()
            })
            .collect();
        s
    }

    #[test]
    fn capacity_follows_the_interval_within_the_cap() {
        assert_eq!(capacity_for(Duration::from_secs(1)), 600);
        assert_eq!(capacity_for(Duration::from_secs(60)), 10);
        assert_eq!(capacity_for(Duration::from_millis(10)), MAX_POINTS);
        assert_eq!(capacity_for(Duration::from_secs(3600)), 2);
    }

    #[test]
    fn rings_stay_bounded_and_shrink_with_a_longer_interval() {
        let mut h = History::new(Duration::from_secs(1));
        for t in 0..1000 {
            h.record(&snap(t * 1000, &[7]));
        }
        assert_eq!(h.gpu(Some(0)).len(), 600);
        assert_eq!(h.gpu(Some(0)).back().unwrap().used, Some(999_000));
        assert_eq!(h.gpu(None).len(), 600);
        let all = h.gpu(None).back().unwrap();
        assert_eq!(all.used, Some(999_001));
        assert_eq!(all.util, Some(75.0));
        h.set_interval(Duration::from_secs(30));
        assert_eq!(h.gpu(Some(1)).len(), 20);
        assert_eq!(h.process(RowKey { pid: 7, gpu: 0 }).len(), 20);
        assert_eq!(h.window(Duration::from_secs(30)), SPAN);
        assert!(h.gpu(Some(9)).is_empty());
    }

    #[test]
    fn departed_processes_are_forgotten_after_the_span_and_beyond_the_cap() {
        let mut h = History::new(Duration::from_secs(1));
        h.record(&snap(0, &[1]));
        h.record(&snap(1000, &[2]));
        assert_eq!(h.process_series(), 2, "a process that left keeps its chart for a while");
        h.record(&snap(700_000, &[2]));
        assert!(h.process(RowKey { pid: 1, gpu: 0 }).is_empty());
        let many: Vec<u32> = (100..100 + MAX_PROCESS_SERIES as u32 + 10).collect();
        h.record(&snap(701_000, &many));
        assert_eq!(h.process_series(), MAX_PROCESS_SERIES);
    }
}
