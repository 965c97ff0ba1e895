//! The GPU's activity counters (NVML GPM, Hopper and newer): how much of
//! the GPU really works, where `utilization.gpu` counts any kernel on any
//! SM as 100 %.
//!
//! A figure is the difference of two samples (nvml.h: `nvmlGpmMetricsGet`
//! compares "two time-separated samples", which must be more than 100 ms
//! apart "due to the internal sample refresh rate"). So one sample per GPU
//! and per GPU instance is kept from tick to tick, and a tick that comes
//! sooner than that after it reuses the last figures rather than asking:
//! at `--interval 10ms` the counters are read every 100 ms or so, which
//! `Activity::period_ms` says.
//!
//! Absent is never zero. A board or driver without GPM (pre-Hopper,
//! vGPU, before R520) answers NOT_SUPPORTED, asked once; a driver that
//! starts refusing (NO_PERMISSION, seen in unprivileged containers after
//! minutes, DCGM issue 214) or fails is asked again after a pause that
//! grows, never every tick. A metric the board does not report is `None`
//! alone.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use nvml_wrapper::enums::gpm::GpmMetricId;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::gpm::{GpmSample, gpm_metrics_get};
use nvml_wrapper::{Device, Nvml};
use nvml_wrapper_sys::bindings::nvmlGpmSample_t;

use super::calls::Calls;
use crate::model::{Activity, ActivityUnavailable};

/// nvml.h: samples must be more than 100 ms apart.
pub const MIN_GAP: Duration = Duration::from_millis(100);
/// After a refusal or failure, the first pause; it doubles up to `MAX_PAUSE`.
const FIRST_PAUSE: Duration = Duration::from_secs(30);
const MAX_PAUSE: Duration = Duration::from_secs(600);

/// The metrics asked, in this order (`Activity`'s fields). Fourteen: far
/// fewer than the 98 entries of the smallest `metrics` array a driver's
/// header has had (`NVML_GPM_METRIC_MAX`, which grew to 210 and 333
/// without a version change).
const METRICS: [GpmMetricId; 14] = [
    GpmMetricId::SmUtil,
    GpmMetricId::SmOccupancy,
    GpmMetricId::AnyTensorUtil,
    GpmMetricId::HmmaTensorUtil,
    GpmMetricId::ImmaTensorUtil,
    GpmMetricId::DfmaTensorUtil,
    GpmMetricId::DramBwUtil,
    GpmMetricId::Fp64Util,
    GpmMetricId::Fp32Util,
    GpmMetricId::Fp16Util,
    GpmMetricId::PcieTxPerSec,
    GpmMetricId::PcieRxPerSec,
    GpmMetricId::NvlinkTotalTxPerSec,
    GpmMetricId::NvlinkTotalRxPerSec,
];

/// A sample NVML allocated, kept between ticks. A raw handle, because
/// nvml-wrapper's `GpmSample` borrows the `Nvml` that this source takes
/// out of itself for each tick; it is wrapped again (`GpmSample::from_handle`)
/// for every use and freed through `Gpm::free_all` or `retain`.
struct Kept {
    handle: nvmlGpmSample_t,
    at: Instant,
}

// SAFETY: the handle is an opaque allocation of NVML's, which nvml-wrapper
// itself lets move between threads (`unsafe impl Send for GpmSample`); it
// is only ever used by the thread that holds the source.
unsafe impl Send for Kept {}

/// One GPU's, or one GPU instance's, counters.
#[derive(Default)]
struct Counters {
    prev: Option<Kept>,
    /// The figures of the last pair of samples, shown again by ticks that
    /// come less than `MIN_GAP` after it.
    last: Option<Activity>,
    /// Refused or failed: why, and when to ask again (`None`: never).
    held: Option<(ActivityUnavailable, Option<Instant>)>,
    failures: u32,
}

