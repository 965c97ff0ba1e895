//! Analysis: history turned into alerts. The analyzer sees every snapshot
//! after collection, records it in the history store (`crate::history`,
//! which the dashboard's charts read too), and fills in the snapshot's
//! `alerts` (and this tick's `events`).

pub mod config;
pub mod engine;
mod exec;
mod health;
pub mod input_cause;
mod rules;
#[cfg(test)]
mod tests;

use config::{AlertsConfig, HistoryConfig};
use engine::Engine;
use rules::{CounterState, Floor, Inputs, ProcKey};

use crate::history::{self, Shared, Store};
use crate::model::{AlertEvent, AlertKind, Change, Snapshot};
use crate::util::sorted_map::SortedMap;

pub use exec::{Counts as HookCounts, ExecHook, finish_hooks, resolve as resolve_program};

pub struct Analyzer {
    config: AlertsConfig,
    store: Shared,
    counters: SortedMap<ProcKey, CounterState>,
    /// The leak rule's running per-bucket minima.
    floors: SortedMap<ProcKey, Floor>,
    /// Each PID's start time at the last tick, sorted by PID: to tell a
    /// recycled PID.
    starts: Vec<(u32, Option<u64>)>,
    engine: Engine,
    hook: Option<ExecHook>,
    /// Each GPU's error counters, to judge their growth (`health.rs`).
    health: health::HealthState,
}

impl Analyzer {
    pub fn new(history: &HistoryConfig, config: AlertsConfig) -> Self {
        let store = Store::shared(longest_window(history, &config));
        Self::with_store(store, config)
    }

    /// Records into `store`, which others (the dashboard) may read.
    pub fn with_store(store: Shared, config: AlertsConfig) -> Self {
        let hook = ExecHook::new(&config.exec, config.exec_min_interval);
        Self {
            store,
            counters: SortedMap::default(),
            floors: SortedMap::default(),
            starts: Vec::new(),
            engine: Engine::default(),
            hook,
            health: health::HealthState::default(),
            config,
        }
    }

    /// The store this analyzer records into.
    pub fn history(&self) -> Shared {
        self.store.clone()
    }

    /// For recordings: the same rules, and never the `[alerts] exec` hook,
    /// since a recorded alert is about the past and the hook acts now.
    pub fn for_replay(history: &HistoryConfig, config: AlertsConfig) -> Self {
        Self::new(history, AlertsConfig { exec: Vec::new(), ..config })
    }

    /// `for_replay`, recording into `store`.
    pub fn for_replay_into(store: Shared, config: AlertsConfig) -> Self {
        Self::with_store(store, AlertsConfig { exec: Vec::new(), ..config })
    }

    pub fn runs_hooks(&self) -> bool {
        self.hook.is_some()
    }

    pub fn observe(&mut self, snap: &mut Snapshot) {
        let now_ms = snap.time.time_unix_ms;
        // Before the rules: the health alert reads the verdict.
        self.health.judge(snap, &self.config);
        let mut store = history::lock(&self.store);
        let moved = store.record(snap);
        self.counters.retain(|k, _| !moved.contains(&k.gpu));
        self.floors.retain(|k, _| !moved.contains(&k.gpu));
        let inputs = Inputs { snap, now_ms, store: &store, config: &self.config };
        let mut verdicts = rules::judge(&inputs, self.engine.followed(), &mut self.counters, &mut self.floors);
        drop(store);
        // A PID now owned by another process: the old process's alerts end
        // here, whatever the new one's (short) history says.
        let mut starts: Vec<(u32, Option<u64>)> =
            snap.processes.iter().map(|p| (p.pid, p.start_time.as_ref().map(|t| t.time_unix_ms))).collect();
        starts.sort_unstable();
        verdicts.clear_where(|key| {
            let recycled = key.pid.is_some_and(
                |pid| matches!((start(&self.starts, pid), start(&starts, pid)), (Some(old), Some(new)) if old != new),
            );
            // Likewise a GPU index now held by another GPU.
            recycled || key.gpu.is_some_and(|g| moved.contains(&g))
        });
        self.starts = starts;
        let pressure_ms = u64::try_from(self.config.memory_pressure.duration.as_millis()).unwrap_or(u64::MAX);
        let min_duration = |kind| if kind == AlertKind::MemoryPressure { pressure_ms } else { 0 };
        // Three missed ticks (or 10 s) without data is a gap, not a trend.
        let max_gap = snap.interval_ms.saturating_mul(3).max(10_000);
        let events = self.engine.apply(&snap.time, verdicts.into_map(), min_duration, max_gap);
        snap.alerts = self.engine.active();
        if let Some(hook) = &mut self.hook {
            for alert in snap.alerts.iter().filter(|a| events.iter().any(|e| raised(e, a))) {
                hook.fire(alert);
            }
        }
        snap.events = events;
    }

    /// Points held across all series: bounded by design, checked by tests.
    pub fn history_points(&self) -> usize {
        history::lock(&self.store).total_points()
    }

    pub fn timeline(&self) -> impl Iterator<Item = &AlertEvent> {
        self.engine.timeline()
    }
}

/// Rules look back up to their own windows, whatever the history setting;
/// the store keeps enough for the longest of them.
pub fn longest_window(history: &HistoryConfig, config: &AlertsConfig) -> std::time::Duration {
    [
        history.window,
        config.fragmentation.window,
        config.leak.window,
        config.starved.window,
        config.sm_idle.window,
        config.tensor_idle.window,
    ]
    .into_iter()
    .max()
    .unwrap_or_default()
}

/// The start time `starts` (sorted) gives `pid`: `None` where the PID is
/// absent, `Some(None)` where its start time is unknown.
fn start(starts: &[(u32, Option<u64>)], pid: u32) -> Option<Option<u64>> {
    starts.binary_search_by_key(&pid, |(p, _)| *p).ok().and_then(|i| starts.get(i)).map(|(_, s)| *s)
}

fn raised(e: &AlertEvent, a: &crate::model::Alert) -> bool {
    e.change == Change::Raised && e.kind == a.kind && e.gpu == a.gpu && e.pid == a.pid
}
