//! The one history: every snapshot's figures per GPU, for all GPUs added
//! up, and per process on each GPU, kept round-robin-database style (see
//! `series.rs`). The analyzer records into it on every tick and its rules
//! read it; the dashboard draws its charts from the same store.
//!
//! Process series are the many (up to every process on every GPU), and
//! most of their fields come from the allocator probe, which most
//! processes never have. So each series keeps its fields in columns that
//! exist only once a field has had a value: an unprobed process pays for
//! its times and its NVML figure, a little over a third of a full series.

mod series;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use crate::hashing::IntSet;
use crate::model::{Gpu, Process, Snapshot};
use crate::util::sorted_map::SortedMap;

pub use series::{Agg, Bucket, Series, Tier};

/// Processes whose series are kept at once beyond those on a GPU now; the
/// longest quiet go first.
pub const MAX_PROCESS_SERIES: usize = 256;
/// Raw samples kept per series: the newest moments at full resolution.
const GPU_RAW: usize = 64;
const PROCESS_RAW: usize = 8;
/// One-second buckets: two minutes for a GPU (the starved and sm_idle
/// rules' window; longer ones read the coarsest tier, which spans the
/// longest rule window), a minute and a bit for a process (the
/// fragmentation median's).
const GPU_SECONDS: usize = 128;
const PROCESS_SECONDS: usize = 64;
/// Buckets across the longest window: a chart column or so each for a GPU,
/// coarser for the many processes.
const GPU_SPAN_BUCKETS: usize = 240;
const PROCESS_SPAN_BUCKETS: usize = 60;
/// The most buckets one series holds, all tiers together.
pub const MAX_POINTS: usize = GPU_RAW + GPU_SECONDS + GPU_SPAN_BUCKETS + 1;

/// A GPU's fields, by index into its buckets.
pub mod gpu {
    pub const TOTAL: usize = 0;
    pub const USED: usize = 1;
    /// The probed processes' caching allocators, added up.
    pub const RESERVED: usize = 2;
    pub const ALLOCATED: usize = 3;
    pub const UTIL: usize = 4;
    /// The activity counters (GPM), percent: what `UTIL` overstates.
    pub const SM_ACTIVE: usize = 5;
    pub const TENSOR_ACTIVE: usize = 6;
    pub const DRAM_ACTIVE: usize = 7;
    /// Power draw in watts (all GPUs: their sum).
    pub const POWER: usize = 8;
    pub const FIELDS: usize = 9;
}

/// A process's fields on one GPU.
pub mod process {
    /// What NVML attributes to the process.
    pub const NVML: usize = 0;
    pub const RESERVED: usize = 1;
    pub const ALLOCATED: usize = 2;
    pub const FRAGMENTATION: usize = 3;
    pub const FIELDS: usize = 4;
}

pub type GpuSeries = Series<{ gpu::FIELDS }>;
pub type ProcessSeries = Series<{ process::FIELDS }>;

/// A process on one GPU; the start time keeps a recycled PID's history
/// apart from its predecessor's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProcKey {
    pub pid: u32,
    pub start_ms: Option<u64>,
    pub gpu: u32,
}

/// Every (process, GPU) pair of the snapshot with its key.
pub fn process_gpus(snap: &Snapshot) -> impl Iterator<Item = (ProcKey, &Process, u32)> {
    snap.processes.iter().flat_map(|p| {
        let start_ms = p.start_time.as_ref().map(|t| t.time_unix_ms);
        p.gpus.iter().map(move |g| (ProcKey { pid: p.pid, start_ms, gpu: g.index }, p, g.index))
    })
}

/// The store, shared by the thread that records and the ones that read.
pub type Shared = Arc<Mutex<Store>>;

/// The lock guards whole `record` calls; a panic inside one leaves rings
/// that are still each bounded and ordered, so a poisoned lock is usable.
pub fn lock(shared: &Shared) -> MutexGuard<'_, Store> {
    shared.lock().unwrap_or_else(PoisonError::into_inner)
}

#[derive(Debug, Clone)]
pub struct Store {
    gpu_tiers: [Tier; 3],
    process_tiers: [Tier; 3],
    /// How long a departed process's series stays, for its detail chart.
    keep_ms: u64,
    all: GpuSeries,
    gpus: BTreeMap<u32, GpuSeries>,
    processes: SortedMap<ProcKey, ProcessSeries>,
    /// Each index's GPU at the last snapshot: when another GPU takes the
    /// index (a reset, hot-plug), the old one's series go.
    uuids: BTreeMap<u32, String>,
}