/// Every watched GPU's and GPU instance's counters, by the GPU's key
/// (its UUID, else its index) and, for an instance, its id.
#[derive(Default)]
pub struct Gpm {
    counters: HashMap<(String, Option<u32>), Counters>,
    /// Whether each GPU has GPM, once its support query has answered.
    supported: HashMap<String, bool>,
}

/// What one read gives: the figures, or why there are none.
pub type Reading = (Option<Activity>, Option<ActivityUnavailable>);

impl Gpm {
    /// The GPU's activity, or (for `instance`) that of one of its GPU
    /// instances (`nvmlGpmMigSampleGet`).
    pub fn read(
        &mut self,
        nvml: &Nvml,
        key: &str,
        index: u32,
        dev: &Device<'_>,
        instance: Option<u32>,
        calls: &Calls,
    ) -> Reading {
        if !self.supports(key, index, dev, calls) {
            return (None, Some(ActivityUnavailable::NotSupported));
        }
        let now = Instant::now();
        let c = self.counters.entry((key.to_string(), instance)).or_default();
        if let Some((why, retry)) = c.held {
            match retry {
                Some(at) if now >= at => c.held = None,
                _ => return (None, Some(why)),
            }
        }
        if let Some(prev) = &c.prev
            && now.duration_since(prev.at) <= MIN_GAP
        {
            return match &c.last {
                Some(a) => (Some(a.clone()), None),
                None => (None, Some(ActivityUnavailable::FirstSample)),
            };
        }
        let sample = calls.track("nvmlGpmSampleGet", Some(index), || match instance {
            Some(gi) => dev.gpm_mig_sample(gi),
            None => dev.gpm_sample(),
        });
        let sample = match sample {
            Ok(s) => s,
            Err(e) => return c.refused(nvml, &e, now),
        };
        let at = Instant::now();
        let Some(prev) = c.prev.take() else {
            c.prev = Some(Kept { handle: sample.into_handle(), at });
            return (None, Some(ActivityUnavailable::FirstSample));
        };
        // SAFETY: `prev` was allocated by this `Nvml` (a new session frees
        // every kept sample first, `free_all`) and is owned here alone.
        let older = unsafe { GpmSample::from_handle(nvml, prev.handle) };
        let got = calls.track("nvmlGpmMetricsGet", Some(index), || gpm_metrics_get(nvml, &older, &sample, &METRICS));
        drop(older);
        c.prev = Some(Kept { handle: sample.into_handle(), at });
        match got {
            Ok(results) => {
                let values: Vec<Option<f64>> =
                    results.into_iter().map(|r| r.ok().map(|m| m.value).filter(|v| v.is_finite())).collect();
                let period = at.duration_since(prev.at);
                let activity = activity(&values, period);
                c.failures = 0;
                c.last = Some(activity.clone());
                (Some(activity), None)
            }
            Err(e) => c.refused(nvml, &e, now),
        }
    }

    /// Whether the GPU has GPM: asked once per GPU (`nvmlGpmQueryDeviceSupport`).
    fn supports(&mut self, key: &str, index: u32, dev: &Device<'_>, calls: &Calls) -> bool {
        if let Some(&known) = self.supported.get(key) {
            return known;
        }
        match calls.track("nvmlGpmQueryDeviceSupport", Some(index), || dev.gpm_support()) {
            Ok(yes) => {
                self.supported.insert(key.to_string(), yes);
                yes
            }
            Err(NvmlError::NotSupported | NvmlError::FunctionNotFound) => {
                self.supported.insert(key.to_string(), false);
                false
            }
            // Asked again next tick: a transient failure is not an answer.
            Err(_) => false,
        }
    }

    /// Frees the samples of GPUs no longer watched (`keys`: those that are).
    pub fn retain(&mut self, nvml: &Nvml, keys: &[String]) {
        self.counters.retain(|(key, _), c| {
            let keep = keys.contains(key);
            if !keep {
                c.free(nvml);
            }
            keep
        });
        self.supported.retain(|key, _| keys.contains(key));
    }

