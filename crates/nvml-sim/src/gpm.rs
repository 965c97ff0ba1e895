//! GPU Performance Monitoring (GPM, Hopper and newer) as the driver does
//! it: a sample captures the board's counters at an instant; the metrics
//! are what the counters grew by between two samples, over the time
//! between them.
//!
//! Sources: nvml.h (NVIDIA/go-nvml `gen/nvml/nvml.h`, the GPM enums,
//! structs and functions) and NVIDIA/DCGM `DcgmGpmManager.cpp`, which
//! keeps samples per entity and diffs the newest against an older one.

use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::value::Value;

/// Samples refresh "internally" this often: nvml.h asks for more than
/// 100 ms between two nvmlGpmSampleGet calls "due to the internal sample
/// refresh rate".
pub(crate) const REFRESH_S: f64 = 0.1;

/// Enough for any client that frees what it allocates; past this,
/// nvmlGpmSampleAlloc answers NVML_ERROR_MEMORY, as nvml.h allows.
const MAX_SAMPLES: usize = 4096;

/// What a metric measures, which fixes how it is computed and bounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unit {
    /// nvml.h: "0.0 - 100.0"; the scenario gives percent.
    Percent,
    /// nvml.h: "in MiB/sec"; the scenario gives MiB/s.
    MibPerSec,
}

/// The metrics a scenario can script, by nvml.h's enum name less its
/// `NVML_GPM_METRIC_` prefix, in lower case: those whose unit nvml.h
/// documents (ids 1-97; DMMA, 8, only in headers from 13.2.1, which the
/// bindings here predate).
pub(crate) fn scriptable() -> Vec<(String, u32, Unit)> {
    use Unit::{MibPerSec, Percent};
    let mut out: Vec<(String, u32, Unit)> = [
        ("graphics_util", 1, Percent),
        ("sm_util", 2, Percent),
        ("sm_occupancy", 3, Percent),
        ("integer_util", 4, Percent),
        ("any_tensor_util", 5, Percent),
        ("dfma_tensor_util", 6, Percent),
        ("hmma_tensor_util", 7, Percent),
        ("imma_tensor_util", 9, Percent),
        ("dram_bw_util", 10, Percent),
        ("fp64_util", 11, Percent),
        ("fp32_util", 12, Percent),
        ("fp16_util", 13, Percent),
        ("pcie_tx_per_sec", 20, MibPerSec),
        ("pcie_rx_per_sec", 21, MibPerSec),
        ("nvlink_total_rx_per_sec", 60, MibPerSec),
        ("nvlink_total_tx_per_sec", 61, MibPerSec),
    ]
    .into_iter()
    .map(|(n, id, u)| (n.to_owned(), id, u))
    .collect();
    for n in 0..8 {
        out.push((format!("nvdec_{n}_util"), 30 + n, Percent));
        out.push((format!("nvjpg_{n}_util"), 40 + n, Percent));
    }
    for n in 0..2 {
        out.push((format!("nvofa_{n}_util"), 50 + n, Percent));
    }
    for n in 0..18 {
        out.push((format!("nvlink_l{n}_rx_per_sec"), 62 + 2 * n, MibPerSec));
        out.push((format!("nvlink_l{n}_tx_per_sec"), 63 + 2 * n, MibPerSec));
    }
    out
}

/// Whether nvml.h (the version the bindings were generated from, whose
/// NVML_GPM_METRIC_MAX is 210) defines `id` at all.
pub(crate) fn defined(id: u32) -> bool {
    matches!(id, 1..=7 | 9..=13 | 20 | 21 | 30..=37 | 40..=47 | 50 | 51 | 60..=97 | 100..=209)
}

/// One scripted metric of a GPU or GPU instance.
#[derive(Debug, Clone)]
pub(crate) struct Metric {
    pub id: u32,
    pub unit: Unit,
    pub value: Value,
}

/// Checks a `gpm` table's keys against `scriptable`.
pub(crate) fn resolve(table: &std::collections::BTreeMap<String, Value>) -> Result<Vec<Metric>, String> {
    let known = scriptable();
    (table.iter())
        .map(|(name, value)| match known.iter().find(|(n, ..)| n == name) {
            Some(&(_, id, unit)) => Ok(Metric { id, unit, value: value.clone() }),
            None => Err(format!("gpm: {name:?} is not a metric this simulator can script (see scenarios/demo.toml)")),
        })
        .collect()
}

/// Where a sample was taken: a GPU, or one GPU instance of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Origin {
    pub gpu: usize,
    pub gpu_instance: Option<u32>,
}

/// A filled sample: the counters as of the last internal refresh.
#[derive(Debug, Clone)]
pub(crate) struct Captured {
    pub origin: Origin,
    /// Seconds since init of the refresh the counters come from.
    pub refreshed_at: f64,
    /// Per scripted metric: its cumulative counter (the reading summed
    /// since init), which is all a sample holds.
    pub counters: Vec<(u32, Unit, f64)>,
}

impl Captured {
    /// The counters of `metrics` as of the last refresh before `t`.
    pub(crate) fn at(origin: Origin, metrics: &[Metric], t: f64) -> Captured {
        let refreshed_at = (t / REFRESH_S).floor() * REFRESH_S;
        let counters = metrics.iter().map(|m| (m.id, m.unit, m.value.integral(refreshed_at))).collect();
        Captured { origin, refreshed_at, counters }
    }

