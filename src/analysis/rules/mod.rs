//! The alert rules. Each looks at the newest snapshot and the history and
//! gives a verdict for every key it judges; the engine does the rest.

mod counters;
mod fragmentation;
mod health;
mod leak;
mod lost;
mod pressure;
mod shm;
mod sm_idle;
mod starved;
mod tensor_idle;
mod xid;

use std::collections::BTreeMap;

use crate::util::sorted_map::SortedMap;

use super::config::AlertsConfig;
use super::engine::{AlertKey, Verdict};
use crate::model::{AlertKind, DeviceAllocator, Process, Snapshot};

use crate::history::{GpuSeries, Store};
pub use crate::history::{ProcKey, process_gpus};
pub use counters::CounterState;
pub use leak::Floor;

pub struct Inputs<'a> {
    pub snap: &'a Snapshot,
    pub now_ms: u64,
    pub store: &'a Store,
    pub config: &'a AlertsConfig,
}

/// One tick's verdicts, by key. A key without one is judged clear: the
/// engine ends a followed alert whose key got no verdict, and a clear
/// verdict for a key not followed has nothing to end. A hold for a key not
/// followed leaves nothing either: there is no alert to keep, nor a wait
/// to start over. So only raises, and holds for the keys the engine
/// follows, are kept: a rule judges every process on every GPU (some 2,500
/// keys a tick at 512 processes), nearly all of them clear or on hold
/// (the leak rule holds every process for its first window).
#[derive(Debug)]
pub struct Verdicts {
    kept: BTreeMap<AlertKey, Verdict>,
    /// The engine's keys, sorted.
    followed: Vec<AlertKey>,
}

impl Verdicts {
    /// For an engine that follows `followed` (sorted).
    pub fn new(followed: Vec<AlertKey>) -> Self {
        Self { kept: BTreeMap::new(), followed }
    }

    /// Replaces any verdict given the key before.
    pub fn insert(&mut self, key: AlertKey, verdict: Verdict) {
        match verdict {
            Verdict::Hold if self.followed.binary_search(&key).is_err() => _ = self.kept.remove(&key),
            Verdict::Clear => _ = self.kept.remove(&key),
            verdict => _ = self.kept.insert(key, verdict),
        }
    }

    /// Judges clear, after the rules, the keys `clear` picks.
    pub fn clear_where(&mut self, mut clear: impl FnMut(&AlertKey) -> bool) {
        self.kept.retain(|key, _| !clear(key));
    }

    /// The verdicts kept, for the engine (where a missing key is clear).
    pub fn into_map(self) -> BTreeMap<AlertKey, Verdict> {
        self.kept
    }
}

pub fn judge(
    inputs: &Inputs<'_>,
    followed: Vec<AlertKey>,
    counters: &mut SortedMap<ProcKey, CounterState>,
    floors: &mut SortedMap<ProcKey, Floor>,
) -> Verdicts {
    let c = inputs.config;
    let mut v = Verdicts::new(followed);
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
        leak::judge(inputs, floors, &mut v);
    }
    if c.starved.enabled {
        starved::judge(inputs, &mut v);
    }
    if c.sm_idle.enabled {
        sm_idle::judge(inputs, &mut v);
    }
    if c.tensor_idle.enabled {
        tensor_idle::judge(inputs, &mut v);
    }
    if c.shm_full.enabled {
        shm::judge(inputs, &mut v);
    }
    if c.xid.enabled {
        xid::judge(inputs, &mut v);
    }
    if c.health.enabled {
        health::judge(inputs, &mut v);
    }
    counters::judge(inputs, counters, &mut v);
    v
}

/// Drops the state of every key not in `seen`, the keys a rule judged this
/// tick. A sorted list, not a set: a set's table is twice the size at 512
/// processes, and this one is gone by the next tick.
fn forget_unseen<V>(states: &mut SortedMap<ProcKey, V>, mut seen: Vec<ProcKey>) {
    seen.sort_unstable();
    states.retain(|k, _| seen.binary_search(k).is_ok());
}

pub fn key(kind: AlertKind, gpu: u32, pid: Option<u32>) -> AlertKey {
    AlertKey { kind, gpu: Some(gpu), pid }
}