impl Store {
    /// Enough for a look back over `longest`, whatever the interval.
    pub fn new(longest: Duration) -> Self {
        let longest_ms = u64::try_from(longest.as_millis()).unwrap_or(u64::MAX).max(1);
        let tiers = |raw, seconds, span_buckets: usize| {
            let width_ms = longest_ms.div_ceil(span_buckets as u64).max(1_000);
            [
                Tier { width_ms: 0, len: raw },
                Tier { width_ms: 1_000, len: seconds },
                Tier { width_ms, len: span_buckets + 1 },
            ]
        };
        let gpu_tiers = tiers(GPU_RAW, GPU_SECONDS, GPU_SPAN_BUCKETS);
        Self {
            gpu_tiers,
            process_tiers: tiers(PROCESS_RAW, PROCESS_SECONDS, PROCESS_SPAN_BUCKETS),
            keep_ms: longest_ms,
            all: Series::new(&gpu_tiers),
            gpus: BTreeMap::new(),
            processes: SortedMap::default(),
            uuids: BTreeMap::new(),
        }
    }

    pub fn shared(longest: Duration) -> Shared {
        Arc::new(Mutex::new(Self::new(longest)))
    }

    /// Forgets everything (a replay that seeks).
    pub fn clear(&mut self) {
        *self = Self::new(Duration::from_millis(self.keep_ms));
    }

    /// Adds one snapshot; returns the indices now held by another GPU than
    /// at the last snapshot, whose series were dropped.
    pub fn record(&mut self, snap: &Snapshot) -> IntSet<u32> {
        let t_ms = snap.time.time_unix_ms;
        let moved = self.forget_moved_gpus(snap);
        self.all.push(t_ms, &total_values(&snap.gpus));
        for g in &snap.gpus {
            let tiers = self.gpu_tiers;
            self.gpus.entry(g.index).or_insert_with(|| Series::new(&tiers)).push(t_ms, &gpu_values(g));
        }
        self.gpus.retain(|i, _| snap.gpus.iter().any(|g| g.index == *i));
        for (key, p, gpu) in process_gpus(snap) {
            let values = process_values(p, gpu);
            let probed = values[process::NVML + 1..].iter().any(|v| v.is_some_and(f64::is_finite));
            let tiers = self.process_tiers;
            let series = self.processes.get_or_insert_with(key, || new_process_series(&tiers, probed));
            if probed {
                series.refine(&tiers);
            }
            series.push(t_ms, &values);
        }
        self.forget_quiet_processes(t_ms);
        moved
    }

    fn forget_moved_gpus(&mut self, snap: &Snapshot) -> IntSet<u32> {
        let mut moved = IntSet::default();
        for g in &snap.gpus {
            let Some(uuid) = &g.uuid else { continue };
            match self.uuids.get_mut(&g.index) {
                Some(was) if was == uuid => {}
                Some(was) => {
                    uuid.clone_into(was);
                    moved.insert(g.index);
                }
                None => drop(self.uuids.insert(g.index, uuid.clone())),
            }
        }
        // A GPU whose UUID could not be read this tick keeps its last one.
        self.uuids.retain(|i, _| snap.gpus.iter().any(|g| g.index == *i));
        self.gpus.retain(|i, _| !moved.contains(i));
        self.processes.retain(|k, _| !moved.contains(&k.gpu));
        moved
    }

    /// A process that left keeps its series for the longest window, so its
    /// detail view still has a chart; past that, or beyond the cap on quiet
    /// series, it goes. Processes on a GPU now always keep theirs: the rules
    /// need them.
    fn forget_quiet_processes(&mut self, now_ms: u64) {
        let horizon = now_ms.saturating_sub(self.keep_ms);
        let last = |s: &ProcessSeries| s.last_ms().unwrap_or(0);
        self.processes.retain(|_, s| last(s) >= horizon);
        if self.processes.len() <= MAX_PROCESS_SERIES {
            return;
        }
        let mut quiet: Vec<(u64, ProcKey)> =
            self.processes.iter().filter(|(_, s)| last(s) != now_ms).map(|(k, s)| (last(s), *k)).collect();
        quiet.sort_unstable_by_key(|(t, _)| *t);
        let excess = self.processes.len() - MAX_PROCESS_SERIES;
        for (_, key) in quiet.into_iter().take(excess) {
            self.processes.remove(&key);
        }
    }

    /// One GPU's series, or all GPUs added up for `None`.
    pub fn gpu(&self, index: Option<u32>) -> Option<&GpuSeries> {
        match index {
            None => Some(&self.all).filter(|s| !s.is_empty()),
            Some(i) => self.gpus.get(&i),
        }
    }

    pub fn process(&self, key: &ProcKey) -> Option<&ProcessSeries> {
        self.processes.get(key)
    }

