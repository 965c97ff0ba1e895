//! Analysis: bounded history turned into alerts. The analyzer sees every
//! snapshot after collection, keeps its own history, and fills in the
//! snapshot's `alerts` (and this tick's `events`).

pub mod config;
pub mod engine;
mod exec;
pub mod history;
mod rules;
#[cfg(test)]
mod tests;

use std::collections::{HashMap, HashSet};

use config::{AlertsConfig, HistoryConfig};
use engine::Engine;
use history::Table;
use rules::{CounterState, GpuPoint, Inputs, ProcKey, ProcPoint, process_gpus};

use crate::model::{AlertEvent, AlertKind, Change, Snapshot};

pub use exec::{Counts as HookCounts, ExecHook, finish_hooks, resolve as resolve_program};

pub struct Analyzer {
    config: AlertsConfig,
    gpus: Table<u32, GpuPoint>,
    procs: Table<ProcKey, ProcPoint>,
    counters: HashMap<ProcKey, CounterState>,
    /// Each PID's start time at the last tick, to tell a recycled PID.
    starts: HashMap<u32, Option<u64>>,
    /// Each GPU index's UUID at the last tick, to tell when another GPU
    /// took the index (a reset, hot-plug, a driver reload).
    uuids: HashMap<u32, String>,
    engine: Engine,
    hook: Option<ExecHook>,
}

impl Analyzer {
    pub fn new(history: &HistoryConfig, config: AlertsConfig) -> Self {
        // Rules look back up to their own windows, whatever the history
        // setting; keep enough for the longest of them.
        let longest = [history.window, config.fragmentation.window, config.leak.window, config.starved.window]
            .into_iter()
            .max()
            .unwrap_or_default();
        let window_ms = u64::try_from(longest.as_millis()).unwrap_or(u64::MAX);
        let hook = ExecHook::new(&config.exec, config.exec_min_interval);
        Self {
            gpus: Table::new(window_ms),
            procs: Table::new(window_ms),
            counters: HashMap::new(),
            starts: HashMap::new(),
            uuids: HashMap::new(),
            engine: Engine::default(),
            hook,
            config,
        }
    }

    /// For recordings: the same rules, and never the `[alerts] exec` hook,
    /// since a recorded alert is about the past and the hook acts now.
    pub fn for_replay(history: &HistoryConfig, config: AlertsConfig) -> Self {
        Self::new(history, AlertsConfig { exec: Vec::new(), ..config })
    }

    pub fn runs_hooks(&self) -> bool {
        self.hook.is_some()
    }

    pub fn observe(&mut self, snap: &mut Snapshot) {
        let now_ms = snap.time.time_unix_ms;
        let moved = self.forget_moved_gpus(snap);
        self.record(snap, now_ms);
        let inputs = Inputs { snap, now_ms, gpus: &self.gpus, procs: &self.procs, config: &self.config };
        let mut verdicts = rules::judge(&inputs, &mut self.counters);
        // A PID now owned by another process: the old process's alerts end
        // here, whatever the new one's (short) history says.
        let starts: HashMap<u32, Option<u64>> =
            snap.processes.iter().map(|p| (p.pid, p.start_time.as_ref().map(|t| t.time_unix_ms))).collect();
        for (key, verdict) in &mut verdicts {
            let recycled = key.pid.is_some_and(
                |pid| matches!((self.starts.get(&pid), starts.get(&pid)), (Some(old), Some(new)) if old != new),
            );
            // Likewise a GPU index now held by another GPU.
            if recycled || key.gpu.is_some_and(|g| moved.contains(&g)) {
                *verdict = engine::Verdict::Clear;
            }
        }
        self.starts = starts;
        let pressure_ms = u64::try_from(self.config.memory_pressure.duration.as_millis()).unwrap_or(u64::MAX);
        let min_duration = |kind| if kind == AlertKind::MemoryPressure { pressure_ms } else { 0 };
        // Three missed ticks (or 10 s) without data is a gap, not a trend.
        let max_gap = snap.interval_ms.saturating_mul(3).max(10_000);
        let events = self.engine.apply(&snap.time, verdicts, min_duration, max_gap);
        snap.alerts = self.engine.active();
        if let Some(hook) = &mut self.hook {
            for alert in snap.alerts.iter().filter(|a| events.iter().any(|e| raised(e, a))) {
                hook.fire(alert);
            }
        }
        snap.events = events;
    }

    /// Indices whose GPU is not the one of the last tick: their history
    /// and counters belong to the other GPU, and are dropped.
    fn forget_moved_gpus(&mut self, snap: &Snapshot) -> HashSet<u32> {
        let now: HashMap<u32, String> = snap.gpus.iter().filter_map(|g| Some((g.index, g.uuid.clone()?))).collect();
        let moved: HashSet<u32> =
            now.iter().filter(|(i, u)| self.uuids.get(*i).is_some_and(|was| was != *u)).map(|(i, _)| *i).collect();
        self.gpus.retain_keys(|k| !moved.contains(k));
        self.procs.retain_keys(|k| !moved.contains(&k.gpu));
        self.counters.retain(|k, _| !moved.contains(&k.gpu));
        // A GPU whose UUID could not be read this tick keeps its last one.
        self.uuids.retain(|i, _| snap.gpus.iter().any(|g| g.index == *i));
        self.uuids.extend(now);
        moved
    }

    fn record(&mut self, snap: &Snapshot, now_ms: u64) {
        for gpu in &snap.gpus {
            let point = GpuPoint {
                used: gpu.memory.used,
                total: gpu.memory.total,
                free: gpu.memory.free,
                util: gpu.utilization.gpu,
            };
            self.gpus.push(gpu.index, now_ms, point);
        }
        let mut present = HashSet::new();
        for (pk, p, gpu) in process_gpus(snap) {
            let device = p.allocator.as_ref().and_then(|a| a.devices.iter().find(|d| d.gpu == Some(gpu)));
            let nvml = p.gpus.iter().find(|g| g.index == gpu).and_then(|g| g.used_memory);
            let point = ProcPoint {
                memory: device.and_then(|d| d.allocated).or(nvml),
                probed: device.is_some(),
                reserved: device.and_then(|d| d.reserved),
                inactive_split: device.and_then(|d| d.inactive_split),
                fragmentation: device.and_then(|d| d.fragmentation),
            };
            self.procs.push(pk, now_ms, point);
            present.insert(pk);
        }
        self.procs.retain_keys(|k| present.contains(k));
        let gpus: HashSet<u32> = snap.gpus.iter().map(|g| g.index).collect();
        self.gpus.retain_keys(|k| gpus.contains(k));
    }

    /// Points held across all series: bounded by design, checked by tests.
    pub fn history_points(&self) -> usize {
        self.gpus.total_points() + self.procs.total_points()
    }

    pub fn timeline(&self) -> impl Iterator<Item = &AlertEvent> {
        self.engine.timeline()
    }
}

fn raised(e: &AlertEvent, a: &crate::model::Alert) -> bool {
    e.change == Change::Raised && e.kind == a.kind && e.gpu == a.gpu && e.pid == a.pid
}