    /// Frees every kept sample: before the session that allocated them ends.
    pub fn free_all(&mut self, nvml: &Nvml) {
        for c in self.counters.values_mut() {
            c.free(nvml);
        }
        self.counters.clear();
        self.supported.clear();
    }

    /// When the youngest kept sample was taken: a one-shot waits until
    /// `MIN_GAP` after it for its second.
    pub fn youngest(&self) -> Option<Instant> {
        self.counters.values().filter_map(|c| c.prev.as_ref().map(|k| k.at)).max()
    }
}

impl Counters {
    /// NOT_SUPPORTED (a vGPU slice, a MIG instance the driver does not
    /// sample) is for good; anything else is asked again after a pause.
    fn refused(&mut self, nvml: &Nvml, e: &NvmlError, now: Instant) -> Reading {
        self.free(nvml);
        self.last = None;
        let why = match e {
            NvmlError::NotSupported | NvmlError::FunctionNotFound => {
                self.held = Some((ActivityUnavailable::NotSupported, None));
                return (None, Some(ActivityUnavailable::NotSupported));
            }
            NvmlError::NoPermission => ActivityUnavailable::NoPermission,
            _ => ActivityUnavailable::Failed,
        };
        let pause = FIRST_PAUSE.saturating_mul(1 << self.failures.min(5)).min(MAX_PAUSE);
        self.failures = self.failures.saturating_add(1);
        self.held = Some((why, Some(now + pause)));
        (None, Some(why))
    }

    fn free(&mut self, nvml: &Nvml) {
        if let Some(kept) = self.prev.take() {
            // SAFETY: allocated by this `Nvml` and owned here alone; dropped
            // at once, which frees it.
            drop(unsafe { GpmSample::from_handle(nvml, kept.handle) });
        }
    }
}

/// `Activity` from `METRICS`' values, in their order. Percentages are kept
/// within 0-100 (a driver's rounding can step past); rates come in MiB/s.
fn activity(values: &[Option<f64>], period: Duration) -> Activity {
    let v = |i: usize| values.get(i).copied().flatten();
    let pct = |i| v(i).map(|x| x.clamp(0.0, 100.0));
    let rate = |i| v(i).map(|x| (x.max(0.0) * 1_048_576.0).round() as u64);
    Activity {
        period_ms: u64::try_from(period.as_millis()).unwrap_or(u64::MAX),
        sm_active: pct(0),
        sm_occupancy: pct(1),
        tensor_active: pct(2),
        tensor_hmma: pct(3),
        tensor_imma: pct(4),
        tensor_dfma: pct(5),
        dram_active: pct(6),
        fp64_active: pct(7),
        fp32_active: pct(8),
        fp16_active: pct(9),
        pcie_tx_bytes_per_s: rate(10),
        pcie_rx_bytes_per_s: rate(11),
        nvlink_tx_bytes_per_s: rate(12),
        nvlink_rx_bytes_per_s: rate(13),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_keep_their_order_bounds_and_absences() {
        let mut values = vec![Some(6.0), None, Some(101.5), Some(-0.2), None, None, Some(3.0)];
        values.extend([None, None, None, Some(1.5), Some(0.0), None, Some(2.0)]);
        let a = activity(&values, Duration::from_millis(1_002));
        assert_eq!(a.period_ms, 1_002);
        assert_eq!(
            (a.sm_active, a.sm_occupancy, a.tensor_active, a.tensor_hmma),
            (Some(6.0), None, Some(100.0), Some(0.0))
        );
        assert_eq!(a.dram_active, Some(3.0));
        assert_eq!((a.fp64_active, a.fp32_active), (None, None));
        assert_eq!((a.pcie_tx_bytes_per_s, a.pcie_rx_bytes_per_s), (Some(1_572_864), Some(0)));
        assert_eq!((a.nvlink_tx_bytes_per_s, a.nvlink_rx_bytes_per_s), (None, Some(2_097_152)));
        assert_eq!(activity(&[], Duration::ZERO), Activity::default(), "nothing read is nothing, not 0 %");
    }
}