/// The process's allocator figures for `gpu`, where its probe placed one.
fn device(p: &Process, gpu: u32) -> Option<&DeviceAllocator> {
    p.allocator.as_ref().and_then(|a| a.devices.iter().find(|d| d.gpu == Some(gpu)))
}

/// What a GPU's history says of one figure over a rule's window.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Window {
    /// The mean of the samples, which reach back over the whole window.
    Mean(f64),
    /// Samples that do not reach back that far yet (or too few): wait.
    Short,
    /// No sample in the window: the figure is unavailable, and says nothing.
    Absent,
}

/// The mean of `field` over the last `window_ms` of `series`, each bucket
/// weighted by its samples. A figure read only for part of the window (a
/// board whose activity counters began later than its utilisation) is
/// `Short` until its own samples cover it, not judged on a few.
fn window_mean(series: &GpuSeries, window_ms: u64, field: usize, interval_ms: u64) -> Window {
    let Some(last) = series.last_ms() else { return Window::Absent };
    let from = last.saturating_sub(window_ms);
    let width = series.width_since(from).max(1);
    let (mut first, mut sum, mut n) = (None, 0.0, 0u64);
    for b in series.since(from) {
        let agg = b.get(field);
        let Some(mean) = agg.mean() else { continue };
        // Where the bucket begins: a coarse bucket's time is its newest
        // sample's, which may be most of a bucket after the window's start.
        first.get_or_insert(b.t_ms - b.t_ms % width);
        sum += mean * f64::from(agg.count());
        n += u64::from(agg.count());
    }
    let Some(first) = first else { return Window::Absent };
    // Ticks come about an interval apart, some a little late: the first
    // sample of a covered window is within one and a half of its start.
    let slack = interval_ms.saturating_add(interval_ms / 2);
    if n < 3 || first > from.saturating_add(slack) {
        return Window::Short;
    }
    Window::Mean(sum / n as f64)
}

/// `fields`' means over the window, or the verdict while any cannot be
/// judged: clear where one is unavailable throughout (nothing made up
/// from a missing figure), else hold while one does not cover the window.
fn window_means<const K: usize>(
    series: &GpuSeries,
    window_ms: u64,
    fields: [usize; K],
    interval_ms: u64,
) -> Result<[f64; K], Verdict> {
    let mut means = [0.0; K];
    let mut short = false;
    for (mean, field) in means.iter_mut().zip(fields) {
        match window_mean(series, window_ms, field, interval_ms) {
            Window::Mean(m) => *mean = m,
            Window::Short => short = true,
            Window::Absent => return Err(Verdict::Clear),
        }
    }
    if short { Err(Verdict::Hold) } else { Ok(means) }
}

pub(crate) fn window_ms(window: std::time::Duration) -> u64 {
    u64::try_from(window.as_millis()).unwrap_or(u64::MAX)
}

fn pct(f: f64) -> String {
    format!("{:.0}%", f * 100.0)
}

fn human_duration(ms: u64) -> String {
    humantime::format_duration(std::time::Duration::from_secs(ms.div_ceil(1000))).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::engine::Raise;
    use crate::model::Severity;

    fn raise() -> Verdict {
        Verdict::Raise(Raise {
            severity: Severity::Warning,
            value: None,
            threshold: None,
            message: String::new(),
            hint: String::new(),
        })
    }

    #[test]
    fn only_raises_and_the_holds_of_followed_keys_are_kept() {
        let (followed, other, third) =
            (key(AlertKind::Leak, 0, Some(1)), key(AlertKind::Leak, 0, Some(2)), key(AlertKind::Oom, 1, Some(3)));
        let mut v = Verdicts::new(vec![followed]);
        v.insert(followed, Verdict::Hold);
        v.insert(other, Verdict::Hold);
        v.insert(third, raise());
        let kept = v.into_map();
        assert_eq!(kept.keys().copied().collect::<Vec<_>>(), [third, followed], "in key order");
        assert_eq!(kept.get(&followed), Some(&Verdict::Hold), "a followed alert is held as it is");

        // A later hold replaces a raise given the same key, as a clear does.
        let mut v = Verdicts::new(Vec::new());
        v.insert(other, raise());
        v.insert(other, Verdict::Hold);
        assert!(v.into_map().is_empty());
    }
}
