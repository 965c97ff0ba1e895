//! The alert rules. Each looks at the newest snapshot and the history and
//! gives a verdict for every key it judges; the engine does the rest.

mod counters;
mod fragmentation;
mod leak;
mod lost;
mod pressure;
mod starved;

use std::collections::{BTreeMap, HashMap};

use super::config::AlertsConfig;
use super::engine::{AlertKey, Verdict};
use super::history::Table;
use crate::model::{AlertKind, Snapshot};

pub use counters::CounterState;

/// A process on one GPU; the start time keeps a recycled PID's history
/// apart from its predecessor's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ProcKey {
    pub pid: u32,
    pub start_ms: Option<u64>,
    pub gpu: u32,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GpuPoint {
    pub used: Option<u64>,
    pub total: Option<u64>,
    pub free: Option<u64>,
    pub util: Option<u32>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProcPoint {
    /// Tensors' bytes from the probe, else NVML's figure for the process.
    pub memory: Option<u64>,
    pub probed: bool,
    pub reserved: Option<u64>,
    pub inactive_split: Option<u64>,
    pub fragmentation: Option<f64>,
}

pub struct Inputs<'a> {
    pub snap: &'a Snapshot,
    pub now_ms: u64,
    pub gpus: &'a Table<u32, GpuPoint>,
    pub procs: &'a Table<ProcKey, ProcPoint>,
    pub config: &'a AlertsConfig,
}

pub type Verdicts = BTreeMap<AlertKey, Verdict>;

pub fn judge(inputs: &Inputs<'_>, counters: &mut HashMap<ProcKey, CounterState>) -> Verdicts {
    let c = inputs.config;
    let mut v = Verdicts::new();
    if c.gpu_lost.enabled {
        lost::judge(inputs, &mut v);
    }
    if c.memory_pressure.enabled {
        pressure::judge(inputs, &mut v);
    }
    if c.fragmentation.enabled {
        fragmentation::judge(inputs, &mut v);
    }
    if c.leak.enabled {
        leak::judge(inputs, &mut v);
    }
    if c.starved.enabled {
        starved::judge(inputs, &mut v);
    }
    counters::judge(inputs, counters, &mut v);
    v
}

pub fn key(kind: AlertKind, gpu: u32, pid: Option<u32>) -> AlertKey {
    AlertKey { kind, gpu: Some(gpu), pid }
}

/// Every (process, GPU) pair of the snapshot with its key.
pub fn process_gpus(snap: &Snapshot) -> impl Iterator<Item = (ProcKey, &crate::model::Process, u32)> {
    snap.processes.iter().flat_map(|p| {
        let start_ms = p.start_time.as_ref().map(|t| t.time_unix_ms);
        p.gpus.iter().map(move |g| (ProcKey { pid: p.pid, start_ms, gpu: g.index }, p, g.index))
    })
}

fn pct(f: f64) -> String {
    format!("{:.0}%", f * 100.0)
}

fn human_duration(ms: u64) -> String {
    humantime::format_duration(std::time::Duration::from_secs(ms.div_ceil(1000))).to_string()
}