    /// The freshest series of `pid` on `gpu`, whichever process (start
    /// time) held the PID: what a dashboard row names.
    pub fn process_row(&self, pid: u32, gpu: u32) -> Option<&ProcessSeries> {
        self.processes.iter().filter(|(k, _)| k.pid == pid && k.gpu == gpu).map(|(_, s)| s).max_by_key(|s| s.last_ms())
    }

    pub fn process_series(&self) -> usize {
        self.processes.len()
    }

    /// Buckets held per GPU and per process: bounded by design, checked by
    /// tests.
    pub fn total_points(&self) -> usize {
        self.gpus.values().map(Series::len).sum::<usize>() + self.processes.values().map(Series::len).sum::<usize>()
    }

    /// Roughly what the store holds on the heap: the series' columns by
    /// capacity, and the maps' entries (a `BTreeMap`'s nodes counted as
    /// their entries alone).
    pub fn heap_bytes(&self) -> usize {
        let gpus = self.gpus.values().map(|s| s.heap_bytes() + size_of::<(u32, GpuSeries)>()).sum::<usize>();
        let processes = self.processes.capacity() * size_of::<(ProcKey, ProcessSeries)>()
            + self.processes.values().map(Series::heap_bytes).sum::<usize>();
        let uuids = self.uuids.values().map(|u| u.capacity() + size_of::<(u32, String)>()).sum::<usize>();
        self.all.heap_bytes() + gpus + processes + uuids
    }
}

/// A process's series. Without a probe, only the coarsest tier: the one
/// rule that reads a process's history (fragmentation) needs the probe's
/// figures, and the chart of the window (`[history] window`) draws from
/// the coarsest tier once the process is older than the seconds reach (a
/// younger one's is drawn in ten-second steps rather than in seconds). At
/// a one-second interval the finer tiers would be over a third of the
/// series, for each of the hundreds of processes most nodes never probe.
/// The probe's first figures bring them.
fn new_process_series(tiers: &[Tier; 3], probed: bool) -> ProcessSeries {
    match tiers {
        [.., coarsest] if !probed => Series::new(std::slice::from_ref(coarsest)),
        _ => Series::new(tiers),
    }
}

fn gpu_values(g: &Gpu) -> [Option<f64>; gpu::FIELDS] {
    let alloc = g.allocator.as_ref();
    let f = |v: Option<u64>| v.map(|v| v as f64);
    [
        f(g.memory.total),
        f(g.memory.used),
        f(alloc.and_then(|a| a.reserved)),
        f(alloc.and_then(|a| a.allocated)),
        g.utilization.gpu.map(f64::from),
        g.activity.as_ref().and_then(|a| a.sm_active),
        g.activity.as_ref().and_then(|a| a.tensor_active),
        g.activity.as_ref().and_then(|a| a.dram_active),
        g.power_draw_w,
    ]
}

fn total_values(gpus: &[Gpu]) -> [Option<f64>; gpu::FIELDS] {
    let sum =
        |f: fn(&Gpu) -> Option<u64>| gpus.iter().filter_map(f).reduce(|a, b| a.saturating_add(b)).map(|v| v as f64);
    let utils: Vec<f64> = gpus.iter().filter_map(|g| g.utilization.gpu).map(f64::from).collect();
    // Of the GPUs that report it: a board without GPM is not an idle one.
    let mean = |f: fn(&crate::model::Activity) -> Option<f64>| {
        let v: Vec<f64> = gpus.iter().filter_map(|g| g.activity.as_ref().and_then(f)).collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    };
    [
        sum(|g| g.memory.total),
        sum(|g| g.memory.used),
        sum(|g| g.allocator.as_ref().and_then(|a| a.reserved)),
        sum(|g| g.allocator.as_ref().and_then(|a| a.allocated)),
        (!utils.is_empty()).then(|| utils.iter().sum::<f64>() / utils.len() as f64),
        mean(|a| a.sm_active),
        mean(|a| a.tensor_active),
        mean(|a| a.dram_active),
        // What the node draws: the GPUs that report it, added up.
        gpus.iter().filter_map(|g| g.power_draw_w).reduce(|a, b| a + b),
    ]
}

fn process_values(p: &Process, gpu: u32) -> [Option<f64>; process::FIELDS] {
    let dev = p.allocator.as_ref().and_then(|a| a.devices.iter().find(|d| d.gpu == Some(gpu)));
    let nvml = p.gpus.iter().find(|g| g.index == gpu).and_then(|g| g.used_memory);
    let f = |v: Option<u64>| v.map(|v| v as f64);
    [f(nvml), f(dev.and_then(|d| d.reserved)), f(dev.and_then(|d| d.allocated)), dev.and_then(|d| d.fragmentation)]
}
