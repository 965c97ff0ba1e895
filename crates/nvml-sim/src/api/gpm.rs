//! GPU Performance Monitoring: the support query, samples, and the
//! metrics between two samples (nvml.h's "GPM Functions").
//!
//! What nvml.h documents is followed as written. Where it says only
//! "Nonzero NVML_ERROR_? enum on error", the codes are inferred and each
//! is marked so below.

use std::ptr;

use nvml_wrapper_sys::bindings::{
    NVML_GPM_METRICS_GET_VERSION, NVML_GPM_SUPPORT_VERSION, nvmlDevice_t, nvmlGpmMetric_t, nvmlGpmMetricsGet_t,
    nvmlGpmSample_st, nvmlGpmSample_t, nvmlGpmSupport_t,
};

use crate::call::{self, Dev};
use crate::code::{ARGUMENT_VERSION_MISMATCH, INVALID_ARGUMENT, MEMORY, NO_PERMISSION, NOT_SUPPORTED, SUCCESS};
use crate::code::{Outcome, nvmlReturn_t};
use crate::gpm::{self, Captured, Metric, Missing, Origin};

/// Sample handles are tagged slots, never dereferenced, like device
/// handles: a stale or foreign pointer is refused rather than followed.
const SAMPLE_BASE: usize = 0x67b0_0000;

/// nvml.h's NVML_GPM_METRIC_MAX in the header the bindings come from:
/// the most metrics one call may ask for (the struct's array length).
const METRIC_MAX: u32 = nvml_wrapper_sys::bindings::nvmlGpmMetricId_t_NVML_GPM_METRIC_MAX;

fn handle(slot: usize) -> nvmlGpmSample_t {
    ptr::without_provenance_mut::<nvmlGpmSample_st>(SAMPLE_BASE + slot)
}

fn slot(sample: nvmlGpmSample_t) -> Option<usize> {
    sample.addr().checked_sub(SAMPLE_BASE)
}

/// `isSupportedDevice` is 1 on a board with GPM and 0 on one without; the
/// query itself succeeds on both, as DCGM's `DoesNvmlDeviceSupportGpm`
/// expects. A `version` other than NVML_GPM_SUPPORT_VERSION is refused
/// with ARGUMENT_VERSION_MISMATCH: go-nvml issue 168 / pull 176 saw a real
/// driver do so when go-nvml sent a struct-size version here.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlGpmQueryDeviceSupport(
    device: nvmlDevice_t,
    support: *mut nvmlGpmSupport_t,
) -> nvmlReturn_t {
    call::device("nvmlGpmQueryDeviceSupport", device, None, |dev| {
        if support.is_null() {
            return Err(INVALID_ARGUMENT);
        }
        // SAFETY: non-null, and by NVML's contract valid for reading and writing one struct.
        unsafe {
            if (&raw const (*support).version).read() != NVML_GPM_SUPPORT_VERSION {
                return Err(ARGUMENT_VERSION_MISMATCH);
            }
            (&raw mut (*support).isSupportedDevice).write(u32::from(dev.gpu.gpm.is_some()));
        }
        Ok(())
    })
}

/// nvml.h: INVALID_ARGUMENT for a null pointer, MEMORY when out of memory
/// (here: past 4096 samples allocated at once).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlGpmSampleAlloc(sample: *mut nvmlGpmSample_t) -> nvmlReturn_t {
    call::run("nvmlGpmSampleAlloc", |_| {
        if sample.is_null() {
            return Err(INVALID_ARGUMENT);
        }
        let slot = gpm::alloc().ok_or(MEMORY)?;
        // SAFETY: non-null, and by NVML's contract valid for writing one handle.
        unsafe { sample.write(handle(slot)) };
        Ok(())
    })
}

/// nvml.h: INVALID_ARGUMENT "if an invalid pointer is provided": one this
/// library did not allocate, or has freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlGpmSampleFree(sample: nvmlGpmSample_t) -> nvmlReturn_t {
    call::run("nvmlGpmSampleFree", |_| if slot(sample).is_some_and(gpm::free) { Ok(()) } else { Err(INVALID_ARGUMENT) })
}

/// Fills `sample` with the device's counters; on a MIG device handle
/// (which nvml.h says this call accepts), with its GPU instance's.
/// NOT_SUPPORTED on a board without GPM and NO_PERMISSION from the
/// scenario's `gpm_no_permission_after_s` (both inferred: nvml.h lists no
/// codes here; NO_PERMISSION is what DCGM issue 214 saw).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlGpmSampleGet(device: nvmlDevice_t, sample: nvmlGpmSample_t) -> nvmlReturn_t {
    call::device("nvmlGpmSampleGet", device, None, |dev| {
        let metrics = gpm_of(dev)?;
        match dev.mig {
            None => take(dev, sample, None, metrics),
            Some(m) => {
                let id = m.spec.gpu_instance_id;
                take(dev, sample, Some(id), dev.gpu.instance_gpm(id).unwrap_or(&[]))
            }
        }
    })
}