    fn counter(&self, id: u32) -> Option<(Unit, f64)> {
        self.counters.iter().find(|c| c.0 == id).map(|&(_, u, c)| (u, c))
    }
}

/// Why a metric has no value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Missing {
    /// nvml.h defines no metric with this id.
    Undefined,
    /// The board (the scenario) does not report it.
    NotReported,
}

/// A metric over the interval between two samples of the same origin.
///
/// Inferred, not documented: when both samples hold the same refresh
/// (taken less than 100 ms apart, or in one refresh period), no time has
/// passed by the counters' clock. A ratio of activity to elapsed cycles
/// is then 0/0, NaN (FACTS: "utilisations 0-100 (can be NaN)"), while a
/// rate reads 0: DCGM's documentation warns that "collection at higher
/// frequencies will result in zeroes" and measurements through DCGM show
/// its byte rates reading 0 and its ratios blank (DCGM turns NaN into
/// blank) at those rates.
pub(crate) fn metric(a: &Captured, b: &Captured, id: u32) -> Result<f64, Missing> {
    if !defined(id) {
        return Err(Missing::Undefined);
    }
    let ((unit, ca), (_, cb)) = a.counter(id).zip(b.counter(id)).ok_or(Missing::NotReported)?;
    let dt = b.refreshed_at - a.refreshed_at;
    if dt == 0.0 {
        return Ok(match unit {
            Unit::Percent => f64::NAN,
            Unit::MibPerSec => 0.0,
        });
    }
    let mean = (cb - ca) / dt;
    Ok(match unit {
        Unit::Percent => mean.clamp(0.0, 100.0),
        Unit::MibPerSec => mean.max(0.0),
    })
}

/// The allocated samples, by handle slot: `None` is a free slot,
/// `Some(None)` allocated but never filled.
static SAMPLES: Mutex<Vec<Option<Option<Captured>>>> = Mutex::new(Vec::new());

fn samples() -> MutexGuard<'static, Vec<Option<Option<Captured>>>> {
    // Each update is one assignment: a panic cannot leave the table torn.
    SAMPLES.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A new, empty sample's slot; `None` when the table is full.
pub(crate) fn alloc() -> Option<usize> {
    let mut table = samples();
    if let Some(free) = table.iter().position(Option::is_none) {
        table[free] = Some(None);
        return Some(free);
    }
    if table.len() >= MAX_SAMPLES {
        return None;
    }
    table.push(Some(None));
    Some(table.len() - 1)
}

/// Frees an allocated slot; false if it was not allocated.
pub(crate) fn free(slot: usize) -> bool {
    match samples().get_mut(slot) {
        Some(s @ Some(_)) => {
            *s = None;
            true
        }
        _ => false,
    }
}

/// Fills an allocated slot; false if it was not allocated.
pub(crate) fn fill(slot: usize, captured: Captured) -> bool {
    match samples().get_mut(slot) {
        Some(Some(s)) => {
            *s = Some(captured);
            true
        }
        _ => false,
    }
}

/// An allocated slot's content; `None` if not allocated, `Some(None)` if
/// never filled.
pub(crate) fn get(slot: usize) -> Option<Option<Captured>> {
    samples().get(slot).cloned().flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn origin() -> Origin {
        Origin { gpu: 0, gpu_instance: None }
    }

    fn metrics() -> Vec<Metric> {
        vec![
            Metric { id: 2, unit: Unit::Percent, value: Value::Const(7.0) },
            Metric { id: 20, unit: Unit::MibPerSec, value: Value::Const(1500.0) },
        ]
    }

    #[test]
    fn a_metric_is_the_counter_growth_over_the_interval() {
        let (a, b) = (Captured::at(origin(), &metrics(), 1.05), Captured::at(origin(), &metrics(), 2.31));
        assert!((metric(&a, &b, 2).unwrap() - 7.0).abs() < 1e-9);
        assert!((metric(&a, &b, 20).unwrap() - 1500.0).abs() < 1e-6);
        // Either order: the interval is the same.
        assert!((metric(&b, &a, 2).unwrap() - 7.0).abs() < 1e-9);
    }

    #[test]
    fn samples_within_one_refresh_give_nan_ratios_and_zero_rates() {
        let (a, b) = (Captured::at(origin(), &metrics(), 1.01), Captured::at(origin(), &metrics(), 1.09));
        assert!(metric(&a, &b, 2).unwrap().is_nan());
        assert_eq!(metric(&a, &b, 20), Ok(0.0));
    }

    #[test]
    fn unscripted_and_undefined_metrics_are_missing_for_different_reasons() {
        let (a, b) = (Captured::at(origin(), &metrics(), 1.0), Captured::at(origin(), &metrics(), 2.0));
        assert_eq!(metric(&a, &b, 1), Err(Missing::NotReported));
        assert_eq!(metric(&a, &b, 100), Err(Missing::NotReported));
        assert_eq!(metric(&a, &b, 8), Err(Missing::Undefined));
        assert_eq!(metric(&a, &b, 210), Err(Missing::Undefined));
    }

    #[test]
    fn every_scriptable_name_is_unique_and_defined() {
        let all = scriptable();
        assert_eq!(all.len(), 16 + 16 + 2 + 36);
        for (i, (name, id, _)) in all.iter().enumerate() {
            assert!(defined(*id), "{name}");
            assert!(all[..i].iter().all(|(n, j, _)| n != name && j != id), "{name}");
        }
    }
}