/// Fills `sample` with GPU instance `gpu_instance_id`'s counters. On a
/// GPU without that instance (MIG off included), INVALID_ARGUMENT, as
/// nvml-wrapper documents for "the device or GPU instance ID is invalid"
/// (inferred: nvml.h lists no codes).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlGpmMigSampleGet(
    device: nvmlDevice_t,
    gpu_instance_id: u32,
    sample: nvmlGpmSample_t,
) -> nvmlReturn_t {
    call::device("nvmlGpmMigSampleGet", device, None, |dev| {
        gpm_of(dev)?;
        let metrics = dev.gpu.instance_gpm(gpu_instance_id).ok_or(INVALID_ARGUMENT)?;
        take(dev, sample, Some(gpu_instance_id), metrics)
    })
}

/// The board's scripted metrics, if it has GPM and may still sample.
fn gpm_of<'a>(dev: &Dev<'a>) -> Result<&'a [Metric], nvmlReturn_t> {
    let metrics = dev.gpu.gpm.as_deref().ok_or(NOT_SUPPORTED)?;
    if dev.gpu.gpm_refused_at(dev.t) {
        return Err(NO_PERMISSION);
    }
    Ok(metrics)
}

fn take(dev: &Dev<'_>, sample: nvmlGpmSample_t, gpu_instance: Option<u32>, metrics: &[Metric]) -> Outcome {
    let origin = Origin { gpu: dev.position, gpu_instance };
    let captured = Captured::at(origin, metrics, dev.t);
    if slot(sample).is_some_and(|s| gpm::fill(s, captured)) { Ok(()) } else { Err(INVALID_ARGUMENT) }
}

/// Computes the requested metrics between `sample1` and `sample2`, each
/// with its own return code: NOT_SUPPORTED for one the board does not
/// report, INVALID_ARGUMENT for an id nvml.h does not define (inferred).
///
/// The call fails as a whole, with nothing written, for: a null pointer or
/// `numMetrics` above NVML_GPM_METRIC_MAX (INVALID_ARGUMENT, inferred); a
/// `version` other than NVML_GPM_METRICS_GET_VERSION
/// (ARGUMENT_VERSION_MISMATCH, inferred from what nvmlGpmQueryDeviceSupport
/// does); a sample not allocated here, never filled, or two samples of
/// different devices or GPU instances (INVALID_ARGUMENT, inferred).
/// `metricInfo`'s three strings are left null, which nvml.h allows ("Those
/// can be NULL if not defined"): the real strings are not known here.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlGpmMetricsGet(request: *mut nvmlGpmMetricsGet_t) -> nvmlReturn_t {
    call::run("nvmlGpmMetricsGet", |_| {
        if request.is_null() {
            return Err(INVALID_ARGUMENT);
        }
        // SAFETY: non-null; by NVML's contract the header fields are readable.
        let (version, count, s1, s2) = unsafe {
            (
                (&raw const (*request).version).read(),
                (&raw const (*request).numMetrics).read(),
                (&raw const (*request).sample1).read(),
                (&raw const (*request).sample2).read(),
            )
        };
        if version != NVML_GPM_METRICS_GET_VERSION {
            return Err(ARGUMENT_VERSION_MISMATCH);
        }
        if count > METRIC_MAX {
            return Err(INVALID_ARGUMENT);
        }
        let filled = |s| slot(s).and_then(gpm::get).flatten().ok_or(INVALID_ARGUMENT);
        let (a, b) = (filled(s1)?, filled(s2)?);
        if a.origin != b.origin {
            return Err(INVALID_ARGUMENT);
        }
        // Element by element through raw pointers: a client built against an
        // older header has a shorter array (98 entries), valid up to
        // `numMetrics` only.
        // SAFETY: `request` is non-null; the array's address is computed without reading.
        let metrics = unsafe { (&raw mut (*request).metrics).cast::<nvmlGpmMetric_t>() };
        for i in 0..count as usize {
            // SAFETY: by NVML's contract `metrics` holds at least `numMetrics` entries.
            let entry = unsafe { metrics.add(i) };
            // SAFETY: as above, readable and writable.
            let id = unsafe { (&raw const (*entry).metricId).read() };
            let (code, value) = match gpm::metric(&a, &b, id) {
                Ok(v) => (SUCCESS, v),
                Err(Missing::NotReported) => (NOT_SUPPORTED, 0.0),
                Err(Missing::Undefined) => (INVALID_ARGUMENT, 0.0),
            };
            // SAFETY: as above.
            unsafe {
                (&raw mut (*entry).nvmlReturn).write(code);
                (&raw mut (*entry).value).write(value);
                (&raw mut (*entry).metricInfo.shortName).write(ptr::null_mut());
                (&raw mut (*entry).metricInfo.longName).write(ptr::null_mut());
                (&raw mut (*entry).metricInfo.unit).write(ptr::null_mut());
            }
        }
        Ok(())
    })
}
